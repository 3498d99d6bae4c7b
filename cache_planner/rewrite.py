"""Static-first rewrites. Each one keeps every word of the caller's text in the request (whitespace between
moved units aside) and adds nothing but a `Context:` label; each is listed in the plan's explanation.

- Volatile units (`variance`: spans seen to vary between the route's requests, widened to a sentence, clause
  or field) leave the system prompt for a context block that leads a user turn, before the question:
  per-session values (names, today's date) go to the first user turn, whose bytes then stay fixed for the
  session; per-request values (timestamps, request ids) go to the latest user turn.
- A large document after a short question in the same user message moves ahead of the question.
- A tool schema the route has seen before with its keys in another order is sent in the first order
  seen, so a client that serialises dicts non-deterministically stops breaking its own prefix.
"""

from __future__ import annotations

import json

from prefixgate.cache_planner.carried import remember_segments, settled_segments
from prefixgate.cache_planner.detectors import volatile_spans
from prefixgate.cache_planner.stability import RouteState
from prefixgate.cache_planner.variance import NO_RULE, Rule, volatile_units
from prefixgate.ir import Block, Conversation, Segment, content_hash, without_markers
from prefixgate.reuse import memo, weigh

CONTEXT_LABEL = "Context:\n"
SYSTEM_ROLES = ("system", "developer")
STATIC_ROLES = (*SYSTEM_ROLES, "tools", "schema")   # the segments of the static prefix, which lead
# A block counts as a document when it is at least this long and this many times the rest of its message.
DOCUMENT_MIN_CHARS = 1000
DOCUMENT_RATIO = 4


def conversation_start(conv: Conversation) -> int:
    """The block index where the conversation starts: the blocks of the leading static segments (tools, system)
    come before it. It stops at the first other segment, so it reads only the static prefix (an agent's request
    has thousands of blocks after it)."""
    start = 0
    for seg in conv.segments:
        if seg.role not in STATIC_ROLES:
            break
        start += len(seg.blocks)
    return start


def system_segments(conv: Conversation) -> list[Segment]:
    """The leading system-prompt segments (tools and schemas may come first)."""
    out = []
    for seg in conv.segments:
        if seg.role in SYSTEM_ROLES:
            out.append(seg)
        elif seg.role not in ("tools", "schema"):
            break
    return out


def system_text(conv: Conversation) -> str:
    """The system prompt's text: what a route is recognised by."""
    return "".join(b.text for seg in system_segments(conv) for b in seg.blocks if b.kind == "text")


# Request fields naming a stored answer this one continues: the earlier turns live at the provider.
CHAIN_PARAMS = ("previous_response_id", "previous_interaction_id")


def move_volatile_units(conv: Conversation, route: RouteState, notes: list[str], *, history_upstream: bool = False,
                        rule: Rule = NO_RULE) -> None:
    """Move the system prompt's volatile units to a context block in a user turn, learning them (`variance`)
    from the difference between this request's system text and the route's previous one.

    `history_upstream`: the earlier turns live at the provider (a Responses `previous_response_id`, an
    Interactions `previous_interaction_id`), so
    none of them can change; everything moved goes into this request's new input.
    """
    users = [s for s in conv.segments if s.role == "user"]
    texts = [b.text for seg in system_segments(conv) for b in seg.blocks if b.kind == "text"]
    previous, route.previous = route.previous, texts
    route.relearned = False
    if not users and not history_upstream:
        notes.append("note: the system prompt was left in place: the request has no user turn to take its volatile text")
        return
    moved: dict[str, list[str]] = {"session": [], "dynamic": []}
    reasons: dict[str, set[str]] = {"session": set(), "dynamic": set()}
    index = 0
    for seg in system_segments(conv):
        for block in list(seg.blocks):
            if block.kind != "text":
                continue
            text, index = block.text, index + 1
            found = volatile_units(text, previous[index - 1] if index <= len(previous) else None, route.sites,
                                   index - 1, rule) if text else []
            if not found:
                continue
            keep, at = [], 0
            for unit in found:
                keep.append(text[at:unit.start])
                piece = text[unit.start:unit.end]
                moved[unit.stability].append(piece if piece.endswith("\n") else piece.rstrip(" \t") + "\n")
                reasons[unit.stability].update(unit.why.split("+"))
                route.relearned = route.relearned or "learned" in unit.why
                at = unit.end
            keep.append(text[at:])
            rest = "".join(keep)
            if rest.strip():
                seg.own(block).set_text(rest)
            else:
                seg.blocks.remove(block)
    conv.segments = [s for s in conv.segments if s.blocks or s.role not in SYSTEM_ROLES]
    session, dynamic = "".join(moved["session"]), "".join(moved["dynamic"])
    if history_upstream:
        _into_new_input(conv, users, session + dynamic, notes)
        return
    if not (session or dynamic or route.contexts):
        return      # nothing moved now or before: no turn takes a context (an agent's usual request)
    # Turn keys before any insertion: they identify a user turn by the client's own bytes.
    keys = conv.prefix_keys()
    ends, n = {}, 0
    for seg in conv.segments:
        n += len(seg.blocks)
        ends[id(seg)] = keys[n - 1] if n else ""
    restored = 0
    for seg in users:
        parts = [session] if seg is users[0] and session else []
        if seg is users[-1]:
            if dynamic:
                parts.append(dynamic)
                route.remember_context(ends[id(seg)], dynamic)
        elif ends[id(seg)] in route.contexts:
            parts.append(route.contexts[ends[id(seg)]])
            restored += 1
        if parts:
            # Units keep their own newlines; a separator is added only where one lacks it.
            _insert_context(conv, seg, "".join(p if p.endswith("\n") or p is parts[-1] else p + "\n" for p in parts))
    for stability, where in (("session", "first"), ("dynamic", "latest")):
        if moved[stability]:
            pieces = moved[stability]
            kinds = sorted({s.kind for piece in pieces for s in volatile_spans(piece)}) or ["learned"]
            notes.append(f"rewrite: moved {len(pieces)} {stability} unit(s) ({', '.join(kinds)}) from the system "
                         f"prompt to the {where} user turn ({sum(map(len, pieces))} chars; {', '.join(sorted(reasons[stability]))})")
    if restored:
        notes.append(f"rewrite: re-sent the context of {restored} earlier turn(s) as it was, keeping the history cacheable")


