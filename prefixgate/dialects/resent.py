"""Request bodies that resend an earlier body's bytes, parsed only from where they differ.

An agent resends its whole conversation on every turn: the body of its next request has the same bytes as
the last one's up to (usually) the newest message, and often the same bytes again after the message list
(the system prompt and tools, where the client writes them after it). `ResentBodies.load` finds the
remembered body that shares the longest run of whole array elements with the new one, takes those
elements' parsed values as they are (the same objects) and parses only the rest with the standard
library's own scanner, so the result equals `json.loads` of the new body.

Why that is exact: a JSON parser's state at a byte offset depends only on the bytes before it. Equal bytes
up to the end of element k-1 of the array mean the same top-level fields before the array and the same
first k elements; each element ends at its own closing `}`, `]` or `"`, so more bytes after it cannot
extend it (a bare number could be, so an array whose elements are not objects, arrays or strings is not
remembered). The parser's state just after the array's `[` is the same whatever fields came before it, so
when those differ (a time in a system prompt written before the messages) they are parsed, and equal
bytes from the `[` through element k-1 still mean the same first k elements. The same holds for the fields
after the array when everything after its `]` is equal.

Sharing parsed values between requests relies on the rule the segment memo relies on too: nothing in the
gateway changes a parsed request value in place (encoders build new objects). A caller that does not need
this (a body given as a dict, a small body) gets `json.loads` as before.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import orjson

from prefixgate import ir, reuse
from prefixgate.compact_json import compact_bytes
from prefixgate.ir import Carry, Segment, equal_run
from prefixgate.reuse import memo, weigh
from prefixgate.reuse.sizing import estimate
from prefixgate.segment_memo import segments_bytes

# Bodies below this size parse in well under a tenth of a millisecond: not worth remembering.
MIN_BYTES = 16 << 10
# Remembered bodies are found by their first bytes (the model, and the start of the first field the client
# writes); bodies that share them (one agent's sessions) are told apart by comparing bytes.
HEAD_BYTES = 1024
PER_HEAD = 16      # sessions of one agent in one repository share their first bytes; comparing stops where they differ
_WS = json.decoder.WHITESPACE       # JSON's whitespace, as the standard library matches it


@dataclass
class Body:
    """A parsed body and where its array's elements sit in its bytes."""

    raw: bytes
    data: dict
    array: str
    start: int = 0                  # byte offset just after the array's "["
    ends: list[int] = field(default_factory=list)   # byte offset just after each element
    after: int = 0                  # byte offset just after the array's "]"
    tail: list[tuple[str, Any]] = field(default_factory=list)   # the fields after the array, in order
    before: list[tuple[str, Any]] = field(default_factory=list)  # the fields before the array, in order
    reused: int = 0                 # leading elements that are an earlier body's values
    head_parsed: bool = True        # the fields before the array were parsed here, not reused
    # What the request of the body this one resends left for it, and what this one leaves (its parsed
    # segments, its prefix keys...): see `ir.Carry`.
    carry: Carry = field(default_factory=Carry, repr=False)
    scope: str = ""                 # the party whose request this was (`SCOPE`)
    owner: Any = field(default=None, repr=False)    # the `ResentBodies` that keeps it
    owner_tail: Any = field(default=None, repr=False)   # the tail of the body it resends, when shared

    @property
    def array_head(self) -> bytes:
        """The first bytes of the array's elements: where a body with other fields before them is found."""
        return self.raw[self.start:self.start + HEAD_BYTES]

    @property
    def new_from(self) -> int:
        """The byte offset where this body's own parsing of its array began (what it did not reuse)."""
        return self.ends[self.reused - 1] if self.reused else self.start

    def parsed_here(self) -> tuple[list[tuple[int, int]], list[Any]]:
        """The byte ranges of `raw` this body parsed itself, not taking an earlier body's values, and the values
        parsed from them: its new elements, then the fields after the array unless they are the earlier body's
        (`owner_tail`), and the fields before it (with the array's own name) when parsed here."""
        spans = [(self.new_from, self.after if self.owner_tail is not None else len(self.raw))]
        values: list[Any] = [self.data[self.array][self.reused:]]
        if self.owner_tail is None:
            values.append(dict(self.tail))
        if self.head_parsed:
            spans.append((0, self.start))
            values.append({**dict(self.before), self.array: None})
        return spans, values

    def span(self, count: int) -> bytes:
        """The raw bytes of the first `count` elements, with the separators between them."""
        return self.raw[self.start:self.ends[count - 1]] if count else b""


