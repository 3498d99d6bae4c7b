"""Admin-token protection for the dashboard and its API (when `admin_token` is configured).

Scripts send `Authorization: Bearer <token>`; a browser opens `/dashboard?token=<token>` once, which
sets an HttpOnly same-site cookie and redirects to the bare URL, so the token leaves the address bar
and the page's own API calls carry the cookie.
"""

from __future__ import annotations

import secrets

from fastapi import HTTPException, Request

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


def is_admin(request: Request) -> bool:
    return not admin_token(request) or token_matches(request, presented_token(request))


def require_admin(request: Request) -> None:
    """FastAPI dependency: 401 unless no token is configured or the caller presents it."""
    if not is_admin(request):
        raise HTTPException(401, "admin token required: send Authorization: Bearer <admin_token>",
                            headers={"WWW-Authenticate": "Bearer"})
