"""The prompt IR every component shares.

A `Conversation` is one request in any dialect, as an ordered list of `Segment`s in the order
its provider builds the cache prefix (Anthropic: tools, system, messages; OpenAI: tools and
schemas, then messages; Gemini: system instruction, tools, contents). Each `Block` keeps its
exact native JSON, so encoding an unannotated conversation gives back the request it came from;
the planner's annotations (tokens, stability, checkpoints) live beside the native data and are
only written to the wire by a dialect's encoder.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
import json
import operator
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from prefixgate.compact_json import compact
from prefixgate.reuse import weigh

# The name of a registered wire format (`prefixgate.dialects.WIRE_FORMATS`); adding a format adds no name here.
Dialect = str
Stability = Literal["static", "session", "dynamic"]
BlockKind = Literal[
    "text", "image", "document", "audio", "file", "tool_def", "tool_call", "tool_result",
    "thinking", "schema", "config", "other",
]
# Segment roles: the chat roles of the three APIs plus the request-level prefix parts.
Role = Literal["tools", "schema", "system", "developer", "user", "assistant", "tool", "function", "model"]

TTLS = ("5m", "30m", "1h", "12h", "24h")


@dataclass(frozen=True)
class Checkpoint:
    """A cache breakpoint at the end of a block: everything up to and including it is one prefix."""

    ttl: str = "5m"

    def __post_init__(self) -> None:
        if self.ttl not in TTLS and not (self.ttl.endswith("s") and self.ttl[:-1].isdigit()):
            raise ValueError(f"checkpoint ttl must be one of {TTLS} or '<seconds>s', got {self.ttl!r}")


@dataclass
class Block:
    """One content block. `native` is its exact wire JSON; `text` is what it says, for counting and analysis."""

    kind: BlockKind
    native: Any
    text: str = ""
    tokens: int | None = None
    stability: Stability | None = None
    checkpoint: Checkpoint | None = None
    # Set when the planner changed `text`; encoders then write `text` back into the native shape.
    edited: bool = False
    # Fields of `native` that are not prompt content (a Responses input item's `id`): left out of `key`.
    unrendered: tuple[str, ...] = ()
    _key: str | None = field(default=None, repr=False, compare=False)
    # What follows from the content alone (token counts by encoding), kept in one dict that the block's
    # copies share: a copy has the same content. A change of content gives the block a new dict.
    _facts: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def set_text(self, text: str) -> None:
        self.text = text
        self.edited = True
        self._key = self._facts = None

    def set_native(self, native: Any) -> None:
        """Replace the wire JSON with different content (not the same content's object: assign that)."""
        self.native = native
        self._key = self._facts = None

    def facts(self) -> dict[str, Any]:
        if self._facts is None:
            self._facts = {}
        return self._facts

    @property
    def key(self) -> str:
        """Content hash of what this block puts in the prefix: its native JSON without cache markers
        (a marker says where to cache, it is not prompt content)."""
        if self._key is None:
            native = self.native
            native = self.rendered()
            if self.edited:
                # What goes on the wire: the edited text in the native shape (not the original text).
                native = {**native, "text": self.text} if isinstance(native, dict) else self.text
            self._key = content_hash(canonical_native(native))
        return self._key

    def rendered(self) -> Any:
        """`native` without the fields that are not prompt content (`unrendered`)."""
        native = self.native
        if self.unrendered and isinstance(native, dict):
            return {k: v for k, v in native.items() if k not in self.unrendered}
        return native


@dataclass
class Segment:
    """One prefix part: a message, or a request-level part such as the tools list or the system prompt.

    `native` holds the segment's wire JSON with its block list removed (a message's role, name,
    tool_call_id...), `blocks_field` names where the blocks go back, and `form` remembers whether
    content was a bare string or a list, so unannotated encoding is byte-faithful.
    """

    role: Role
    blocks: list[Block]
    native: Any = None
    blocks_field: str | None = None
    form: Literal["string", "list", "object", "absent"] = "list"
    stability: Stability | None = None
    # In a draft (`Conversation.draft`): the block list of the segment this one was drafted from, whose
    # blocks this one shares until `own` copies them.
    _source: list[Block] | None = field(default=None, repr=False, compare=False)
    # The blocks a parser made from `native`, for a segment that is never changed in place (`mark_parsed`,
    # `touched`).
    _parsed: tuple[Block, ...] | None = field(default=None, repr=False, compare=False)

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.blocks if b.text)

    def copy(self) -> Segment:
        """A copy with its own block list and blocks (sharing their native JSON, which nothing mutates)."""
        new = _shallow(self)
        new.blocks = [_shallow(b) for b in self.blocks]
        new._source = new._parsed = None
        return new

    def copy_for(self, native: Any, parts: list) -> Segment:
        """A copy of this segment for other JSON of equal content: `native` as its native and each item of
        `parts` as its block's, in order (their keys and facts hold, as the content is the same)."""
        new = _shallow(self)
        new.native, new._source, new._parsed = native, None, None
        blocks = []
        for block, part in zip(self.blocks, parts, strict=True):
            mine = _shallow(block)
            mine.native = part
            blocks.append(mine)
        new.blocks = blocks
        return new

    def mark_parsed(self) -> None:
        """Remember this segment's blocks as its parser made them from `native`, for a segment nothing will
        change in place: one parsed from a request's bytes, which the requests that resend it share
        (`dialects.resent`; a plan changes a draft, through `own`). Under `guard_shared` a write to the
        segment or its blocks then raises."""
        self._parsed = tuple(self.blocks)
        if _GUARDED:
            self.__dict__["_shared"] = True
            for block in self.blocks:
                block.__dict__["_shared"] = True

    def own(self, block: Block) -> Block:
        """`block` (one of this segment's), first made this segment's own copy if it is still shared with
        the conversation this draft came from. Whoever changes a block of a draft calls this first."""
        if self._source is not None and any(b is block for b in self._source):
            mine = _shallow(block)
            self.blocks[next(i for i, b in enumerate(self.blocks) if b is block)] = mine
            return mine
        return block

    @property
    def tokens(self) -> int | None:
        counts = [b.tokens for b in self.blocks]
        return None if any(c is None for c in counts) else sum(counts)  # type: ignore[misc]