class ResentBodies:
    """Recently parsed bodies of one format, found by their first bytes or by their array's first bytes. They
    live in the reuse store's "resent_bodies" memo (`prefixgate.reuse`), charged what they hold: their bytes,
    their parsed values and what their requests left for the next (`Body.carry`: segments, prefix keys,
    token counts); the least recently used entry of the store goes first past its bound."""

    def __init__(self) -> None:
        # By (scope, first bytes): a body is found only by requests of the party that sent it.
        self._by_head: dict[tuple[str, bytes], list[Body]] = {}
        self._by_array: dict[tuple[str, bytes], list[Body]] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0     # this format's own (the memo counts every format's)

    def load(self, raw: bytes, array: str, decoder: json.JSONDecoder, vet: Callable[[Body], None] | None = None
             ) -> Body | None:
        """`raw` parsed as `decoder` parses it, with `array`'s element spans; None when it cannot be done
        here (a small body, not one UTF-8 JSON object, invalid JSON, duplicate keys...): the caller then
        parses it the usual way, which also says what is wrong with it. `vet` checks what the body parsed itself
        (`Body.parsed_here`) and raises to refuse it, before it is remembered: big bodies are parsed on several
        threads (gateway/off_loop.py), and one resending a body still being checked would take its values as
        checked."""
        if len(raw) < MIN_BYTES or raw[:1] != b"{" or not MEMO.on:
            return None
        try:
            body, earlier = self._read(raw, array, decoder, SCOPE.get())
        except (ValueError, StopIteration, IndexError, RecursionError, _NotHere):
            return None         # json.JSONDecodeError is a ValueError
        if vet is not None:
            vet(body)
        body.owner = self
        nbytes = _weigh_new(body)
        with self._lock:
            if earlier is None:
                MEMO.misses += 1
                self.misses += 1
            else:
                if ir._GUARDED:
                    _unchanged(earlier, body.reused)
                MEMO.hits += 1
                self.hits += 1
                body.carry.earlier = earlier.carry.mine
                # The new body holds all the earlier one held of its first `reused` elements, and more.
                nbytes += _shared_part(earlier, body.reused)
                self._forget(earlier)
            self._remember(body, nbytes)
        return body

    def _read(self, raw: bytes, array: str, decoder: json.JSONDecoder, scope: str) -> tuple[Body, Body | None]:
        # The same bytes from the start through some whole elements: the fields before the array are shared too.
        old, count = _best(self._by_head.get((scope, raw[:HEAD_BYTES]), ()), raw, None)
        if count:
            body = _parse(raw, array, decoder, old, count, old.before, old.start)
            body.head_parsed, body.scope = False, scope
            return body, old
        # Otherwise (a system prompt with a time in it, before the messages) the fields before the array
        # are parsed, and a body whose array starts with the same bytes is looked for from there.
        before, start, text, pos = _head(raw, array, decoder)
        old, count = _best(self._by_array.get((scope, raw[start:start + HEAD_BYTES]), ()), raw, start)
        body = _parse(raw, array, decoder, old, count, before, start) if count else \
            _parse(raw, array, decoder, None, 0, before, start, (text, pos))
        body.scope = scope
        return body, old if count else None

    def _remember(self, body: Body, nbytes: int) -> None:
        for index, key in ((self._by_head, (body.scope, body.raw[:HEAD_BYTES])), (self._by_array, (body.scope, body.array_head))):
            bodies = index.setdefault(key, [])
            bodies.insert(0, body)
            if len(bodies) > PER_HEAD:
                self._forget(bodies[-1])
        MEMO.put(id(body), body, nbytes)
        if MEMO.peek(id(body)) is body:
            # By the body's id, not a method of it: the body would then hold itself, a cycle that keeps all
            # it holds until a full garbage collection.
            body.carry.charge = partial(_charge, id(body))
        else:                                   # past the bound on its own: kept by no one, charged nothing
            self._unindex(body)

    def _forget(self, body: Body) -> None:
        MEMO.pop(id(body))
        self._unindex(body)

    def _unindex(self, body: Body) -> None:
        for index, key in ((self._by_head, (body.scope, body.raw[:HEAD_BYTES])), (self._by_array, (body.scope, body.array_head))):
            bodies = index.get(key, [])
            if any(b is body for b in bodies):
                bodies.remove(body)
            if not bodies:
                index.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            for bodies in list(self._by_head.values()):
                for body in list(bodies):
                    self._forget(body)


