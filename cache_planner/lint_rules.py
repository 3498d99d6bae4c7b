"""The lint rules. Each has a stable id, a default severity, a one-line summary and a fix hint, and a
check that yields `Hit`s for one request, one template, or every request of a run together.

The checks reuse the planner's own pieces so the linter and the gateway never disagree: volatile
values come from `detectors` (plus template variables), per-request values from `DYNAMIC_KINDS`,
minimums, breakpoint limits and TTLs from the provider rules, token counts from `prefixgate.tokens`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from prefixgate import tokens
from prefixgate.cache_planner.detectors import Span, units, volatile_spans
from prefixgate.cache_planner.lint_config import LintConfig, Severity
from prefixgate.cache_planner.lint_inputs import Location, Request, Template
from prefixgate.cache_planner.lint_simulation import simulate_turns
from prefixgate.cache_planner.rewrite import DOCUMENT_MIN_CHARS, DOCUMENT_RATIO, SYSTEM_ROLES
from prefixgate.cache_planner.stability import DYNAMIC_KINDS
from prefixgate.ir import CACHE_MARKERS, ttl_seconds
from prefixgate.providers.rules import Catalog, ModelRules

Scope = Literal["request", "template", "corpus"]
# A few static tokens after a volatile value (a sign-off line) are not worth moving it for.
STATIC_TAIL_TOKENS = 16
# PG002 speaks up when the static prefix is at least this share of the minimum: close enough that
# merging shared material into it is realistic; a 50-token prompt is simply too small to cache.
NEAR_MINIMUM = 0.5


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    severity: Severity
    summary: str
    hint: str
    scope: tuple[Scope, ...]
    check: Callable[..., Iterable[Hit]]
    # How a trace's money lost is estimated: "replay" (re-run with the fix), "simulated" (from the
    # simulator's usage), "rejected" (the provider answers 400), or "" (no direct cost).
    cost: str = ""


@dataclass(frozen=True)
class Hit:
    message: str
    location: Location
    subject: Request | Template
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    config: LintConfig
    catalog: Catalog
    template_model: ModelRules

    def minimum(self, model: ModelRules) -> int:
        return self.config.minimum_for(model.id, model.min_cache_tokens)


RULES: dict[str, Rule] = {}


def rule(id: str, name: str, severity: Severity, summary: str, hint: str, *scope: Scope, cost: str = ""
         ) -> Callable[[Callable[..., Iterable[Hit]]], Callable[..., Iterable[Hit]]]:
    def register(check: Callable[..., Iterable[Hit]]) -> Callable[..., Iterable[Hit]]:
        RULES[id] = Rule(id, name, severity, summary, hint, scope, check, cost)
        return check
    return register


# ---- the prefix as the linter sees it -------------------------------------------------------------

@dataclass(frozen=True)
class Piece:
    """A movable unit of the static part (a line or sentence, or a whole tool definition)."""

    block: int              # block index (0 for a template)
    start: int              # offset in the block's text
    spans: tuple[Span, ...]  # volatile spans inside, offsets in the block's text
    tokens: int


def request_pieces(req: Request) -> list[Piece]:
    """Pieces of the request's leading tools, schemas and system prompt: the part every request repeats."""
    conv = req.conv
    assert conv is not None
    enc = tokens.encoding_for(req.provider, req.model_name)
    out: list[Piece] = []
    index = 0
    for seg in conv.segments:
        if seg.role not in (*SYSTEM_ROLES, "tools", "schema"):
            break
        for block in seg.blocks:
            if block.kind == "text":
                out += _text_pieces(index, block.text, volatile_spans(block.text), enc)
            else:
                out.append(Piece(index, 0, volatile_spans(block.text), tokens.block_tokens(block, enc)))
            index += 1
    return out


def template_pieces(t: Template, enc: str) -> list[Piece]:
    spans = tuple(sorted(volatile_spans(t.text) + t.variables, key=lambda s: s.start))
    return _text_pieces(0, t.text, spans, enc)


