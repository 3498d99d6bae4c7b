"""PG009 gemini-cached-content-conflict."""

from __future__ import annotations

from collections.abc import Iterator

from prefixgate.cache_planner.lint.inputs import Request
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule

_GEMINI_CACHED_EXCLUSIVE = ("systemInstruction", "system_instruction", "tools", "toolConfig", "tool_config")


@rule("PG009", "gemini-cached-content-conflict", "error",
      "A Gemini request names a cachedContent and also sends a system instruction, tools or tool config.",
      "Put the system instruction, tools and tool config in the cachedContents entry and drop them from the request.",
      "request", cost="rejected")
def gemini_cached_content_conflict(req: Request, ctx: Context) -> Iterator[Hit]:
    """## What it does
    Reports a Gemini request that names a `cachedContent` and also sends a system instruction, tools or
    tool config.

    ## Why it matters
    Gemini answers 400 INVALID_ARGUMENT: those fields belong in the cache entry.

    ## Example
    ```json
    {"cachedContent": "cachedContents/abc", "systemInstruction": {"parts": [{"text": "..."}]}, "contents": []}
    ```

    ## Use instead
    Put the system instruction, tools and tool config in the `cachedContents` entry and drop them from the
    request.
    """
    if req.provider != "gemini":
        return
    cached = next((k for k in ("cachedContent", "cached_content") if k in req.body), None)
    clash = [k for k in _GEMINI_CACHED_EXCLUSIVE if k in req.body]
    if cached and clash:
        yield Hit(f"{cached} with {', '.join(clash)}: Gemini answers 400 INVALID_ARGUMENT; those fields belong "
                  "in the cache", req.where(path=(clash[0],)), req)