# A carried segment's blocks point at the body's parsed values (their native JSON and its text), which the
# body is charged for already.
REFS = frozenset(("native", "text", "_source"))


def _evicted(key: int, body: Body) -> None:
    body.owner._unindex(body)


# Every format's bodies, in the reuse store (one entry per body, by its id).
MEMO = memo("resent_bodies", _evicted)

# The party (a tenant, or a key of none) whose request is being parsed, set by the gateway once it knows the
# caller: a remembered body is found only by its own party's requests, so no tenant learns from parse times what
# another sent. "" for an open gateway and outside the gateway.
SCOPE: ContextVar[str] = ContextVar("prefixgate_resent_scope", default="")


def keep(max_bytes: int) -> None:
    """Bound the reuse store (these bodies and every other memo) to `max_bytes` (0: keep none; bodies are
    parsed whole)."""
    reuse.keep(max_bytes)


def _weigh_new(body: Body) -> int:
    """What `body` holds that the body it resends did not: its bytes, its element offsets, the elements it
    parsed itself and the fields around them it parsed."""
    items = body.data[body.array]
    n = len(body.raw) + sys.getsizeof(body.ends) + 32 * (len(body.ends) - body.reused) + sys.getsizeof(items)
    n += sys.getsizeof(body.data) + 4 * sys.getsizeof(body)
    new = items[body.reused:]
    n += weigh(new) if len(new) <= 4 else estimate(new)
    if body.head_parsed:
        n += weigh(body.before)
    if body.tail and (body.reused == 0 or body.tail is not body.owner_tail):
        n += weigh(body.tail)
    return n


def _unchanged(old: Body, count: int) -> None:
    """Under `ir.guard_shared`: raise if a request changed the parsed values of `old`'s first `count` elements
    (which the new body shares) in place: they must still be what their bytes say."""
    if json.loads(b"[" + old.span(count) + b"]") != old.data[old.array][:count]:
        raise ir.SharedValueError("a parsed request value that later requests share was changed in place "
                                  "(encoders and planner steps must build new objects)")


def _charge(key: int, value: Any) -> None:
    """Charge the memo's entry `key` (a body) for `value` (or that many bytes), left in the body's carry by its
    request."""
    MEMO.grow(key, value if type(value) is int else estimate(value, refs=REFS))


def _shared_part(old: Body, count: int) -> int:
    """What `old` was charged for its first `count` elements beside its bytes (their parsed values and what its
    request left for them), in proportion to its elements."""
    held = MEMO.charged(id(old)) - len(old.raw)
    return held * count // len(old.ends) if old.ends and count < len(old.ends) else held


class _NotHere(Exception):
    """The body is valid perhaps, but not one this module handles (the usual parse takes it)."""


def _best(candidates: Iterable[Body], raw: bytes, start: int | None) -> tuple[Any, int]:
    """The candidate whose leading array elements `raw` repeats most: with everything before them when
    `start` is None, else comparing from the arrays' starts (`raw`'s at byte `start`)."""
    best, count = None, 0
    for old in candidates:
        n = _shared_elements(raw, 0, old, 0) if start is None else _shared_elements(raw, start, old, old.start)
        if n > count:
            best, count = old, n
    return best, count


