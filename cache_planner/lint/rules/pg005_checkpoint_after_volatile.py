"""PG005 checkpoint-after-volatile."""

from __future__ import annotations

from collections.abc import Iterator

from prefixgate.cache_planner.lint.evidence import STRONG_KINDS
from prefixgate.cache_planner.lint.inputs import Request
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule
from prefixgate.cache_planner.lint.rules.prefix import checkpoints_of, kind_name, quoted, request_pieces


@rule("PG005", "checkpoint-after-volatile", "warning",
      "A cache checkpoint sits after a value that changes every request, so its entry is written and never read.",
      "Move the per-request value after the checkpoint (into the latest user turn), or the checkpoint before it.",
      "request", cost="replay")
def checkpoint_after_volatile(req: Request, ctx: Context) -> Iterator[Hit]:
    """## What it does
    Reports a checkpoint placed after a value that changes every request (a timestamp, a request id).

    ## Why it matters
    The entry is written (at 1.25x or 2x the input price on Anthropic) and never read, because the next
    request's prefix differs before the checkpoint.

    ## Example
    ```json
    {"system": [{"type": "text", "text": "Request 7f3a... Rules: ...", "cache_control": {"type": "ephemeral"}}]}
    ```

    ## Use instead
    Move the per-request value after the checkpoint (into the latest user turn), or the checkpoint before it.
    """
    if req.conv is None:
        return
    markers = checkpoints_of(req)
    if not markers:
        return
    dynamic = [(p, s) for p in request_pieces(req) for s in p.spans if s.kind in STRONG_KINDS]
    for block, _ in markers:
        before = [(p, s) for p, s in dynamic if p.block <= block]
        if before:
            piece, span = before[0]
            value = req.conv.blocks()[piece.block].text[span.start:span.end]
            shown = req.where(piece.block, span.start)
            yield Hit(f"checkpoint after {kind_name(span)} {quoted(value)} (line {shown.line}), which changes every "
                      f"request: the entry is re-written each time and never read", req.where_marker(block), req,
                      {"kind": span.kind})
            return
