"""PG011 document-after-question."""

from __future__ import annotations

from collections.abc import Iterator

from prefixgate.cache_planner.lint.inputs import Request
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule
from prefixgate.cache_planner.rewrite import DOCUMENT_MIN_CHARS, DOCUMENT_RATIO


@rule("PG011", "document-after-question", "info",
      "A large document follows a short question in the same message, so the question splits it off the prefix.",
      "Put the document first and the question after it; `prefixgate lint --fix` reorders request files.",
      "request", cost="replay")
def document_after_question(req: Request, ctx: Context) -> Iterator[Hit]:
    """## What it does
    Reports a large document placed after a short question in the same user message.

    ## Why it matters
    The question comes first in the prefix, so asking another question about the same document misses
    the cache for the whole document.

    ## Example
    `[{"type": "text", "text": "Summarise this:"}, {"type": "document", ...50,000 characters...}]`

    ## Use instead
    Document first, question after it; `prefixgate lint --fix` reorders request files.
    """
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