@dataclass
class Conversation:
    """A whole request: prefix segments in provider order plus every other field, untouched."""

    dialect: Dialect
    model: str | None
    segments: list[Segment]
    # The request body's other fields, in their original order; prefix fields appear in
    # `field_order` so encoders can put them back where they were.
    params: dict[str, Any] = field(default_factory=dict)
    field_order: list[str] = field(default_factory=list)
    stream: bool = False
    # Provider-specific cache fields the planner sets (e.g. OpenAI prompt_cache_key, Gemini cachedContent).
    cache_params: dict[str, Any] = field(default_factory=dict)
    # The last `prefix_keys` answer: (root, the blocks' content hashes, their prefix keys, the hash states).
    _chained: ChainedKeys | None = field(default=None, repr=False, compare=False)
    # The parsed body with its messages' byte spans (`dialects.resent.Body`), when the parser kept them: the
    # encoder copies the bytes of the messages that go out unchanged instead of encoding them again.
    source: Any = field(default=None, repr=False, compare=False)

    @property
    def carry(self) -> Carry | None:
        """What the request this one resends left for it, and what this one leaves (`Carry`): kept with
        the body it was parsed from."""
        return self.source.carry if self.source is not None else None

    def blocks(self) -> list[Block]:
        return [b for s in self.segments for b in s.blocks]

    def checkpoints(self) -> list[tuple[int, int, Checkpoint]]:
        """(segment index, block index, checkpoint) for every placed checkpoint, in prefix order."""
        return [
            (si, bi, b.checkpoint)
            for si, s in enumerate(self.segments)
            for bi, b in enumerate(s.blocks)
            if b.checkpoint is not None
        ]

    def copy(self) -> Conversation:
        """A structural copy: new segments and blocks, shared native JSON. Natives are never mutated
        in place anywhere (encoders build new dicts), so sharing them is safe and keeps planning cheap."""
        segments = [s.copy() for s in self.segments]
        return Conversation(self.dialect, self.model, segments, dict(self.params), list(self.field_order),
                            self.stream, dict(self.cache_params), source=self.source)

    def draft(self) -> Conversation:
        """A copy to change cheaply: its own segments and block lists, but blocks shared with this
        conversation until `Segment.own` copies the few that change (the planner edits a handful of an
        agent request's thousand blocks). Changing a shared block changes this conversation too: every
        change to a draft's block goes through `own`."""
        segments = []
        for s in self.segments:
            seg = _shallow(s)
            seg.blocks, seg._source = list(s.blocks), s.blocks
            segments.append(seg)
        return Conversation(self.dialect, self.model, segments, dict(self.params), list(self.field_order),
                            self.stream, dict(self.cache_params), source=self.source)

    def block_keys(self, blocks: list[Block] | None = None) -> list[str]:
        """Each block's content hash (`Block.key`), in prefix order (of `blocks`, when given)."""
        blocks = self.blocks() if blocks is None else blocks
        keys = list(map(_HASH, blocks))     # the cached ones, in C; an edit (set_text) cleared its block's
        for i in itertools.compress(itertools.count(), map(operator.is_, keys, itertools.repeat(None))):
            keys[i] = blocks[i].key
        return keys

    def prefix_keys(self) -> list[str]:
        """Chained content hashes, one per block: equal keys mean equal prefixes up to that block.

        Only the blocks past those this conversation shares with its last answer, or with the request it
        resends (`carry`), are chained. (A memo of links by (key before, block key) saved nothing measurable
        beside these, bench/memo_pays.py, and held a hash state per block of every conversation: dropped.)"""
        hashes = self.block_keys()
        root = f"{self.dialect}:{self.model}"
        keys: list[str] = []
        states: list[Any] = []
        shared = 0
        for earlier in (self._chained, self.carry.earlier.prefix_keys if self.carry is not None else None):
            if earlier is not None and earlier.root == root:
                n = equal_run(earlier.hashes, hashes)     # the chain follows the blocks' content alone
                if n > shared:
                    shared, keys, states = n, earlier.keys[:n], earlier.states[:n]
        prev, state = (keys[-1], states[-1]) if keys else (root, None)
        for key in hashes[shared:]:
            # The hash state after `prev`, extended by this block; never updated in place.
            state = state.copy() if state is not None else hashlib.sha256(prev.encode())
            state.update(key.encode())
            prev = state.hexdigest()[:32]
            keys.append(prev)
            states.append(state)
        self._chained = ChainedKeys(root, hashes, keys, states)
        if self.carry is not None:
            self.carry.leave("prefix_keys", self._chained, (len(keys) - shared) * _KEY_BYTES)
        return list(keys)


