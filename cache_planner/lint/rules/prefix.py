"""The prefix as the linter sees it: movable pieces of the static part, their volatile spans and
token counts, and the caller's checkpoints."""

from __future__ import annotations

from dataclasses import dataclass

from prefixgate import tokens
from prefixgate.cache_planner.detectors import Span, units, volatile_spans
from prefixgate.cache_planner.lint.inputs import Location, Request, Template
from prefixgate.cache_planner.lint.rules.base import Context
from prefixgate.cache_planner.rewrite import SYSTEM_ROLES
from prefixgate.ir import Conversation
from prefixgate.providers.rules import ModelRules


@dataclass(frozen=True)
class Piece:
    """A movable unit of the static part (a line or sentence, or a whole tool definition)."""

    block: int              # block index (0 for a template)
    start: int              # offset in the block's text
    spans: tuple[Span, ...]  # volatile spans inside, offsets in the block's text
    tokens: int


def parsed(req: Request) -> Conversation:
    """The request's prompt; a rule reads it only once it has seen the provider accepts the request."""
    if req.conv is None:
        raise RuntimeError(f"{req.label}: a rule read the prompt of a request the provider rejects ({req.error})")
    return req.conv


def request_pieces(req: Request) -> list[Piece]:
    """Pieces of the request's leading tools, schemas and system prompt: the part every request repeats."""
    conv = parsed(req)
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
    # Only the variables: a date written in a template is the same text on every request.
    return _text_pieces(0, t.text, t.variables, enc)


def section_of(subject: Request | Template, block: int) -> str:
    """Where a block lands in the provider's prefix: "tools", "system", "messages" ("" unknown)."""
    if isinstance(subject, Template):
        return subject.section
    index = 0
    for seg in subject.conv.segments:  # type: ignore[union-attr]
        index += len(seg.blocks)
        if block < index:
            return "tools" if seg.role in ("tools", "schema") else "system" if seg.role in SYSTEM_ROLES else "messages"
    return ""


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


def kind_name(span: Span) -> str:
    return span.kind.replace("_", " ")


def quoted(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit - 1] + "…")


def block_text(subject: Request | Template, block: int) -> str:
    if isinstance(subject, Template):
        return subject.text
    return subject.conv.blocks()[block].text  # type: ignore[union-attr]


def location_of(subject: Request | Template, block: int, index: int) -> Location:
    return subject.where(index) if isinstance(subject, Template) else subject.where(block, index)


def pieces_for(subject: Request | Template, ctx: Context) -> tuple[list[Piece], ModelRules | None]:
    if isinstance(subject, Template):
        return template_pieces(subject, tokens.encoding_for(ctx.template_model.provider, ctx.template_model.id)), ctx.template_model
    return request_pieces(subject), subject.model



def checkpoints_of(req: Request) -> list[tuple[int, str]]:
    """(block index, ttl) of every checkpoint the caller placed, in prefix order."""
    return [(i, b.checkpoint.ttl) for i, b in enumerate(parsed(req).blocks()) if b.checkpoint is not None]


def cumulative_tokens(req: Request) -> list[int]:
    enc = tokens.encoding_for(req.provider, req.model_name)
    out, total = [], 0
    for block in parsed(req).blocks():
        total += tokens.block_tokens(block, enc)
        out.append(total)
    return out
