"""The mock providers refuse a retired model as the providers do, from the catalogue's `retires` date by the mock's
own calendar (`MockContext.today`), and a gateway route's `on_retired` meets that answer.

Expected answers, from the providers' documentation and their SDKs' parsing (not from our tables):
- Claude API: 404 `not_found_error` "model: <id>" (claude-sonnet-4-5 retires 2026-11-30,
  https://platform.claude.com/docs/en/about-claude/model-deprecations).
- OpenAI: 404 `invalid_request_error`, code `model_not_found`, "The model `<id>` has been deprecated, learn more
  here: https://platform.openai.com/docs/deprecations" (gpt-5 shuts down 2026-12-11).
- Gemini API: gemini-2.5-flash shuts down 2026-12-01, its calls then answered by gemini-3.5-flash-lite
  (https://ai.google.dev/gemini-api/docs/deprecations); a shut-down model with no replacement is Google's 404
  "models/<id> is not found for API version v1beta, or is not supported for generateContent. Call ListModels ...".
- Bedrock: 404 ResourceNotFoundException "This model version has reached the end of its life. Please refer to the
  AWS documentation for more details." (Claude Opus 4 on Bedrock: retired 2026-06-15).
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import date

import anthropic
import boto3
import botocore.exceptions
import httpx
import openai
import pytest
from botocore.config import Config
from click.testing import CliRunner
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from prefixgate.cli import main
from prefixgate.providers.rules import default_catalog
from prefixgate.simulation.mock.server import MockContext, create_app
from prefixgate.simulation.simulator import Simulator
from tests.gateway.support_gateway import gateway_over_mock
from tests.support_services import ServerThread

# anthropic-python warns of a model it knows is deprecated; these tests call such models on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")
HI = [{"role": "user", "content": "Hi"}]
DEPRECATED = "The model `{}` has been deprecated, learn more here: https://platform.openai.com/docs/deprecations"
NOT_FOUND = ("models/{} is not found for API version v1beta, or is not supported for generateContent. Call ListModels "
             "to see the list of available models and their supported methods.")
END_OF_LIFE = "This model version has reached the end of its life. Please refer to the AWS documentation for more details."


def key() -> str:
    return f"sk-{uuid.uuid4().hex}"


@pytest.fixture
def on(mock_server, monkeypatch):
    """Set the mock's day."""
    return lambda day: monkeypatch.setattr(mock_server[1], "today", day)


def test_anthropic_answers_until_the_retirement_day_then_404s_whole_streamed_and_counted(mock_server, on):
    claude = anthropic.Anthropic(api_key=key(), base_url=mock_server[0], max_retries=0)
    on(date(2026, 11, 29))
    assert claude.messages.create(model="claude-sonnet-4-5", max_tokens=5, messages=HI).model == "claude-sonnet-4-5"
    assert "claude-sonnet-4-5" in [m.id for m in claude.models.list()]
    on(date(2026, 11, 30))
    calls = [lambda: claude.messages.create(model="claude-sonnet-4-5", max_tokens=5, messages=HI),
             lambda: claude.messages.create(model="claude-sonnet-4-5", max_tokens=5, messages=HI, stream=True),
             lambda: claude.messages.count_tokens(model="claude-sonnet-4-5", messages=HI),
             lambda: claude.models.retrieve("claude-sonnet-4-5")]
    for call in calls:
        with pytest.raises(anthropic.NotFoundError) as e:
            call()
        assert e.value.body == {"type": "error", "error": {"type": "not_found_error", "message": "model: claude-sonnet-4-5"}}
    dated = "claude-sonnet-4-5-20250929"        # the caller's own spelling comes back
    with pytest.raises(anthropic.NotFoundError, match=f"model: {dated}"):
        claude.messages.create(model=dated, max_tokens=5, messages=HI)
    listed = [m.id for m in claude.models.list()]
    assert "claude-sonnet-4-5" not in listed and "claude-sonnet-5-5" in listed


def test_openai_chat_and_responses_404_a_shut_down_model(mock_server, on):
    client = openai.OpenAI(api_key=key(), base_url=mock_server[0] + "/v1", max_retries=0)
    on(date(2026, 12, 10))
    assert client.chat.completions.create(model="gpt-5", messages=HI).model == "gpt-5"
    assert client.responses.create(model="gpt-5", input="Hi").status == "completed"
    on(date(2026, 12, 11))
    calls = [lambda: client.chat.completions.create(model="gpt-5", messages=HI),
             lambda: client.chat.completions.create(model="gpt-5", messages=HI, stream=True),
             lambda: client.responses.create(model="gpt-5", input="Hi"),
             lambda: client.responses.create(model="gpt-5", input="Hi", stream=True),
             lambda: client.models.retrieve("gpt-5")]
    for call in calls:
        with pytest.raises(openai.NotFoundError) as e:
            call()
        assert e.value.body == {"message": DEPRECATED.format("gpt-5"), "type": "invalid_request_error", "param": None,
                                "code": "model_not_found"}
    listed = [m.id for m in client.models.list()]
    assert "gpt-5" not in listed and "gpt-5.4" in listed


