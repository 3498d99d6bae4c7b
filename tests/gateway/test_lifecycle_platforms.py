"""A retirement date is its platform's. Anthropic retires claude-sonnet-4-5 on 2026-11-30 on Anthropic-operated
platforms only (https://platform.claude.com/docs/en/about-claude/model-deprecations: "Dates apply to
Anthropic-operated platforms only"; shared/reference/field-2026-11.md section 2); Bedrock and Vertex AI keep
serving it on their own dates, which the catalogue does not hold. So with the gateway's clock on 2026-12-02 and
`on_retired: refuse`, a route to the Claude API refuses the model (400) while routes to Bedrock and Vertex send it
and their answers come back (200 from mock-providers, which serves it there as those platforms do)."""

from __future__ import annotations

from datetime import UTC, datetime

import anthropic
import pytest

from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.gateway.support_vertex import LOCATION, PROJECT, use_mock_vertex
from tests.support_services import ServerThread

DAY = datetime(2026, 12, 2, 12, tzinfo=UTC)     # two days after claude-sonnet-4-5's Claude API retirement
BEDROCK_ID = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"     # as a Bedrock route names it
VERTEX_ID = "claude-sonnet-4-5@20250929"                        # as Vertex names it


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    """A gateway whose clock reads 2026-12-02, over mock-providers on that day, with one refusing route per platform
    and one falling back from the Claude API to Vertex."""
    folder = tmp_path_factory.mktemp("platforms")
    mp = pytest.MonkeyPatch()
    use_mock_vertex(mp)
    mp.setenv("AWS_ACCESS_KEY_ID", "AKIDLIFECYCLE")
    mp.setenv("AWS_SECRET_ACCESS_KEY", "lifecycle/secret")
    mp.setenv("AWS_REGION", "us-east-1")
    for name in ("AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE"):
        mp.delenv(name, raising=False)
    clock = folder / "clock"
    clock.write_text(str(DAY.timestamp() - datetime.now(UTC).timestamp()))
    with ServerThread(mock_app(MockContext(today=DAY.date())), log_level="critical") as mock:
        settings = settings_for(mock.url, folder, bedrock_base_url=mock.url, vertex_base_url=mock.url,
                                clock_offset_file=str(clock))
        claude_api = {"upstream": "anthropic", "model": "claude-sonnet-4-5"}
        bedrock, vertex = {"upstream": "bedrock", "model": BEDROCK_ID}, {"upstream": "vertex-us", "model": VERTEX_ID}
        routes = {"claude-api": [claude_api], "bedrock": [bedrock], "vertex": [vertex], "mixed": [claude_api, vertex]}
        policy = policy_for(settings, {
            "upstreams": {"vertex-us": {"kind": "vertex", "project": PROJECT, "location": LOCATION, "url": mock.url}},
            "routes": [{"name": name, "models": [f"{name}-*"], "on_retired": "refuse", "targets": targets}
                       for name, targets in routes.items()]})
        with running_gateway(settings, policy=policy) as gw:
            yield gw.url
    mp.undo()


def ask(url: str, model: str):
    client = anthropic.Anthropic(base_url=url, api_key="caller", max_retries=0)
    return client.messages.with_raw_response.create(model=model, max_tokens=16,
                                                    messages=[{"role": "user", "content": "Where is order 7?"}])


@pytest.mark.parametrize("route", ["bedrock", "vertex"])
def test_a_claude_model_retired_on_the_claude_api_is_still_sent_to_bedrock_and_vertex(gateway, route):
    answer = ask(gateway, f"{route}-sonnet")
    assert answer.status_code == 200 and answer.headers["x-prefixgate-target"] in {"bedrock", "vertex-us"}
    assert answer.parse().content[0].text
    assert "x-prefixgate-model-retires" not in answer.headers      # nothing retires there by the catalogue


def test_the_claude_api_route_refuses_it_from_its_date(gateway):
    with pytest.raises(anthropic.BadRequestError) as refused:
        ask(gateway, "claude-api-sonnet")
    assert refused.value.status_code == 400
    message = refused.value.body["error"]["message"]
    assert "retired" in message and "2026-11-30" in message and "claude-sonnet-5-5" in message


def test_a_route_through_both_refuses_on_the_claude_api_and_goes_on_to_vertex(gateway):
    answer = ask(gateway, "mixed-sonnet")
    assert answer.status_code == 200 and answer.headers["x-prefixgate-target"] == "vertex-us"
