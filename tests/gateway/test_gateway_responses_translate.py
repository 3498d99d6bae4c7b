"""Responses requests routed by policy to other providers, and Chat Completions requests to a
Responses-only upstream, through the gateway to mock-providers with the real openai SDK: caching intent
survives translation, what cannot be translated is a 400 naming it or skipped for the next fallback."""

from __future__ import annotations

import uuid

import openai
import pytest

from prefixgate.ledger import read_records
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.sdk.support_sdk import POLICY as POLICY_TEXT
from tests.sdk.support_sdk import dated_system
from tests.support_services import ServerThread, wait_until

POLICY = {
    "upstreams": {"responses-only": {"kind": "openai_responses", "url": "MOCK"}},
    "routes": [
        {"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
        {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]},
        # A chained request goes only to the targets that reach its chain's home: OpenAI, never Anthropic.
        {"name": "fallback", "models": ["chain"], "targets": [{"upstream": "anthropic", "model": "claude-haiku-4-5"},
                                                             {"upstream": "openai", "model": "gpt-5.4"}]},
        {"name": "pro", "models": ["gpt-5-pro"], "targets": [{"upstream": "responses-only", "model": "gpt-5.4"}]},
        {"name": "openai", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
    ],
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory, monkeypatch_module):
    tmp = tmp_path_factory.mktemp("translate")
    with ServerThread(mock_app(MockContext())) as mock:
        for env, value in (("ANTHROPIC_API_KEY", "sk-ant-gw"), ("GEMINI_API_KEY", "AIzaGatewayKey0000000000000000"),
                           ("OPENAI_API_KEY", "sk-gw-" + uuid.uuid4().hex)):
            monkeypatch_module.setenv(env, value)
        settings = settings_for(mock.url, tmp)
        data = {**POLICY, "upstreams": {"responses-only": {"kind": "openai_responses", "url": mock.url}}}
        with running_gateway(settings, policy=policy_for(settings, data)) as gw:
            yield gw, settings


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def _client(gw) -> openai.OpenAI:
    return openai.OpenAI(api_key="caller", base_url=gw.url + "/v1", max_retries=0)


def _last(settings) -> dict:
    wait_until(lambda: read_records(settings.ledger_path), 10, "a ledger record")
    return read_records(settings.ledger_path)[-1]


@pytest.mark.parametrize("model", ["claude-sonnet-4-6", "gemini-3.5-flash"])
def test_responses_to_other_providers_keeps_caching(stack, model):
    gw, settings = stack
    client = _client(gw)
    # Over every model's minimum (Gemini 3.x Flash: 4,096 tokens; https://ai.google.dev/gemini-api/docs/caching).
    answers = [client.responses.create(model=model, instructions=f"{dated_system(day)}\n{POLICY_TEXT * 3}", input="Where is my parcel?",
                                       max_output_tokens=128) for day in (11, 12)]
    assert all(a.output_text for a in answers)
    # Cached tokens come back in the Responses usage fields, whatever the target reported them as.
    assert answers[1].usage.input_tokens_details.cached_tokens > 1000
    rec = _last(settings)
    assert rec["dialect"] == "responses" and rec["cache_read"] == answers[1].usage.input_tokens_details.cached_tokens
    assert any(line.startswith("translate: responses ->") for line in rec["explanation"])


def test_responses_stream_translated_from_anthropic(stack):
    gw, _ = stack
    with _client(gw).responses.stream(model="claude-sonnet-4-6", input="Hello", max_output_tokens=64) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == final.output_text
    assert final.usage.output_tokens > 0


def test_what_cannot_be_translated_is_a_400_naming_it(stack):
    gw, _ = stack
    client = _client(gw)
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="claude-sonnet-4-6", input="Search", tools=[{"type": "web_search"}])
    assert err.value.body["param"] == "tools.0"
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="claude-sonnet-4-6", input="More", previous_response_id="resp_x")
    assert err.value.body["param"] == "previous_response_id"


def test_a_chain_goes_only_to_the_target_that_holds_it(stack):
    gw, settings = stack
    client = _client(gw)
    first = client.responses.create(model="gpt-5.4", input="Hello", max_output_tokens=64)   # stored at OpenAI
    second = client.responses.create(model="chain", input="More", previous_response_id=first.id, max_output_tokens=64)
    assert second.previous_response_id == first.id
    rec = _last(settings)
    # The route's first target, Anthropic, is not tried at all (docs/security.md: a follow-up goes to its chain's).
    assert rec["target"] == "openai" and rec["attempts"] == 1
    assert not any("anthropic" in line for line in rec["explanation"]), rec["explanation"]


def test_chat_completions_to_a_responses_only_upstream(stack):
    gw, settings = stack
    client = _client(gw)
    messages = [{"role": "system", "content": dated_system(13)}, {"role": "user", "content": "Where is my parcel?"}]
    done = client.chat.completions.create(model="gpt-5-pro", messages=messages, max_tokens=64)
    assert done.choices[0].message.content and done.usage.prompt_tokens > 1000
    rec = _last(settings)
    assert rec["target"] == "responses-only" and rec["dialect"] == "openai"
    assert any(line.startswith("translate: openai -> responses") for line in rec["explanation"])
    streamed = list(client.chat.completions.create(model="gpt-5-pro", messages=messages, max_tokens=64, stream=True,
                                                   stream_options={"include_usage": True}))
    assert streamed[-1].usage.prompt_tokens_details.cached_tokens > 1000
