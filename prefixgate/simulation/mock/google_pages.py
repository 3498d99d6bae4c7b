"""One page of a Google list (`cachedContents.list`, `files.list`), as the Gemini API's and Vertex AI's references
describe it (and AIP-158):

- `pageSize`: optional; unset (or 0) is "some default (under maximum)" (caches 100, files 10); "the maximum value
  is 1000 [files: 100]; values above will be coerced" to it; a negative or non-integer one is INVALID_ARGUMENT;
- `pageToken`: the `nextPageToken` a previous page gave, opaque; any other value is INVALID_ARGUMENT;
- `nextPageToken`: "If this field is omitted, there are no subsequent pages".

A token holds the last item's place in the list's order (created, then name), so an item deleted or expired between
two pages neither ends the listing early nor makes it skip one.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import TypeVar

from prefixgate.errors import RequestError
from prefixgate.providers.cached_contents import CachedContent

DEFAULT_PAGE = 100
MAX_PAGE = 1000
T = TypeVar("T")
Place = tuple[float, str]


def cache_page(items: list[CachedContent], query: Mapping[str, str]) -> tuple[list[CachedContent], str | None]:
    """The page of caches (in list order) `query` asks for, and the token of the next one (None on the last)."""
    return page_of(items, query, lambda c: (c.create_time, c.name), DEFAULT_PAGE, MAX_PAGE)


def page_of(items: list[T], query: Mapping[str, str], place: Callable[[T], Place], default: int,
            maximum: int) -> tuple[list[T], str | None]:
    """The page of `items` (in the order of `place`: created, then name) `query` asks for, and the next one's token."""
    raw = query.get("pageSize") or "0"
    if not raw.isdigit():
        raise RequestError(f"Invalid value for pageSize: {raw!r} (a non-negative integer)", field="pageSize")
    size = min(int(raw), maximum) or default
    if query.get("pageToken"):
        after = _cursor(query["pageToken"])
        items = [item for item in items if place(item) > after]
    page = items[:size]
    return page, (_token(place(page[-1])) if len(items) > size else None)


def _token(last: Place) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(last)).encode()).decode()


def _cursor(token: str) -> Place:
    try:
        created, name = json.loads(base64.urlsafe_b64decode(token.encode()))
        return float(created), str(name)
    except (ValueError, TypeError):
        raise RequestError(f"Invalid page token: {token[:100]!r}", field="pageToken") from None