def _text_pieces(block: int, text: str, spans: tuple[Span, ...], enc: str) -> list[Piece]:
    return [Piece(block, u.start, tuple(s for s in spans if s.start < u.end and s.end > u.start),
                  tokens.count_tokens(text[u.start:u.end], enc))
            for u in units(text) if text[u.start:u.end].strip()]


def static_prefix_tokens(pieces: list[Piece]) -> int:
    total = 0
    for p in pieces:
        if p.spans:
            break
        total += p.tokens
    return total


def _kind(span: Span) -> str:
    return span.kind.replace("_", " ")


def _quote(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit - 1] + "…")


def _block_text(subject: Request | Template, block: int) -> str:
    if isinstance(subject, Template):
        return subject.text
    return subject.conv.blocks()[block].text  # type: ignore[union-attr]


def _where(subject: Request | Template, block: int, index: int) -> Location:
    return subject.where(index) if isinstance(subject, Template) else subject.where(block, index)


def _pieces(subject: Request | Template, ctx: Context) -> tuple[list[Piece], ModelRules | None]:
    if isinstance(subject, Template):
        return template_pieces(subject, tokens.encoding_for(ctx.template_model.provider, ctx.template_model.id)), ctx.template_model
    return request_pieces(subject), subject.model


# ---- per-request and per-template rules --------------------------------------------------------------

@rule("PG000", "invalid-request", "error", "The provider would reject this request body.",
      "Fix the field named in the message; the gateway and the provider answer 400 to it.", "request", cost="rejected")
def invalid_request(req: Request, ctx: Context) -> Iterator[Hit]:
    if req.conv is None:
        yield Hit(f"{req.provider} would reject this request: {req.error}", req.where(), req)


@rule("PG001", "volatile-before-static", "warning",
      "A volatile value (date, time, id, template variable) comes before static prompt content.",
      "Move the value after the static content, e.g. into the latest user turn; `prefixgate lint --fix` does "
      "this for request files.", "request", "template", cost="replay")
def volatile_before_static(subject: Request | Template, ctx: Context) -> Iterator[Hit]:
    if isinstance(subject, Request) and subject.conv is None:
        return
    pieces, _ = _pieces(subject, ctx)
    for i, piece in enumerate(pieces):
        if not piece.spans:
            continue
        after = sum(p.tokens for p in pieces[i + 1:] if not p.spans)
        if after < STATIC_TAIL_TOKENS:
            continue
        span = piece.spans[0]
        value = _block_text(subject, piece.block)[span.start:span.end]
        yield Hit(f"{_kind(span)} {_quote(value)} comes before {after:,} tokens of static prompt: each new value "
                  f"re-bills them instead of reading them from cache", _where(subject, piece.block, span.start),
                  subject, {"kind": span.kind, "static_after": after})


@rule("PG002", "static-prefix-below-minimum", "warning",
      "The static prefix is shorter than the target model's minimum cacheable length, so it is never cached.",
      "Put the material every request shares (instructions, examples, reference text) first so the prefix "
      "reaches the minimum, or set [tool.prefixgate.lint] min_cache_tokens if your usage shows another minimum.",
      "request", "template")
def static_prefix_below_minimum(subject: Request | Template, ctx: Context) -> Iterator[Hit]:
    if isinstance(subject, Request) and subject.conv is None:
        return
    pieces, model = _pieces(subject, ctx)
    if model is None or not pieces:
        return
    minimum = ctx.minimum(model)
    static = static_prefix_tokens(pieces)
    if not NEAR_MINIMUM * minimum <= static < minimum:
        return
    cut = next((p for p in pieces if p.spans), None)
    why = "; it ends at the first volatile value" if cut else ""
    at = _where(subject, cut.block, cut.spans[0].start) if cut else _where(subject, pieces[0].block, 0)
    yield Hit(f"static prefix is about {static:,} tokens, below {model.id}'s minimum of {minimum:,}: the provider "
              f"caches none of it (no error, cache counters stay 0){why}", at, subject,
              {"static": static, "minimum": minimum})


