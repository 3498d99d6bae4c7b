"""An explicit cache the gateway created for a request whose own call then failed: the provider billed the
cache's tokens and storage, so the ledger carries them whatever became of the answer (on the request's record when
no target answered, on a `cache_create` record of their own when another target did)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from google import genai
from google.genai import errors, types

from prefixgate.cache_planner import PlannerState
from prefixgate.gateway.app import create_app
from prefixgate.ledger import read_records
from prefixgate.policies import Policy, builtin_upstreams
from prefixgate.simulation.mock.faults import FaultPlan
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import settings_for
from tests.gateway.test_gateway_explicit_cache import SYSTEM, long_gap_history
from tests.support_services import ServerThread, wait_until

MODEL = "gemini-3.5-flash"
CALLER_KEY = "pg-acme-caller-key-77c1e0d2b9"


@contextmanager
def failing_gemini(tmp_path, monkeypatch, retry: dict, targets: list[dict]) -> Iterator[tuple[genai.Client, object, object]]:
    """A gateway whose Gemini target refuses every generateContent (the cachedContents call before it is not),
    with a route whose planner has seen long gaps (so it creates an explicit cache); yields a client, the app
    and the settings."""
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaGatewayKey000000000000000")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-failover-openai-000111")
    monkeypatch.setenv("KEY_ACME", CALLER_KEY)
    faults = FaultPlan.from_config({"faults": [{"fault": "status=503", "provider": "gemini", "path": "/v1beta/models/"}]})
    state = PlannerState()
    long_gap_history(state, "tenant:acme/warranty")
    with ServerThread(mock_app(MockContext(faults=faults))) as mock:
        settings = settings_for(mock.url, tmp_path)
        policy = Policy.from_dict({
            "routes": [{"name": "gemini", "models": ["gemini-*"], "retry": retry, "targets": targets}],
            "keys": [{"name": "acme", "key_env": "KEY_ACME", "tenant": "acme"}],
        }, builtin_upstreams(settings))
        app = create_app(settings, policy=policy, planner_state=state)
        with ServerThread(app) as gw:
            yield genai.Client(api_key=CALLER_KEY, http_options=types.HttpOptions(
                base_url=gw.url, api_version="v1beta", headers={"x-prefixgate-route": "warranty"})), app, settings


def ask(client: genai.Client):
    return client.models.generate_content(model=MODEL, contents="Is my toaster covered?",
                                          config=types.GenerateContentConfig(system_instruction=SYSTEM))


def test_a_cache_created_for_a_request_whose_call_then_failed_is_billed_on_its_record(tmp_path, monkeypatch):
    # Both attempts at generateContent are refused.
    with failing_gemini(tmp_path, monkeypatch, {"attempts": 2, "backoff_s": 0.01}, [{"upstream": "gemini"}]) \
            as (client, app, settings):
        with pytest.raises(errors.ServerError) as exc:
            ask(client)
        assert exc.value.code == 503
        assert len(app.state.proxy.caches.entries) == 1         # the cache was created upstream
        wait_until(lambda: read_records(settings.ledger_path), 10, "the request's record")
    [rec] = read_records(settings.ledger_path)
    assert rec["status"] == 503 and rec["target"] == "gemini"
    assert rec["cache_writes"].get("explicit", 0) > 1000     # the system prompt's tokens, written into the cache
    assert rec["cost_usd"] is not None and float(rec["cost_usd"]) > 0


def test_a_cache_left_behind_by_a_failover_is_billed_on_a_record_of_its_own(tmp_path, monkeypatch):
    with failing_gemini(tmp_path, monkeypatch, {"attempts": 1},
                        [{"upstream": "gemini"}, {"upstream": "openai", "model": "gpt-5.4-mini"}]) as (client, _, settings):
        assert ask(client).text
        wait_until(lambda: len(read_records(settings.ledger_path)) == 2, 10, "two records")
    by_kind = {r["kind"]: r for r in read_records(settings.ledger_path)}
    assert by_kind[""]["target"] == "openai" and by_kind[""]["status"] == 200
    assert "explicit" not in by_kind[""]["cache_writes"]
    made = by_kind["cache_create"]
    assert made["target"] == "gemini" and made["model"] == MODEL
    assert made["cache_writes"]["explicit"] > 1000 and float(made["cost_usd"]) > 0
