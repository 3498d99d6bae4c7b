"""Admin-token protection for the dashboard and its API (when `admin_token` is configured).

Scripts send `Authorization: Bearer <token>`; a browser posts the token once from the login form
(`POST /dashboard/login`, never in a URL, which access logs keep), which sets an HttpOnly same-site cookie,
and the page's own API calls carry the cookie. A caller key with `dashboard: read` in the policy opens the
page and GET /api/* the same ways (one with a tenant reads only that tenant's figures and records; the alerts and
forecasts span every tenant and are not its to read); admin-only parts (the exposure summary on /health, anything
that changes state) still need the admin token.
"""

from __future__ import annotations

import secrets

from fastapi import HTTPException, Request

from prefixgate.policies import hash_key

COOKIE = "prefixgate_admin"


def admin_token(request: Request) -> str:
    return request.app.state.settings.admin_token


def presented_token(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.cookies.get(COOKIE)


def token_matches(request: Request, given: str | None) -> bool:
    """`given` is the configured admin token (constant-time compare); never true when none is configured."""
    expected = admin_token(request)
    return bool(expected) and given is not None and secrets.compare_digest(given.encode(), expected.encode())


def reader_matches(request: Request, given: str | None) -> bool:
    """`given` is the admin token or a caller key with read-only dashboard access."""
    if token_matches(request, given):
        return True
    if not given or not admin_token(request):
        return False
    # Compared by sha256, as caller keys are stored: digests are compared, never the key itself.
    digest = hash_key(given)
    return any(k.key_sha256 == digest and k.dashboard == "read" for k in request.app.state.policy.keys)


def reader_tenant(request: Request) -> str | None:
    """The tenant a reader's view is limited to: a `dashboard: read` key with a tenant sees that tenant's records
    only; None for the admin (or an open dashboard) and for a reader key of no tenant (an operator's analyst)."""
    given = presented_token(request)
    if not admin_token(request) or token_matches(request, given) or not given:
        return None
    digest = hash_key(given)
    key = next((k for k in request.app.state.policy.keys if k.key_sha256 == digest and k.dashboard == "read"), None)
    return key.tenant or None if key is not None else None


def is_admin(request: Request) -> bool:
    return not admin_token(request) or token_matches(request, presented_token(request))


def is_reader(request: Request) -> bool:
    return not admin_token(request) or reader_matches(request, presented_token(request))


def require_reader(request: Request) -> None:
    """FastAPI dependency: 401 unless the caller is an admin (or no token is configured), or presents a
    dashboard-reading caller key on a read-only method."""
    if not (is_admin(request) or (request.method in ("GET", "HEAD") and is_reader(request))):
        raise HTTPException(401, "admin token required: send Authorization: Bearer <admin_token> "
                            "(or a caller key with dashboard: read, for GET)",
                            headers={"WWW-Authenticate": "Bearer"})