def _markers(req: Request) -> list[tuple[int, str]]:
    """(block index, ttl) of every checkpoint the caller placed, in prefix order."""
    assert req.conv is not None
    return [(i, b.checkpoint.ttl) for i, b in enumerate(req.conv.blocks()) if b.checkpoint is not None]


def _cumulative(req: Request) -> list[int]:
    enc = tokens.encoding_for(req.provider, req.model_name)
    out, total = [], 0
    for block in req.conv.blocks():  # type: ignore[union-attr]
        total += tokens.block_tokens(block, enc)
        out.append(total)
    return out


@rule("PG003", "checkpoint-below-minimum", "warning",
      "A cache checkpoint ends a prefix shorter than the model's minimum, so the provider silently ignores it.",
      "Remove the marker, or move it to a later block whose prefix reaches the minimum.", "request")
def checkpoint_below_minimum(req: Request, ctx: Context) -> Iterator[Hit]:
    if req.conv is None or req.model is None:
        return
    minimum = ctx.minimum(req.model)
    cumulative = _cumulative(req)
    for block, _ in _markers(req):
        if cumulative[block] < minimum:
            yield Hit(f"checkpoint ends a prefix of about {cumulative[block]:,} tokens, below {req.model.id}'s minimum "
                      f"of {minimum:,}: nothing is written or read", req.where_marker(block), req,
                      {"tokens": cumulative[block], "minimum": minimum})


@rule("PG004", "too-many-breakpoints", "error",
      "More cache breakpoints than the provider allows (Anthropic: 4, explicit and automatic together).",
      "Keep at most 4: the end of tools+system, the end of the conversation, and at most two in between.",
      "request", cost="rejected")
def too_many_breakpoints(req: Request, ctx: Context) -> Iterator[Hit]:
    if req.conv is None or req.provider != "anthropic":
        return
    limit = ctx.catalog.anthropic.max_breakpoints
    markers = _markers(req)
    automatic = "cache_control" in req.body
    count = len(markers) + automatic
    if count > limit:
        block = markers[min(limit, len(markers) - 1)][0] if markers else None
        extra = " (counting the top-level automatic cache_control)" if automatic else ""
        yield Hit(f"{count} cache breakpoints{extra}; Anthropic allows {limit} and answers 400",
                  req.where_marker(block) if block is not None else req.where(path=("cache_control",)), req,
                  {"count": count})


@rule("PG005", "checkpoint-after-volatile", "warning",
      "A cache checkpoint sits after a value that changes every request, so its entry is written and never read.",
      "Move the per-request value after the checkpoint (into the latest user turn), or the checkpoint before it.",
      "request", cost="replay")
def checkpoint_after_volatile(req: Request, ctx: Context) -> Iterator[Hit]:
    if req.conv is None:
        return
    markers = _markers(req)
    if not markers:
        return
    dynamic = [(p, s) for p in request_pieces(req) for s in p.spans if s.kind in DYNAMIC_KINDS]
    for block, _ in markers:
        before = [(p, s) for p, s in dynamic if p.block <= block]
        if before:
            piece, span = before[0]
            value = req.conv.blocks()[piece.block].text[span.start:span.end]
            shown = req.where(piece.block, span.start)
            yield Hit(f"checkpoint after {_kind(span)} {_quote(value)} (line {shown.line}), which changes every "
                      f"request: the entry is re-written each time and never read", req.where_marker(block), req,
                      {"kind": span.kind})
            return


@rule("PG006", "ttl-order", "error",
      "A longer-lived checkpoint (1h) comes after a shorter one (5m), or the automatic TTL contradicts the last marker.",
      "Put every 1h checkpoint before any 5m one; Anthropic answers 400 otherwise.", "request", cost="rejected")
