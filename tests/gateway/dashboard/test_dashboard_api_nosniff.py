"""Every `/api` answer says `X-Content-Type-Options: nosniff`, as the page and its assets do: successes and every
refusal (401 without a token, 403 for a tenant's reader or a foreign page, 404, 405, 422). A JSON answer a browser
sniffed as HTML would run whatever a record's text holds (a route name, a prompt excerpt) as the gateway's page."""

from __future__ import annotations

import httpx
import pytest

from prefixgate.gateway.dashboard.api import router
from prefixgate.policies import hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.dashboard.support_scenario import ROUTES
from tests.gateway.support_gateway import ServerThread, policy_for, running_gateway, settings_for

ADMIN, READER = "admin-secret-nosniff-01", "pg-nosniff-acme-reader-01"
KEYS = [{"name": "acme-reader", "key_sha256": hash_key(READER), "tenant": "acme", "dashboard": "read"}]


def bearer(token: str) -> dict:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path_factory.mktemp("nosniff"), admin_token=ADMIN)
        with running_gateway(settings, policy=policy_for(settings, {"routes": ROUTES, "keys": KEYS})) as running:
            yield running.url


def api_paths() -> list[str]:
    return sorted({r.path.replace("{request_id}", "no-such-request") for r in router.routes})


def assert_nosniff(r: httpx.Response) -> None:
    assert r.headers.get("x-content-type-options") == "nosniff", (r.request.method, r.request.url, r.status_code)


def test_every_api_route_answers_nosniff(gw):
    paths = api_paths()
    assert "/api/summary" in paths and "/api/requests/no-such-request" in paths
    for path in paths:
        admin = httpx.get(gw + path, headers=bearer(ADMIN))
        assert admin.status_code in (200, 404), (path, admin.status_code, admin.text)
        assert_nosniff(admin)
        unauthenticated = httpx.get(gw + path)
        assert unauthenticated.status_code == 401
        assert_nosniff(unauthenticated)


def test_api_refusals_answer_nosniff(gw):
    cases = [
        (httpx.get(gw + "/api/alerts", headers=bearer(READER)), 403),         # per route across every tenant
        (httpx.get(gw + "/api/forecast", headers=bearer(READER)), 403),
        (httpx.get(gw + "/api/summary", headers={**bearer(ADMIN), "origin": "https://evil.example"}), 403),
        (httpx.get(gw + "/api/requests/no-such-request", headers=bearer(ADMIN)), 404),
        (httpx.get(gw + "/api/no-such-endpoint", headers=bearer(ADMIN)), 404),
        (httpx.post(gw + "/api/summary", headers=bearer(ADMIN), json={}), 405),
        (httpx.get(gw + "/api/summary", params={"range": "99d"}, headers=bearer(ADMIN)), 422),
        (httpx.get(gw + "/api/summary", params={"range": "soon"}, headers=bearer(ADMIN)), 422),
    ]
    for r, status in cases:
        assert r.status_code == status, (r.request.url, r.status_code, r.text)
        assert_nosniff(r)