def test_gemini_routes_a_shut_down_model_to_its_replacement(mock_server, on):
    client = genai.Client(api_key=key(), http_options=types.HttpOptions(base_url=mock_server[0], api_version="v1beta"))
    on(date(2026, 11, 30))
    assert client.models.generate_content(model="gemini-2.5-flash", contents="Hi").model_version == "gemini-2.5-flash"
    on(date(2026, 12, 1))
    assert client.models.generate_content(model="gemini-2.5-flash", contents="Hi").model_version == "gemini-3.5-flash-lite"
    streamed = list(client.models.generate_content_stream(model="gemini-2.5-flash", contents="Hi"))
    assert streamed[-1].model_version == "gemini-3.5-flash-lite"
    assert "models/gemini-2.5-flash" not in [m.name for m in client.models.list()]


def test_gemini_404s_a_shut_down_model_with_no_replacement():
    catalog = default_catalog()
    row = catalog.models[("gemini", "gemini-2.5-pro")]
    orphaned = replace(catalog, models={**catalog.models, ("gemini", row.id): replace(row, replacement="")}, _names={})
    ctx = MockContext(simulator=Simulator(orphaned, entry_visible_after_s=0.0), today=date(2026, 12, 1))
    with ServerThread(create_app(ctx), log_level="critical") as server:
        client = genai.Client(api_key=key(), http_options=types.HttpOptions(base_url=server.url, api_version="v1beta"))
        with pytest.raises(genai_errors.ClientError) as e:
            client.models.generate_content(model="gemini-2.5-pro", contents="Hi")
        assert (e.value.code, e.value.status, e.value.message) == (404, "NOT_FOUND", NOT_FOUND.format("gemini-2.5-pro"))
        ctx.today = date(2026, 11, 30)
        assert client.models.generate_content(model="gemini-2.5-pro", contents="Hi").model_version == "gemini-2.5-pro"


def test_bedrock_answers_end_of_life_with_resource_not_found(mock_server, on, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDMOCKRETIRED")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "mock/retired")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    runtime = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=mock_server[0],
                           aws_access_key_id="AKIDMOCKRETIRED", aws_secret_access_key="mock/retired",
                           config=Config(retries={"max_attempts": 1}))
    ask = {"modelId": "anthropic.claude-opus-4-20250514-v1:0", "inferenceConfig": {"maxTokens": 5},
           "messages": [{"role": "user", "content": [{"text": "Hi"}]}]}
    on(date(2026, 6, 14))
    assert runtime.converse(**ask)["ResponseMetadata"]["HTTPStatusCode"] == 200
    on(date(2026, 6, 15))
    for call in (runtime.converse, runtime.converse_stream):
        with pytest.raises(botocore.exceptions.ClientError) as e:
            call(**ask)
        assert e.value.response["Error"] == {"Code": "ResourceNotFoundException", "Message": END_OF_LIFE}
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_claude_on_vertex_keeps_its_own_dates(mock_server, on):
    # Anthropic's dates apply to its own platforms only; Google's are not in the catalogue, so Vertex serves it.
    on(date(2026, 12, 1))
    url = f"{mock_server[0]}/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5:rawPredict"
    answer = httpx.post(url, headers={"authorization": "Bearer mock-vertex-token"}, timeout=10,
                        json={"anthropic_version": "vertex-2023-10-16", "max_tokens": 5, "messages": HI})
    assert answer.status_code == 200


def test_a_route_replaces_a_retired_model_or_passes_the_providers_404_on(tmp_path, monkeypatch):
    # claude-sonnet-4 retired 2026-06-15 (-> claude-sonnet-5-5), o4-mini 2026-10-23: retired by the gateway's date
    # and the mock's alike.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-gw-000")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-gw-openai-000")

    def policy(_: str) -> dict:
        return {"routes": [
            {"name": "swapped", "models": ["swap-*"], "on_retired": "replace",
             "targets": [{"upstream": "anthropic", "model": "claude-sonnet-4"}]},
            {"name": "kept", "models": ["keep-*"], "targets": [{"upstream": "anthropic", "model": "claude-sonnet-4"}]},
            {"name": "kept-gpt", "models": ["old-gpt"], "targets": [{"upstream": "openai", "model": "o4-mini"}]}]}

    with gateway_over_mock(tmp_path, policy) as gw:
        claude = anthropic.Anthropic(api_key="caller", base_url=gw.url, max_retries=0)
        assert claude.messages.create(model="swap-me", max_tokens=5, messages=HI).model == "claude-sonnet-5-5"
        with pytest.raises(anthropic.NotFoundError) as e:       # on_retired: warn (the default) sends it as asked
            claude.messages.create(model="keep-me", max_tokens=5, messages=HI)
        assert e.value.body["error"]["type"] == "not_found_error" and "claude-sonnet-4" in e.value.body["error"]["message"]
        gpt = openai.OpenAI(api_key="caller", base_url=gw.url + "/v1", max_retries=0)
        with pytest.raises(openai.NotFoundError) as e:
            gpt.chat.completions.create(model="old-gpt", messages=HI)
        assert e.value.body["code"] == "model_not_found" and "o4-mini" in e.value.body["message"]


@pytest.mark.parametrize(("args", "env"), [(["--today", "tomorrow"], {}), ([], {"PREFIXGATE_MOCK_TODAY": "2026-13-01"})])
def test_mock_providers_refuses_a_day_that_is_not_a_date(args, env):
    result = CliRunner().invoke(main, ["mock-providers", *args], env=env)
    assert result.exit_code == 1 and "--today (PREFIXGATE_MOCK_TODAY): expected a date as YYYY-MM-DD" in result.output