def ttl_order(req: Request, ctx: Context) -> Iterator[Hit]:
    if req.conv is None or req.provider != "anthropic":
        return
    ttls = ctx.catalog.anthropic.ttls
    shortest: tuple[int, str] | None = None
    for block, ttl in _markers(req):
        seconds = ttls.get(ttl, ttl_seconds(ttl))
        if shortest is not None and seconds > ttls.get(shortest[1], 0):
            earlier = req.where(shortest[0])
            yield Hit(f"{ttl} checkpoint after a {shortest[1]} one (line {earlier.line}): longer TTLs must come first",
                      req.where_marker(block), req)
            return
        if shortest is None or seconds < ttls.get(shortest[1], 0):
            shortest = (block, ttl)
    auto = req.body.get("cache_control")
    blocks = req.conv.blocks()
    if isinstance(auto, dict) and blocks and blocks[-1].checkpoint is not None:
        auto_ttl = auto.get("ttl", ctx.catalog.anthropic.default_ttl)
        if auto_ttl != blocks[-1].checkpoint.ttl:
            yield Hit(f"automatic cache_control ttl {auto_ttl} differs from the explicit {blocks[-1].checkpoint.ttl} "
                      "marker on the last block: Anthropic answers 400", req.where(path=("cache_control",)), req)


_GEMINI_CACHED_EXCLUSIVE = ("systemInstruction", "system_instruction", "tools", "toolConfig", "tool_config")


@rule("PG009", "gemini-cached-content-conflict", "error",
      "A Gemini request names a cachedContent and also sends a system instruction, tools or tool config.",
      "Put the system instruction, tools and tool config in the cachedContents entry and drop them from the request.",
      "request", cost="rejected")
def gemini_cached_content_conflict(req: Request, ctx: Context) -> Iterator[Hit]:
    if req.provider != "gemini":
        return
    cached = next((k for k in ("cachedContent", "cached_content") if k in req.body), None)
    clash = [k for k in _GEMINI_CACHED_EXCLUSIVE if k in req.body]
    if cached and clash:
        yield Hit(f"{cached} with {', '.join(clash)}: Gemini answers 400 INVALID_ARGUMENT; those fields belong "
                  "in the cache", req.where(path=(clash[0],)), req)


@rule("PG011", "document-after-question", "info",
      "A large document follows a short question in the same message, so the question splits it off the prefix.",
      "Put the document first and the question after it; `prefixgate lint --fix` reorders request files.",
      "request", cost="replay")
def document_after_question(req: Request, ctx: Context) -> Iterator[Hit]:
    if req.conv is None:
        return
    index = 0
    for seg in req.conv.segments:
        first = index
        index += len(seg.blocks)
        if seg.role != "user" or len(seg.blocks) < 2 or any(b.kind == "tool_result" for b in seg.blocks):
            continue
        sizes = [len(b.text) for b in seg.blocks]
        for j, (block, size) in enumerate(zip(seg.blocks, sizes, strict=True)):
            rest = sum(sizes) - size
            if j > 0 and block.kind in ("text", "document") and size >= DOCUMENT_MIN_CHARS and size >= DOCUMENT_RATIO * rest:
                yield Hit(f"a {size:,}-character document comes after {rest:,} characters of question in this user "
                          "message: asking another question about it misses the cache", req.where(first + j), req)
                break


@rule("PG012", "anthropic-no-checkpoint", "warning",
      "An Anthropic request long enough to cache has no cache_control at all, and Anthropic caches nothing unmarked.",
      "Add cache_control at the end of the static prefix (and of the conversation), or send it through the "
      "gateway, which places them; `prefixgate lint --fix` adds them to request files.", "request", cost="replay")
