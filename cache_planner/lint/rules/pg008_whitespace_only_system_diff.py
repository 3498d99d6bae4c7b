"""PG008 whitespace-only-system-diff."""

from __future__ import annotations

from collections.abc import Iterator

from prefixgate.cache_planner.lint.inputs import Request
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule
from prefixgate.cache_planner.lint.rules.samples import ref, sample_key
from prefixgate.cache_planner.rewrite import SYSTEM_ROLES


def _system_text(req: Request) -> str:
    return "\n".join(s.text for s in req.conv.segments if s.role in SYSTEM_ROLES) if req.conv else ""


@rule("PG008", "whitespace-only-system-diff", "warning",
      "The system prompt differs between samples only in whitespace, which splits one cache entry into several.",
      "Render the system prompt from one template with fixed whitespace (strip trailing spaces and newlines).",
      "corpus", cost="replay")
def whitespace_only_system_diff(requests: list[Request], ctx: Context) -> Iterator[Hit]:
    r"""## What it does
    Reports samples of one route whose system prompts differ only in whitespace.

    ## Why it matters
    Each variant is its own cache entry: the same instructions are written and paid for several times.

    ## Example
    One code path renders `"Rules:\n"`, another `"Rules: \n"`.

    ## Use instead
    Render the system prompt from one template with fixed whitespace (strip trailing spaces and newlines).
    """
    first: dict[tuple[str, ...], tuple[str, Request]] = {}
    for req in requests:
        text = _system_text(req)
        if not text.strip():
            continue
        key = (*sample_key(req), req.provider, " ".join(text.split()))
        seen = first.setdefault(key, (text, req))
        if seen[0] != text:
            block = next(i for i, b in enumerate(req.conv.blocks()) if b.text)  # type: ignore[union-attr]
            yield Hit(f"system prompt differs from {ref(req, seen[1])} only in whitespace: a separate cache entry for "
                      "the same instructions", req.where(block), req, {"first": seen[0]})