class Step(enum.Enum):
    """A planning step whose per-block answers a request leaves for the next one (`Carried.steps`), with the
    record of what else (beside each block's content) its answers follow from: `STEP_INPUTS`."""

    CUMULATIVE_TOKENS = "cumulative tokens"
    MARKABLE = "markable"


@dataclass(frozen=True)
class CountedIn:
    """Cumulative token counts follow from the blocks and the encoding that counts them."""

    encoding: str


@dataclass(frozen=True)
class MarkableFor:
    """Where a checkpoint may sit follows from the blocks, their roles, the provider and whether the target
    prices by rows (`Target.rows_of`)."""

    provider: str
    by_rows: bool


STEP_INPUTS: dict[Step, type] = {Step.CUMULATIVE_TOKENS: CountedIn, Step.MARKABLE: MarkableFor}


@dataclass(frozen=True)
class PerBlock:
    """One step's answers, one per block: valid for a later request only with equal `inputs`, and for its
    leading blocks whose `keys` equal these."""

    inputs: Any
    keys: list[Any]
    values: list[Any]


@dataclass(frozen=True)
class ChainedKeys:
    """A `Conversation.prefix_keys` answer: its root, the blocks' content hashes, their prefix keys and the
    hash state after each (never updated in place)."""

    root: str
    hashes: list[str]
    keys: list[str]
    states: list[Any]