def anthropic_no_checkpoint(req: Request, ctx: Context) -> Iterator[Hit]:
    if req.conv is None or req.provider != "anthropic" or req.model is None:
        return
    if _markers(req) or "cache_control" in req.body:
        return
    leading = sum(p.tokens for p in request_pieces(req))
    total = _cumulative(req)[-1] if req.conv.blocks() else 0
    multi_turn = any(s.role == "assistant" for s in req.conv.segments)
    reusable = max(leading, total if multi_turn else 0)
    minimum = ctx.minimum(req.model)
    if reusable >= minimum:
        what = "conversation" if multi_turn and total > leading else "tools and system prompt"
        yield Hit(f"no cache_control: about {reusable:,} tokens of {what} are billed in full on every request "
                  f"(minimum {minimum:,})", req.where(), req, {"tokens": reusable})


# ---- rules over every request of the run ------------------------------------------------------------

def _ref(req: Request, other: Request) -> str:
    """How a finding on `req` names `other`: its line in the same trace, else its file (and line)."""
    if other.source is req.source and other.record is not None:
        return f"line {other.source.line_of(other.start)}"
    return other.label


def _samples(req: Request) -> tuple[str, ...]:
    """Which requests are samples of one route: a trace's records of one tenant and route, or the
    request files of one folder."""
    if req.record is not None and req.source.path.suffix == ".jsonl":
        return (req.source.display, req.record.tenant, req.record.route)
    return (str(req.source.path.parent),)


def _canonical(value: Any) -> Any:
    """A tool or schema with key order and `required`/`enum` order ignored: what it means, not how it was written."""
    if isinstance(value, dict):
        return {k: sorted(v, key=json.dumps) if k in ("required", "enum") and isinstance(v, list) else _canonical(v)
                for k, v in sorted(value.items()) if k not in CACHE_MARKERS}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _tool_name(native: Any) -> str:
    if not isinstance(native, dict):
        return "?"
    return str(native.get("name") or (native.get("function") or {}).get("name") or
               next((d.get("name") for d in native.get("functionDeclarations", native.get("function_declarations", []))
                     if isinstance(d, dict)), None) or "?")


def _order_conflict(siblings: list[dict]) -> tuple[int, int, str, str] | None:
    """Two sibling objects that put the same two keys in opposite orders: (i, j, key a, key b)."""
    orders = [{k: n for n, k in enumerate(d)} for d in siblings]
    for i in range(len(orders)):
        for j in range(i + 1, len(orders)):
            common = [k for k in orders[i] if k in orders[j]]
            for a, b in zip(common, common[1:], strict=False):
                if orders[j][a] > orders[j][b]:
                    return i, j, a, b
    return None


def _sibling_groups(native: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], list[dict]]]:
    """Groups of objects a serialiser writes with one code path: the members of each `properties` map."""
    if isinstance(native, dict):
        props = native.get("properties")
        if isinstance(props, dict):
            members = [v for v in props.values() if isinstance(v, dict)]
            if len(members) > 1:
                yield (*path, "properties"), members
        for k, v in native.items():
            yield from _sibling_groups(v, (*path, k))
    elif isinstance(native, list):
        for i, v in enumerate(native):
            yield from _sibling_groups(v, (*path, i))


@rule("PG007", "unstable-key-order", "warning",
      "Tool definitions or JSON schemas are serialised with an unstable key order, so equal tools give unequal prefixes.",
      "Serialise tools and schemas deterministically (define them once as literals, or json.dumps(sort_keys=True)).",
      "corpus", cost="replay")
