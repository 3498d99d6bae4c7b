"""One page of `cachedContents.list`, as the Gemini API's and Vertex AI's references describe it (and AIP-158):

- `pageSize`: optional; unset (or 0) is "some default (under maximum)", here 100; "the maximum value is 1000;
  values above 1000 will be coerced to 1000"; a negative or non-integer one is INVALID_ARGUMENT;
- `pageToken`: the `nextPageToken` a previous page gave, opaque; any other value is INVALID_ARGUMENT;
- `nextPageToken`: "If this field is omitted, there are no subsequent pages".

A token holds the last cache's place in the list's order (created, then name), so a cache deleted or expired between
two pages neither ends the listing early nor makes it skip one.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping

from prefixgate.errors import RequestError
from prefixgate.providers.cached_contents import CachedContent

DEFAULT_PAGE = 100
MAX_PAGE = 1000


def cache_page(items: list[CachedContent], query: Mapping[str, str]) -> tuple[list[CachedContent], str | None]:
    """The page of `items` (in list order) `query` asks for, and the token of the next one (None on the last)."""
    raw = query.get("pageSize") or "0"
    if not raw.isdigit():
        raise RequestError(f"Invalid value for pageSize: {raw!r} (a non-negative integer)", field="pageSize")
    size = min(int(raw), MAX_PAGE) or DEFAULT_PAGE
    if query.get("pageToken"):
        after = _cursor(query["pageToken"])
        items = [c for c in items if (c.create_time, c.name) > after]
    page = items[:size]
    return page, (_token(page[-1]) if len(items) > size else None)


def _token(last: CachedContent) -> str:
    return base64.urlsafe_b64encode(json.dumps([last.create_time, last.name]).encode()).decode()


def _cursor(token: str) -> tuple[float, str]:
    try:
        created, name = json.loads(base64.urlsafe_b64decode(token.encode()))
        return float(created), str(name)
    except (ValueError, TypeError):
        raise RequestError(f"Invalid page token: {token[:100]!r}", field="pageToken") from None