@dataclass(frozen=True)
class ShapeRecord:
    """A `prefix_shape` answer: the ledger entries of the leading segments with these roles, block counts
    and block keys, under `encoding`."""

    encoding: str
    roles: list[str]
    sizes: list[int]
    keys: list[str]
    entries: list[str]


@dataclass(slots=True)
class Carried:
    """What one request leaves for the next request that resends it: one typed slot per kind of work (a
    consumer that needs another is given a slot here; none can leave a value under a name of its own)."""

    segments: list[Segment] | None = None               # one per element of the body's array
    fields: dict[str, tuple[Any, Segment]] = field(default_factory=dict)  # a body field's value and its segment
    prefix_keys: ChainedKeys | None = None
    prefix_shape: ShapeRecord | None = None
    steps: dict[Step, PerBlock] = field(default_factory=dict)
    settled: dict[str, list[list[Block]]] = field(default_factory=dict)   # a rewrite's name -> segments' block lists


@dataclass(slots=True)
class Carry:
    """What the request this one resends left for it (`earlier`) and what this one leaves (`mine`);
    `dialects.resent` finds which request that is. A step that computed something per block reuses the
    earlier answers for the leading blocks both share (the same content: `equal_run` over
    `Conversation.block_keys`) and leaves its own through `leave`, which charges the memo that keeps the body
    for what the new answers hold. Each request holds the earlier one's record, never a chain of them."""

    earlier: Carried = field(default_factory=Carried)
    mine: Carried = field(default_factory=Carried)
    # Charged with the bytes a left value holds (`reuse.weigh`; an int: that many bytes), by the memo that
    # keeps the body.
    charge: Callable[[Any], None] | None = None

    def leave(self, slot: str, value: Any, new: Any = None) -> None:
        """Leave `value` in `mine`'s `slot` (an unknown slot raises), charging what `new` holds (the part of
        `value` computed here rather than shared with the earlier request, or its size in bytes; `value`
        itself when None)."""
        setattr(self.mine, slot, value)
        if self.charge is not None:
            self.charge(value if new is None else new)

    def step(self, step: Step, record: PerBlock, new: Any) -> None:
        if type(record.inputs) is not STEP_INPUTS[step]:
            raise TypeError(f"{step} carries answers for {STEP_INPUTS[step].__name__} inputs, not {type(record.inputs).__name__}")
        self.mine.steps[step] = record
        if self.charge is not None:
            self.charge(new)

    def segment(self, name: str, value: Any, parse: Callable[[], Segment]) -> Segment:
        """The segment the earlier request parsed from this very `value` (a field of its body this body
        shares: the same object), else `parse()`'s; left for the next request either way."""
        earlier = self.earlier.fields.get(name)
        if earlier is not None and earlier[0] is value:
            seg = earlier[1]
            self.mine.fields[name] = earlier
        else:
            seg = parse()
            self.mine.fields[name] = (value, seg)
            if self.charge is not None:
                self.charge(seg)
        return seg


def touched(segments: list[Segment]) -> list[int]:
    """The indexes of the segments that no longer have the blocks `Segment.mark_parsed` remembered (the
    same ones, or equal in every field), or were never marked. The others (or drafts of them) have had no
    block moved, added, removed or changed, so they encode to their native JSON as it came in. Found in C:
    an agent's request has hundreds of segments and a plan touches a few; tuple equality tries identity
    first, so a shared block costs a pointer comparison."""
    if len(segments) <= _IN_ONE_GO:
        same = map(operator.eq, map(tuple, map(_BLOCKS, segments)), map(_PARSED, segments))
        return list(itertools.compress(itertools.count(), map(operator.not_, same)))
    # A big body's hundreds of thousands: one C call over all of them would hold the GIL for tens of ms (a worker
    # thread's, gateway/off_loop.py, while the event loop waits for it); a chunk at a time, it changes hands.
    out: list[int] = []
    for start in range(0, len(segments), _IN_ONE_GO):
        out.extend(start + i for i in touched(segments[start:start + _IN_ONE_GO]))
    return out