def _shared_elements(raw: bytes, start: int, old: Body, old_start: int) -> int:
    """How many of `old`'s leading array elements `raw` repeats byte for byte, comparing `raw` from
    `start` with `old`'s bytes from `old_start` (0: everything before the array must be the same too)."""
    ends = old.ends
    view = memoryview(old.raw)
    # Most often all but the newest: try that first, then halve.
    lo, hi = 0, len(ends)
    if hi and raw.startswith(view[old_start:ends[hi - 1]], start):
        return hi
    while lo < hi - 1:
        mid = (lo + hi) // 2
        if raw.startswith(view[old_start:ends[mid - 1]], start):
            lo = mid
        else:
            hi = mid
    return lo


def _key(text: str, pos: int, strict: bool) -> tuple[str, int]:
    """The object key whose opening quote is at `pos`, and the position of its value (past the colon)."""
    key, pos = json.decoder.scanstring(text, pos + 1, strict)
    pos = _WS.match(text, pos).end()
    if text[pos] != ":":
        raise ValueError("expected ':'")
    return key, _WS.match(text, pos + 1).end()


def _head(raw: bytes, array: str, decoder: json.JSONDecoder) -> tuple[list[tuple[str, Any]], int, str, int]:
    """The fields before `array`, the byte offset just after its "[", and the decoded body with the
    character position there."""
    text = raw.decode()
    before = []
    pos = _WS.match(text, 1).end()
    while True:
        if text[pos] != '"':
            raise _NotHere      # no array field (an empty object, or invalid JSON)
        key, pos = _key(text, pos, decoder.strict)
        if key == array:
            break
        value, pos = decoder.scan_once(text, pos)
        before.append((key, value))
        pos = _WS.match(text, pos).end()
        if text[pos] != ",":
            raise _NotHere
        pos = _WS.match(text, pos + 1).end()
    if text[pos] != "[":
        raise _NotHere
    pos += 1
    start = pos if text.isascii() else len(text[:pos].encode())
    return before, start, text, pos


def _parse(raw: bytes, array: str, decoder: json.JSONDecoder, old: Body | None, count: int,
           before: list[tuple[str, Any]], start: int, scanned: tuple[str, int] | None = None) -> Body:
    """`raw` parsed, its array starting at byte `start` after the fields `before`: `old`'s first `count`
    elements as they are (its array's bytes through them are `raw`'s from `start`), then the rest, and
    `old`'s fields after the array when the bytes after it are `old`'s. `scanned`: the decoded body and
    the character position just after the array's "[", when `count` is 0."""
    scan, strict = decoder.scan_once, decoder.strict
    items: list[Any] = []
    ends: list[int] = []
    cut = len(raw)      # where the decoded text ends
    if old is not None and count:
        shift = start - old.start
        items.extend(old.data[array][:count])
        ends.extend(old.ends[:count] if not shift else [e + shift for e in old.ends[:count]])
        # A body that ends with `old`'s bytes after its array (a client that sends its tools and system prompt
        # after the messages, as Claude Code does: ~75 KB) has only its new elements decoded, up to there; if
        # its array does not end there, it goes back to the usual parse (_NotHere below).
        tail_at = len(raw) - (len(old.raw) - old.after)
        if ends[-1] < tail_at and raw.endswith(memoryview(old.raw)[old.after:]):
            cut = tail_at
        text, pos, first = raw[ends[-1]:cut].decode(), 0, False
        offset = _Offsets(text, ends[-1], 0)
    else:
        text, pos = scanned or ("", 0)
        first = True
        offset = _Offsets(text, start, pos)
    pos = _elements(text, pos, items, ends, scan, offset, first)
    after = offset(pos + 1)
    tail: list[tuple[str, Any]] = []
    shared_tail = None
    if cut < len(raw) and after == cut:
        tail = shared_tail = old.tail    # type: ignore[union-attr]
    elif cut < len(raw):
        raise _NotHere              # the array ended before `old`'s tail bytes: what lies between is not parsed
    else:
        pos = _WS.match(text, pos + 1).end()
        while text[pos] != "}":
            if text[pos] != ",":
                raise ValueError("expected ',' or '}'")
            pos = _WS.match(text, pos + 1).end()
            if text[pos] != '"':
                raise ValueError("expected a key")
            key, pos = _key(text, pos, strict)
            value, pos = scan(text, pos)
            tail.append((key, value))
            pos = _WS.match(text, pos).end()
        if _WS.match(text, pos + 1).end() != len(text):
            raise ValueError("extra data")
    data = dict(before)
    data[array] = items
    data.update(tail)
    if len(data) != len(before) + 1 + len(tail):
        raise _NotHere              # a repeated key: json.loads keeps the last, which the spans do not follow
    body = Body(raw, data, array, start, ends, after, tail, before, count)
    body.owner_tail = shared_tail
    return body


