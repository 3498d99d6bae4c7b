"""Model ids in upstream URLs: data, never path."""

from __future__ import annotations

import re
from urllib.parse import quote

from prefixgate.errors import RequestError

# A model id that goes into an upstream URL's path is data, never path: one segment of letters, digits and
# `. _ - @` (Vertex's `claude-...@20250929`); nothing that ends the path (`?`, `#`), adds or climbs segments
# (`/`, `..`), picks a method (`:`) or is decoded again (`%`). Bedrock's ids and ARNs also carry `:` and `/`,
# quoted whole into one segment (`ARN_MODEL`).
SEGMENT_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,255}")
ARN_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@:/+-]{0,2047}")
# A stored object's id from a caller's path (`/v1/responses/{id}`, `/v1beta/interactions/{id}`): one segment of
# the same characters (and `=`, `~`, `+`, `:` of longer opaque ids), never a byte the upstream request line
# cannot carry (a control character, a space, a non-ASCII character).
STORED_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@:=~+-]{0,1023}")


def path_model(model: str, allowed: re.Pattern[str] = SEGMENT_MODEL, field: str = "model") -> str:
    """`model` (or another id: a cache's name) quoted as one URL path segment; a 400 naming `field` otherwise."""
    if not allowed.fullmatch(model) or ".." in model:
        raise RequestError(f"{field}: {model[:200]!r} is not an id this provider's URL can carry (letters, digits "
                           "and . _ - @ only)", field=field, status=400, kind="invalid_request")
    return quote(model, safe="@")
