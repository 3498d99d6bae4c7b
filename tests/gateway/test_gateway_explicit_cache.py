"""Through the gateway to mock-providers: when the route's traffic keeps missing Gemini's implicit cache,
the planner has the gateway create a cachedContents entry with the caller's key and send requests
against it; the real google-genai SDK sees cached tokens and the ledger bills the create."""

from __future__ import annotations

import pytest
from google import genai
from google.genai import types

from prefixgate.cache_planner import PlannerState
from prefixgate.cache_planner.reuse import BOUNDS
from prefixgate.ledger import read_records
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import ServerThread, running_gateway, settings_for
from tests.support_services import wait_until

SYSTEM = "You are the ACME warranty assistant. Answer from the policy below.\n" + "Policy clause: coverage lasts two years. " * 700


def long_gap_history(state: PlannerState, route: str) -> None:
    """The route's record so far: its static prefix came back 12 times an hour, always after the
    implicit cache had lapsed (gaps of 5-10 minutes)."""
    stats = state.route(route).reuse.level("static")
    stats.requests = stats.reuses = 12
    stats.gap_sum = 12 * 300.0
    stats.within = [0.0] + [12.0] * (len(BOUNDS) - 1)


@pytest.fixture
def mock_providers():
    with ServerThread(mock_app(MockContext())) as server:
        yield server


def test_gemini_explicit_cache_through_the_gateway(tmp_path, mock_providers, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaGatewayKey000000000000000")
    state = PlannerState()
    long_gap_history(state, "-/warranty")
    settings = settings_for(mock_providers.url, tmp_path)
    with running_gateway(settings, planner_state=state) as gw:
        client = genai.Client(api_key="caller", http_options=types.HttpOptions(
            base_url=gw.url, api_version="v1beta", headers={"x-prefixgate-route": "warranty"}))
        config = types.GenerateContentConfig(system_instruction=SYSTEM)
        first = client.models.generate_content(model="gemini-3.5-flash", contents="Is my toaster covered?", config=config)
        second = client.models.generate_content(model="gemini-3.5-flash", contents="And my kettle?", config=config)
    assert first.text and second.text
    # Both requests read the system instruction from the explicit cache; only the first created it.
    assert first.usage_metadata.cached_content_token_count > 5000
    assert second.usage_metadata.cached_content_token_count == first.usage_metadata.cached_content_token_count
    explicit = state.route("-/warranty").explicit
    assert len(explicit) == 1
    wait_until(lambda: len(read_records(settings.ledger_path)) >= 2, 5, "two ledger records")
    records = sorted(read_records(settings.ledger_path), key=lambda r: r["ts"])
    assert records[0]["cache_writes"].get("explicit", 0) > 5000 and not records[1]["cache_writes"].get("explicit")
    assert any("created explicit cache" in line for line in records[0]["explanation"])
    assert any("using explicit cache" in line for line in records[1]["explanation"])
