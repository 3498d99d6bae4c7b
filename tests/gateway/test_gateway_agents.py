"""The OpenAI Agents SDK (`openai-agents`) through the gateway to mock-providers: a tool-calling loop over
the Responses API (the model calls the tool, the SDK runs it and sends its output, the model answers),
planned and priced on every turn."""

from __future__ import annotations

import asyncio
import uuid

import openai
import pytest

from prefixgate.ledger import read_records
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import running_gateway, settings_for
from tests.sdk.support_sdk import dated_system
from tests.support_services import ServerThread, wait_until

agents = pytest.importorskip("agents", reason="openai-agents is not installed (pip install openai-agents)")
pytestmark = pytest.mark.slow


def test_agent_tool_loop_runs_through_the_gateway(tmp_path):
    agents.set_tracing_disabled(True)      # the SDK would otherwise upload traces to OpenAI
    calls: list[str] = []

    @agents.function_tool
    def parcel_status(tracking_id: str) -> str:
        """Where a parcel is."""
        calls.append(tracking_id)
        return f"Parcel {tracking_id} is at the depot."

    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path)
        with running_gateway(settings) as gw:
            client = openai.AsyncOpenAI(api_key="sk-test-" + uuid.uuid4().hex, base_url=gw.url + "/v1", max_retries=0)
            agent = agents.Agent(
                name="support", instructions=dated_system(7), tools=[parcel_status],
                model=agents.OpenAIResponsesModel(model="gpt-5.4", openai_client=client),
                # The first turn must call the tool; the SDK resets the choice to auto after it ran.
                model_settings=agents.ModelSettings(tool_choice="required"))
            result = asyncio.run(agents.Runner.run(agent, "Where is parcel 123?"))
            wait_until(lambda: len(read_records(settings.ledger_path)) >= 2, 10, "two ledger records")
    assert calls == ["mock"] and isinstance(result.final_output, str) and result.final_output
    first, second = read_records(settings.ledger_path)
    assert (first["dialect"], second["dialect"]) == ("responses", "responses")
    assert second["cache_read"] >= 1024 and second["cost_usd"] is not None
    assert any(line.startswith("rewrite: moved") for line in first["explanation"])