_IN_ONE_GO = 8192


def equal_run(earlier: list, now: list) -> int:
    """How many leading items of `now` equal those of `earlier` (one pass in C)."""
    return next(itertools.compress(itertools.count(), map(operator.ne, earlier, now)), min(len(earlier), len(now)))


_HASH, _BLOCKS, _PARSED = operator.attrgetter("_key"), operator.attrgetter("blocks"), operator.attrgetter("_parsed")


# A prefix key with its hash state, as a carried answer holds it (two list slots beside).
_KEY_BYTES = 16 + weigh(("0" * 32, hashlib.sha256())) - weigh(())


CACHE_MARKERS = ("cache_control", "prompt_cache_breakpoint")


def canonical_native(native: Any) -> Any:
    """A block as the provider renders it into the prompt: cache markers removed, and a bare string
    content (`"content": "hi"`) the same as the one text block it stands for."""
    if isinstance(native, str):
        return {"type": "text", "text": native}
    return without_markers(native)


def without_markers(native: Any) -> Any:
    if isinstance(native, dict) and any(k in native for k in CACHE_MARKERS):
        return {k: v for k, v in native.items() if k not in CACHE_MARKERS}
    return native


def _shallow(obj: Any) -> Any:
    # copy.copy's generic path (__reduce_ex__) costs 4x this; an agent's request has ~1,000 blocks to copy.
    new = object.__new__(type(obj))
    new.__dict__ = obj.__dict__.copy()
    return new


class SharedValueError(AttributeError):
    """A write to a parsed value that other requests share (`Segment.mark_parsed`), caught by `guard_shared`."""


# Caches of what follows from a block's content alone: filling one in on a shared block changes nothing a
# sharer could see.
_CONTENT_CACHES = frozenset(("_key", "_facts"))
_GUARDED = False


def _guarded_setattr(self: Any, name: str, value: Any) -> None:
    if name not in _CONTENT_CACHES and self.__dict__.get("_shared"):
        raise SharedValueError(f"{type(self).__name__}.{name} set on a value other requests share (parsed once and "
                               "kept by the reuse memo): change a copy (Conversation.draft, Segment.own)")
    object.__setattr__(self, name, value)


def _unshared_copy(obj: Any) -> Any:
    new = object.__new__(type(obj))
    new.__dict__ = obj.__dict__.copy()
    new.__dict__.pop("_shared", None)
    return new


def guard_shared() -> None:
    """From now on, segments and blocks that requests share are frozen: setting an attribute on one raises
    `SharedValueError`. A debug guard (each attribute write then costs a Python call): the tests turn it on
    (PREFIXGATE_GUARD_SHARED=1, also read at import), the gateway does not."""
    global _GUARDED, _shallow
    _GUARDED = True
    Block.__setattr__ = Segment.__setattr__ = _guarded_setattr     # type: ignore[method-assign]
    _shallow = _unshared_copy


if os.environ.get("PREFIXGATE_GUARD_SHARED") == "1":
    guard_shared()


def content_hash(value: Any) -> str:
    """Stable hash of a JSON value (key order included: providers hash exact bytes)."""
    if isinstance(value, dict) and len(value) == 2 and value.get("type") == "text" and isinstance(value.get("text"), str):
        # The common case, a plain text block, without serialising a long prompt to JSON first.
        data = "\x00text\x00" + value["text"] if next(iter(value)) == "type" else json.dumps(value, ensure_ascii=False)
    else:
        data = value if isinstance(value, str) else compact(value)
    return hashlib.sha256(data.encode()).hexdigest()[:32]


def ttl_seconds(ttl: str) -> int:
    """Seconds in a TTL string: "5m", "1h", "30m", "300s"."""
    units = {"s": 1, "m": 60, "h": 3600}
    return int(ttl[:-1]) * units[ttl[-1]]