def unstable_key_order(requests: list[Request], ctx: Context) -> Iterator[Hit]:
    seen: dict[tuple[Any, ...], tuple[str, Request, int]] = {}
    for req in requests:
        if req.conv is None:
            continue
        tool_blocks = [(i, b) for i, b in enumerate(req.conv.blocks()) if b.kind in ("tool_def", "schema")]
        reported = False
        for i, block in tool_blocks:
            native = block.native
            canonical = json.dumps(_canonical(native))
            form = json.dumps({k: v for k, v in native.items() if k not in CACHE_MARKERS}) if isinstance(native, dict) else ""
            first = seen.setdefault((*_samples(req), req.provider, canonical), (form, req, i))
            if first[0] != form and not reported:
                reported = True
                yield Hit(f"tool {_tool_name(native)!r} is the same as in {_ref(req, first[1])} but serialised in another "
                          "key order: the prefix misses from here on", req.where(i), req, {"across": True})
        if reported:
            continue
        tops = [b.native.get("function") if isinstance(b.native.get("function"), dict) else b.native
                for _, b in tool_blocks if isinstance(b.native, dict)]
        groups = [((), tops)] + [g for _, b in tool_blocks for g in _sibling_groups(b.native)]
        for path, siblings in groups:
            conflict = _order_conflict(siblings)
            if conflict is not None:
                _, _, a, b = conflict
                where = " in " + ".".join(map(str, path)) if path else " across tool definitions"
                yield Hit(f"keys {a!r} and {b!r} appear in both orders{where}: the serialiser does not keep a "
                          "stable order, so the next request may differ", req.where(tool_blocks[0][0]), req, {"across": False})
                break


def _system_text(req: Request) -> str:
    return "\n".join(s.text for s in req.conv.segments if s.role in SYSTEM_ROLES) if req.conv else ""


@rule("PG008", "whitespace-only-system-diff", "warning",
      "The system prompt differs between samples only in whitespace, which splits one cache entry into several.",
      "Render the system prompt from one template with fixed whitespace (strip trailing spaces and newlines).",
      "corpus", cost="replay")
def whitespace_only_system_diff(requests: list[Request], ctx: Context) -> Iterator[Hit]:
    first: dict[tuple[str, ...], tuple[str, Request]] = {}
    for req in requests:
        text = _system_text(req)
        if not text.strip():
            continue
        key = (*_samples(req), req.provider, " ".join(text.split()))
        seen = first.setdefault(key, (text, req))
        if seen[0] != text:
            block = next(i for i, b in enumerate(req.conv.blocks()) if b.text)  # type: ignore[union-attr]
            yield Hit(f"system prompt differs from {_ref(req, seen[1])} only in whitespace: a separate cache entry for "
                      "the same instructions", req.where(block), req, {"first": seen[0]})


@rule("PG010", "conversation-rewrite", "warning",
      "A conversation's cache checkpoint placement makes each turn re-write history the previous turn already wrote.",
      "Mark the last block of each turn (or use automatic caching), keep history bytes unchanged between turns, "
      "add a checkpoint every ~15 blocks in long tool loops, and use ttl 1h if turns are minutes apart.",
      "corpus", cost="simulated")
def conversation_rewrite(requests: list[Request], ctx: Context) -> Iterator[Hit]:
    traced = [r for r in requests if r.record is not None and r.conv is not None]
    for turn in simulate_turns(traced, ctx.catalog):
        req = turn.request
        if turn.history_changed_at is not None:
            yield Hit(f"this history block differs from what {_ref(req, turn.previous)} sent as the same turn: the "
                      f"conversation cache is rebuilt from here ({turn.rewritten:,} tokens paid again)",
                      req.where(turn.history_changed_at), req, turn.data)
        elif turn.rewritten:
            reason = (f"the previous turn's {turn.ttl} entry expired ({turn.gap:.0f}s between turns)" if turn.expired
                      else f"no checkpoint of {_ref(req, turn.previous)} is within reach of this request's")
            yield Hit(f"this turn re-wrote about {turn.rewritten:,} tokens of history already written by "
                      f"{_ref(req, turn.previous)}: {reason}",
                      req.where_marker(turn.last_marker) if turn.last_marker is not None else req.where(), req, turn.data)
