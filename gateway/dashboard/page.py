"""The cost dashboard: `/dashboard` (a static page shipped in the package, no CDN, no build step), its
assets under `/dashboard/static/`, and the JSON API it polls (`api`).

The router's lifespan runs after the gateway's own (FastAPI nests included routers' lifespans inside the
app's), so the proxy and its metrics registry exist when the hit-rate alert gauges are registered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qs

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from prefixgate.gateway.dashboard import api
from prefixgate.gateway.dashboard.alerter import Alerter
from prefixgate.gateway.dashboard.alerts import AlertCollector, AlertRule
from prefixgate.gateway.dashboard.auth import COOKIE, is_reader, reader_matches
from prefixgate.gateway.dashboard.source import source_for
from prefixgate.gateway.webhooks import Deliveries

STATIC = Path(__file__).parent / "static"
ASSETS = {"dashboard.js": "text/javascript", "dashboard.css": "text/css", "favicon.svg": "image/svg+xml"}
# Everything the page loads comes from the gateway itself; the page has no inline script or style. No plugins, no
# <base> (a base URL would move every relative load), forms post only here, and no other site frames it.
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
LOGIN = """<!doctype html><html><head><meta charset="utf-8"><title>prefixgate dashboard</title>
<link rel="stylesheet" href="/dashboard/static/dashboard.css"></head><body class="login">
<form method="post" action="/dashboard/login"><h1>prefixgate dashboard</h1><p>{message}</p>
<input type="password" name="token" placeholder="admin token" autofocus><button>Open</button></form></body></html>"""


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings = app.state.settings
    source = source_for(settings)
    rule = AlertRule()
    app.state.dashboard_source = source
    app.state.dashboard_alert_rule = rule
    collector = AlertCollector(source, rule)
    registry = app.state.proxy.metrics.registry
    registry.register(collector)
    alerting = app.state.policy.alerting.with_urls(settings.alert_webhooks)
    deliveries = Deliveries(alerting.destinations, alerting.settings, app.state.proxy.metrics.alert_deliveries)
    policy = replace(app.state.policy, alerting=alerting)
    alerter = Alerter(source, policy, app.state.proxy.catalog, deliveries,
                      "" if settings.ledger_path == ":memory:" else settings.ledger_path)
    app.state.alerter = alerter
    if alerting.destinations:       # nothing to push to: the rules still show on the page and in the API
        alerter.start()
    try:
        yield
    finally:
        alerter.close()
        registry.unregister(collector)
        source.close()


router = APIRouter(lifespan=lifespan)
router.include_router(api.router)


# same-origin, not no-referrer: under no-referrer the login form's POST carries `Origin: null`, which the browser
# guard refuses (403).
SECURE = {"Content-Security-Policy": CSP, "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
          "Referrer-Policy": "same-origin"}
# The assets: never sniffed into another type, and the SVG opened on its own is a document under the same policy.
ASSET_HEADERS = {"Content-Security-Policy": CSP, "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}


@router.get("/dashboard", include_in_schema=False)
def page(request: Request, token: str | None = None) -> Response:
    if token is not None:
        # A token in a URL lands in access logs, proxies' logs and the browser's history: never accepted there.
        return HTMLResponse(LOGIN.format(message="Enter the token in the form: it is never taken from the address."),
                            400, SECURE)
    if not is_reader(request):
        return HTMLResponse(LOGIN.format(message="This gateway's dashboard needs its admin token."), 401, SECURE)
    return FileResponse(STATIC / "dashboard.html", headers=SECURE, media_type="text/html")


@router.post("/dashboard/login", include_in_schema=False)
async def login(request: Request) -> Response:
    """The login form's POST: the token in the body, an HttpOnly same-site cookie back, then the page."""
    token = (parse_qs((await request.body()).decode("utf-8", "replace")).get("token") or [""])[0]
    if not reader_matches(request, token):
        return HTMLResponse(LOGIN.format(message="That token is neither this gateway's admin token nor a key with dashboard access."),
                            401, SECURE)
    back = RedirectResponse("/dashboard", 303, SECURE)
    back.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/", secure=request.url.scheme == "https")
    return back


@router.get("/dashboard/static/{name}", include_in_schema=False)
def asset(name: str) -> Response:
    # Only the files listed: a name is never joined onto a path unchecked.
    if name not in ASSETS:
        return Response("not found", 404, media_type="text/plain")
    return FileResponse(STATIC / name, media_type=ASSETS[name], headers=ASSET_HEADERS)
