"""schemathesis against the gateway's three dialect endpoints (tests/reliability/support_openapi.py) and
against the dashboard API's own /api/openapi.json, in positive and negative modes: no 5xx, no internals
in any answer, and the gateway still serving afterwards."""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from prefixgate.gateway.app import create_app
from tests.gateway.support_gateway import ServerThread, policy_for, running_upstream, settings_for
from tests.reliability.support_openapi import SCHEMA

ADMIN = "schemathesis-admin-token"
INTERNALS = ("Traceback", 'File "', "site-packages")
POLICY = {"routes": [{"name": "openai", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
                     {"name": "anthropic", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
                     {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}]}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        mp.setenv(var, f"sk-schemathesis-{var.lower()}")
    with running_upstream() as up:
        settings_ = settings_for(up.url, tmp_path_factory.mktemp("st"), admin_token=ADMIN, max_body_bytes=256 * 1024)
        with ServerThread(create_app(settings_, policy=policy_for(settings_, POLICY))) as gw:
            yield gw
    mp.undo()


gateway_schema = schemathesis.openapi.from_dict(SCHEMA)
gateway_schema.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE])


def dashboard_schema() -> dict:
    """The dashboard's own published schema, read from an app built for the purpose."""
    from starlette.testclient import TestClient

    from prefixgate.config import Settings

    settings_ = Settings(ledger_path=":memory:", admin_token=ADMIN)
    app = create_app(settings_, policy=policy_for(settings_, POLICY))
    with TestClient(app, base_url="http://localhost") as client:
        return client.get("/api/openapi.json", headers={"authorization": f"Bearer {ADMIN}"}).json()


admin_schema = schemathesis.openapi.from_dict(dashboard_schema())
admin_schema.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE])


def check(case, gw, headers: dict) -> None:
    response = case.call(base_url=gw.url, headers=headers)
    case.validate_response(response, checks=[not_a_server_error])
    assert not any(mark in response.text for mark in INTERNALS), response.text[:300]


@gateway_schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_gateway_dialect_endpoints(case, gateway):
    check(case, gateway, {"authorization": "Bearer caller", "x-api-key": "caller", "x-goog-api-key": "caller"})


@admin_schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_dashboard_api(case, gateway):
    check(case, gateway, {"authorization": f"Bearer {ADMIN}"})


def test_still_serving_after_the_fuzzing(gateway):
    r = httpx.post(gateway.url + "/v1/chat/completions", json={"model": "gpt-5.4", "messages": [
        {"role": "user", "content": "still there?"}]})
    assert r.status_code == 200
