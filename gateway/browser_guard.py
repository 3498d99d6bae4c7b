"""Web pages cannot drive the gateway.

A page on another site can make the visitor's browser send requests to a gateway the visitor reaches (one on
loopback, one on the LAN): "simple" requests (a `text/plain` POST) go without a preflight, and DNS rebinding makes
a page's own host name resolve to 127.0.0.1. Browsers say who is asking: they send `Origin` on every cross-site
request (curl and the SDKs do not). So:

- a request whose `Origin` is neither the gateway's own (the host it was asked for) nor in `cors_origins` is
  refused, on every path (model requests spend the gateway's keys; the dashboard and `/api` read its ledger);
- a request from a page (any `Origin`) with a body must say the body is JSON, so a form or a `text/plain` post
  is never read as a model request;
- a gateway without caller keys (it forwards with its own provider keys to whoever asks) answers only requests
  addressed to a loopback name, unless it was opened on purpose (`open_gateway`): a rebound host name is refused.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.types import Scope

from prefixgate.bind import is_loopback
from prefixgate.errors import RequestError

# Bodies the dashboard's own forms send (login), which are not JSON and not model requests.
FORM_PATHS = ("/dashboard/login",)


def host_name(host: str) -> str:
    """`example.com:8080` -> example.com; `[::1]:80` -> [::1]."""
    if host.startswith("["):
        return host[:host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def refusal(scope: Scope, allowed_origins: frozenset[str], loopback_only: bool) -> RequestError | None:
    """Why this request from a browser (or a rebound host name) is refused, or None."""
    headers = {k: v for k, v in scope["headers"] if k in (b"host", b"origin", b"content-type")}
    host = headers.get(b"host", b"").decode("latin-1")
    # No Host at all is no browser's request (HTTP/1.0 clients, in-process callers); a rebound name always has one.
    if loopback_only and host and not is_loopback(host_name(host)):
        return RequestError(f"this gateway has no caller keys and answers only requests addressed to localhost, "
                            f"not {host!r}", status=403, kind="permission")
    origin = headers.get(b"origin")
    if origin is None:
        return None
    origin_text = origin.decode("latin-1")
    if origin_text not in allowed_origins and urlsplit(origin_text).netloc != host:
        return RequestError(f"cross-origin request from {origin_text} refused: add the origin to cors_origins to "
                            "let a web page call this gateway", status=403, kind="permission")
    content_type = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip().lower()
    if (scope["method"] in ("POST", "PUT", "PATCH") and scope["path"] not in FORM_PATHS
            and not (content_type == "application/json" or content_type.endswith("+json"))):
        return RequestError(f"a request from a web page must send its body as application/json, not "
                            f"{content_type or 'no content type'}", status=415, kind="invalid_request")
    return None