def _into_new_input(conv: Conversation, users: list[Segment], text: str, notes: list[str]) -> None:
    chain = next((name for name in CHAIN_PARAMS if conv.params.get(name) is not None), CHAIN_PARAMS[0])
    notes.append(f"plan: {chain}: the earlier turns live at the provider and were not changed")
    if not text:
        return
    if users:
        target = users[-1]
    else:
        # Only tool outputs are new: the context goes in a user message after them.
        target = Segment("user", [], native={"role": "user"}, blocks_field="content", form="list")
        conv.segments.append(target)
    _insert_context(conv, target, text)
    notes.append("rewrite: moved the system prompt's volatile units into this request's new input")


def _insert_context(conv: Conversation, seg: Segment, text: str) -> None:
    # Anthropic requires tool results first in a user message; Gemini function responses likewise lead.
    at = 0
    while at < len(seg.blocks) and seg.blocks[at].kind == "tool_result":
        at += 1
    label = CONTEXT_LABEL + text
    # Each format's own text block: Gemini parts and Converse blocks are one-key unions, Responses items typed.
    natives = {"gemini": {"text": label}, "vertex_gemini": {"text": label}, "bedrock_converse": {"text": label},
               "responses": {"type": "input_text", "text": label}}
    native = natives.get(conv.dialect, {"type": "text", "text": label})
    seg.blocks.insert(at, Block("text", native, text=label))


def documents_first(conv: Conversation, notes: list[str]) -> None:
    # The leading turns the request this one resends had in this order already (an agent's whole history).
    for seg in conv.segments[settled_segments(conv, "documents_first"):]:
        if seg.role != "user" or len(seg.blocks) < 2 or any(b.kind == "tool_result" for b in seg.blocks):
            continue
        sizes = [_size(b) for b in seg.blocks]
        total = sum(sizes)
        docs = [i for i, (b, n) in enumerate(zip(seg.blocks, sizes, strict=True))
                if (b.kind == "document" or b.kind == "text") and n >= DOCUMENT_MIN_CHARS
                and n >= DOCUMENT_RATIO * (total - n)]
        if not docs or docs[0] == 0 and all(d == i for i, d in enumerate(docs)):
            continue
        order = docs + [i for i in range(len(seg.blocks)) if i not in docs]
        seg.blocks = [seg.blocks[i] for i in order]
        notes.append(f"rewrite: moved {len(docs)} large document block(s) ahead of the question in a {seg.role} turn")
    remember_segments(conv, "documents_first")


def _size(block: Block) -> int:
    if block.text:
        return len(block.text)
    return len(json.dumps(block.native)) if block.kind == "document" else 0


def stable_tool_forms(conv: Conversation, route: RouteState, notes: list[str]) -> None:
    for seg in conv.segments:
        if seg.role != "tools":
            continue
        for block, identity in zip(list(seg.blocks), _tool_identities(seg.blocks), strict=True):
            if identity is None:
                continue
            canonical, form = identity
            first = route.tool_forms.get(canonical)
            if first is None:
                route.tool_forms[canonical] = form
                while len(route.tool_forms) > 512:
                    route.tool_forms.popitem(last=False)
            elif first != form:
                # The caller's marker, if any, stays: the encoder writes `block.checkpoint` back.
                block = seg.own(block)
                block.set_native(json.loads(first))
                name = block.native.get("name") or (block.native.get("function") or {}).get("name") or "?"
                notes.append(f"rewrite: restored the first-seen form of tool {name!r} (its keys or `required` came reordered)")


# The block keys of a tools list -> each tool's (order-free hash, serialisation), None for a block that is no
# tool object: a client resends the same tools on every request, so the list is one lookup, not one per tool.
_TOOL_IDENTITIES = memo("tool_identities")


def _tool_identities(blocks: list[Block]) -> tuple[tuple[str, str] | None, ...]:
    """Each block's tool identity: its hash with set-like lists sorted (same tool, any key order) and its form
    as sent. Both follow from the block's content, which its key identifies (a marker is no part of either)."""
    key = tuple(b.key for b in blocks)
    found = _TOOL_IDENTITIES.get(key)
    if found is None:
        found = tuple(_tool_identity(b.native) if isinstance(b.native, dict) else None for b in blocks)
        _TOOL_IDENTITIES.put(key, found, weigh((key, found)))
    return found


def _tool_identity(native: dict) -> tuple[str, str]:
    native = without_markers(native)
    return content_hash(json.dumps(_unordered(native), sort_keys=True)), json.dumps(native, separators=(",", ":"))


def _unordered(value: object) -> object:
    """A schema with its set-like lists sorted: `required` (and `enum`) often come from a Python set,
    so their order changes between processes though the tool does not."""
    if isinstance(value, dict):
        return {k: sorted(v, key=json.dumps) if k in ("required", "enum") and isinstance(v, list) else _unordered(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_unordered(v) for v in value]
    return value
