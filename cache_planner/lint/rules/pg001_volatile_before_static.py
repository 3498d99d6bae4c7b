"""PG001 volatile-before-static."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

from prefixgate.cache_planner.detectors import Span
from prefixgate.cache_planner.lint.evidence import detected_evidence
from prefixgate.cache_planner.lint.inputs import Request, Template
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule
from prefixgate.cache_planner.lint.rules.prefix import (
    Piece,
    block_text,
    kind_name,
    location_of,
    pieces_for,
    quoted,
    section_of,
)
from prefixgate.cache_planner.lint.rules.samples import sample_key
from prefixgate.errors import RequestError
from prefixgate.providers.pricing import cost_of
from prefixgate.providers.rules import ModelRules
from prefixgate.usage import Usage

# A few static tokens after a volatile value (a sign-off line) are not worth moving it for.
STATIC_TAIL_TOKENS = 16
# How the message says where a value lands in the provider's prefix (Anthropic: tools, system, messages).
LANDING = {
    "tools": "in a tool definition, first in the provider's prefix (tools, then system, then messages), so this "
             "tool's rest, the later tools, the system prompt and every message miss the cache too;",
    "system": "in the system prompt (after the tools, before the messages in the provider's prefix);",
    "messages": "in an early message, ahead of the latest turn;",
    "": "",
}


@rule("PG001", "volatile-before-static", "warning",
      "A volatile value (date, time, id, template variable) comes before static prompt content.",
      "Move the value after the static content, e.g. into the latest user turn; `prefixgate lint --fix` does "
      "this for request files.", "request", "template", cost="replay")
def volatile_before_static(subject: Request | Template, ctx: Context) -> Iterator[Hit]:
    r"""## What it does
    Finds the first value that changes per request (the clock, a random or request id, user input, a
    template variable shown to change) ahead of static prompt text, in request files, templates and
    Python prompt code, and says where it lands in the provider's prefix (tools, then system, then
    messages) and how many tokens after it are re-billed. One finding per prefix: later values in the same
    prefix are related locations. A variable with no evidence that it changes per request is `info`, and is
    not reported in a tool definition with no static text seen after it (a tool object's own
    `self.description`: nothing shows it changes, nothing is shown re-billed).
    A template whose landing the code does not show (a prompt file, a `prompt` variable) and whose whole
    text is below the model's minimum cacheable length is not reported: no order of it is ever cached,
    so the value's place costs nothing (a system prompt or tool in an SDK call is still judged: the
    conversation after it can carry the prefix past the minimum).

    ## Why it matters
    Providers cache exact prefixes. Everything after the first changed byte is billed as new input on every
    request (and written again to the cache, at a premium on Anthropic).

    ## Example
    ```python
    SYSTEM = f"Today is {datetime.now():%Y-%m-%d %H:%M}. User: {user_id}.\n" + RULES
    ```

    ## Use instead
    ```python
    SYSTEM = RULES  # static: cached
    messages = [{"role": "user", "content": f"Now: {datetime.now():%Y-%m-%d %H:%M}. User: {user_id}.\n{question}"}]
    ```
    """
    if isinstance(subject, Request) and subject.conv is None:
        return
    pieces, model = pieces_for(subject, ctx)
    causes = [(i, piece, span, _evidence(subject, piece, span, ctx))
              for i, piece in enumerate(pieces) for span in piece.spans]
    if not causes:
        return
    proven = [c for c in causes if c[3]]
    i, piece, span, why = (proven or causes)[0]
    after = sum(p.tokens for p in pieces[i + 1:]
                if not any(c[3] for c in causes if c[1] is p) and (proven or not p.spans))
    section = section_of(subject, piece.block)
    # In a tool a proven value re-bills everything after the tools; one nothing shows changing (a tool class's
    # `self.description`) with no static text seen after it is no finding: "comes before 0 tokens" is no cost.
    if after < STATIC_TAIL_TOKENS and (section != "tools" or not why):
        return
    if _never_cacheable(subject, section, pieces, model, ctx):
        return
    value = quoted(block_text(subject, piece.block)[span.start:span.end])
    related = tuple(location_of(subject, p.block, s.start) for _, p, s, _ in causes if s is not span)
    data = {"kind": span.kind, "static_after": after, "section": section}
    if not why:
        yield Hit(f"{kind_name(span)} {value} comes before {after:,} tokens of static prompt; nothing shows it "
                  "changes per request, so it may be fixed for a session. If it does change, each new value "
                  "re-bills them (declare it in [tool.prefixgate.lint] volatile or session_constants)",
                  location_of(subject, piece.block, span.start), subject, data, related, "info")
        return
    landing = LANDING.get(section, "")
    if section == "tools":
        yield Hit(f"{kind_name(span)} {value} sits {landing.rstrip(';')}: {why}, so every request re-bills the whole "
                  "prefix from this tool on instead of reading it from cache", location_of(subject, piece.block, span.start),
                  subject, {**data, "evidence": why}, related)
        return
    where = f" {landing}" if landing else ";"
    yield Hit(f"{kind_name(span)} {value} comes before {after:,} tokens of static prompt{where} {why}: each new "
              f"value re-bills them instead of reading them from cache{_cost(model, after)}",
              location_of(subject, piece.block, span.start), subject, {**data, "evidence": why}, related)


def _never_cacheable(subject: Request | Template, section: str, pieces: list[Piece], model: ModelRules | None,
                     ctx: Context) -> bool:
    """A template whose landing nothing shows (a prompt file, a `prompt` variable, a prompt function's
    result) and whose whole text is below the model's minimum: no order of it is ever cached, so
    moving the value saves nothing. A system prompt or a tool in an SDK call is followed by the
    conversation, which can carry the prefix past the minimum, so those are still judged."""
    if not isinstance(subject, Template) or section in ("system", "tools") or model is None:
        return False
    return sum(p.tokens for p in pieces) < ctx.minimum(model)


def _evidence(subject: Request | Template, piece: Piece, span: Span, ctx: Context) -> str:
    if isinstance(subject, Template):
        return subject.reason(span)
    text = block_text(subject, piece.block)
    found = detected_evidence(span.kind)
    if found or subject.record is None:
        return found
    value = text[span.start:span.end]
    key = sample_key(subject)
    for other in ctx.requests:
        if other is subject or other.conv is None or other.record is None or sample_key(other) != key:
            continue
        blocks = other.conv.blocks()
        if piece.block < len(blocks) and value not in blocks[piece.block].text:
            return "it differs between requests of this route in the trace"
    return ""


def _cost(model: ModelRules | None, tokens: int) -> str:
    """What re-billing `tokens` instead of reading them from cache costs per 1,000 requests."""
    if model is None or tokens <= 0:
        return ""
    try:
        full = cost_of(model.provider, model.id, Usage(uncached_input=tokens)).total
        cached = cost_of(model.provider, model.id, Usage(cache_read=tokens)).total
    except RequestError:
        return ""
    extra = (full - cached) * 1000
    return f" (about ${extra.quantize(Decimal('0.01'))} more per 1,000 requests on {model.id})" if extra > 0 else ""