def _elements(text: str, pos: int, items: list, ends: list[int], scan: Any, offset: _Offsets, first: bool) -> int:
    """Scan array elements from `pos` (just after "[" when `first`, else just after an element) to the
    array's "]", whose position it returns. One loop, no call of its own per element: a first body of many
    short messages pays this loop's work per element (~8% of parsing 600 short Gemini turns, bench/parse_costs.py)."""
    ws, add, end = _WS.match, items.append, ends.append
    shift = offset.base - offset.char if offset.ascii else None
    pos = ws(text, pos).end()
    if first and text[pos] != "]":
        pos -= 1                    # the "[" (or a space): the loop reads the first element as any other
    while text[pos] != "]":
        if text[pos] != "," and not (first and not items):
            raise ValueError("expected ',' or ']'")
        value, pos = scan(text, ws(text, pos + 1).end())
        if type(value) not in _BOUNDED:
            raise _NotHere          # a number or literal could go on in a longer body: not a safe boundary
        add(value)
        end(pos + shift if shift is not None else offset(pos))
        pos = ws(text, pos).end()
    return pos


_BOUNDED = (dict, list, str)


class _Offsets:
    """Byte offsets in the body for character offsets in `text` (decoded body bytes), asked in increasing
    order from character `char`, which is at byte `base`."""

    def __init__(self, text: str, base: int, char: int) -> None:
        self.text, self.ascii = text, text.isascii()
        self.char, self.base = char, base

    def __call__(self, pos: int) -> int:
        if self.ascii:
            return self.base + pos - self.char
        self.base += len(self.text[self.char:pos].encode())
        self.char = pos
        return self.base


def field_segment(body: Body | None, name: str, value: Any, parse: Callable[[], Segment]) -> Segment:
    """The segment of a field of the body (its tools, its system prompt): the one the request it resends
    parsed from this very value when both bodies share it, else `parse()`'s."""
    return parse() if body is None else body.carry.segment(name, value, parse)


def element_segments(body: Body | None, count: int, parse: Callable[[int], Segment]) -> list[Segment]:
    """One segment per element of the body's array (`count` of them): the earlier request's for those this
    body resends, shared as they are, then `parse(i)`'s for the others. Those are marked as parsed
    (`Segment.mark_parsed`): shared with the requests that will resend them, they are never changed in
    place. Left in the carry for the next request."""
    if body is None:
        return [parse(i) for i in range(count)]
    segments = (body.carry.earlier.segments or [])[:body.reused]
    shared = len(segments)
    for i in range(shared, count):
        seg = parse(i)
        seg.mark_parsed()
        segments.append(seg)
    body.carry.leave("segments", segments, segments_bytes(segments[shared:]))
    return segments


def encode(payload: dict, body: Body | None) -> bytes:
    """`compact_bytes(payload)` for an encoded request, copying the caller's own bytes (`body`'s) for the
    leading elements of its array that are still `body`'s values rather than encoding them again. Those
    bytes are the caller's spelling (spaces after commas, escapes) of the same JSON values."""
    items = payload.get(body.array) if body is not None else None
    if type(items) is not list or body is None:
        return compact_bytes(payload)
    # Equal values are what the caller's bytes spell (most are the very objects parsed from them).
    same = equal_run(body.data[body.array], items)
    if same < 2:
        return compact_bytes(payload)
    # A Fragment is written as it is: one holding several elements with their commas is still one list.
    try:
        return orjson.dumps({**payload, body.array: [orjson.Fragment(body.span(same)), *items[same:]]})
    except TypeError:       # what orjson cannot write (an integer past 64 bits): the standard library's way
        return compact_bytes(payload)
