"""The mock Interactions API, driven by the real google-genai client: the documented implicit cache (the
per-model minimum, a match on the shared token prefix even inside one text part), server-held chains,
`store: false`, get / delete / cancel, and errors in Google's shape."""

from __future__ import annotations

import httpx
import pytest
from google import genai
from google.genai._interactions_errors import BadRequestError, NotFoundError

from prefixgate.simulation.mock.server import MockContext, create_app
from prefixgate.tokens import count_tokens
from tests.sdk.support_sdk import fresh_key
from tests.support_services import ServerThread

MODEL = "gemini-3.8-flash"
MINIMUM = 4096      # 3.x Flash and newer (https://ai.google.dev/gemini-api/docs/caching)
# About 5,000 tokens of one text part, then an ending that differs between requests.
SHARED = "You are the ACME refunds assistant. " + " ".join(f"Clause {i}: goods may be returned within 30 days."
                                                           for i in range(400))


@pytest.fixture(scope="module")
def mock():
    with ServerThread(create_app(MockContext())) as server:
        yield server


def _client(mock, key: str | None = None) -> genai.Client:
    return genai.Client(api_key=key or fresh_key("AIza"), http_options={"base_url": mock.url})


def test_the_cache_reads_the_shared_token_prefix_that_ends_inside_one_part(mock):
    client = _client(mock)
    first = client.interactions.create(model=MODEL, input=SHARED + " Answer in English.")
    second = client.interactions.create(model=MODEL, input=SHARED + " Answer in French, please.")
    assert first.usage.total_cached_tokens == 0
    shared = count_tokens(SHARED)       # the common text alone, counted with the tokenizer the mock uses
    assert shared > MINIMUM
    assert shared - 2 <= second.usage.total_cached_tokens < second.usage.total_input_tokens


def test_nothing_is_read_below_the_models_minimum(mock):
    client = _client(mock)
    short = " ".join(f"Clause {i}: goods may be returned." for i in range(300))
    assert 1024 < count_tokens(short) < MINIMUM
    answers = [client.interactions.create(model=MODEL, input=short) for _ in range(2)]
    assert [a.usage.total_cached_tokens for a in answers] == [0, 0]


def test_projects_do_not_share_a_cache(mock):
    one, other = _client(mock), _client(mock)      # held: a collected client closes its connections
    one.interactions.create(model=MODEL, input=SHARED)
    assert other.interactions.create(model=MODEL, input=SHARED).usage.total_cached_tokens == 0


def test_a_chain_is_held_by_the_server_and_billed_whole(mock):
    client = _client(mock)
    first = client.interactions.create(model=MODEL, system_instruction=SHARED, input="Can I return shoes?")
    second = client.interactions.create(model=MODEL, system_instruction=SHARED, input="And socks?",
                                        previous_interaction_id=first.id)
    assert second.previous_interaction_id == first.id
    # The earlier question and answer are in the prompt though the request did not send them.
    assert second.usage.total_input_tokens > first.usage.total_input_tokens + first.usage.total_output_tokens
    assert second.usage.total_cached_tokens >= first.usage.total_input_tokens - 2
    full = client.interactions.get(second.id, include_input=True)
    assert [s.type for s in full.steps] == ["user_input", "model_output", "user_input", "model_output"]


def test_an_unstored_interaction_cannot_be_continued_or_read(mock):
    client = _client(mock)
    loose = client.interactions.create(model=MODEL, input="Hi", store=False)
    with pytest.raises(NotFoundError):
        client.interactions.get(loose.id)
    with pytest.raises(NotFoundError):
        client.interactions.create(model=MODEL, input="Again", previous_interaction_id=loose.id)


def test_get_delete_cancel_and_v1beta(mock):
    key = fresh_key("AIza")
    client = _client(mock, key)
    made = client.interactions.create(model=MODEL, input="Hi", background=True)
    older = genai.Client(api_key=key, http_options={"base_url": mock.url, "api_version": "v1beta"})
    assert older.interactions.get(made.id).id == made.id
    assert client.interactions.cancel(made.id).status == "completed"       # it completed at once
    events = list(client.interactions.get(made.id, stream=True))
    assert events[0].event_type == "interaction.created" and events[-1].event_type == "interaction.completed"
    client.interactions.delete(made.id)
    with pytest.raises(NotFoundError):
        client.interactions.get(made.id)


def test_errors_come_in_googles_shape(mock):
    client = _client(mock)
    with pytest.raises(NotFoundError):
        client.interactions.create(model="gemini-0-nonexistent", input="Hi")
    with pytest.raises(BadRequestError):
        client.interactions.create(agent="deep-research-pro-preview-12-2025", input="Hi")
    resp = httpx.post(f"{mock.url}/v1/interactions", json={"model": MODEL, "input": 3},
                      headers={"x-goog-api-key": "k"})
    assert resp.status_code == 400 and resp.json() == {
        "error": {"code": "invalid_argument",
                  "message": "input: expected a string, a content block, or a list of content blocks or steps"}}
    assert httpx.post(f"{mock.url}/v1/interactions", json={"model": MODEL, "input": "x"}).status_code == 403


WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def test_a_function_call_then_its_result_then_an_answer(mock):
    client = _client(mock)
    asked = client.interactions.create(model=MODEL, tools=[WEATHER], input="Weather in Oslo? [[mock:call get_weather]]")
    call = asked.steps[-1]
    assert asked.status == "requires_action" and call.type == "function_call"
    assert (call.name, call.arguments) == ("get_weather", {"city": "mock"}) and asked.usage.total_output_tokens > 0
    answered = client.interactions.create(model=MODEL, tools=[WEATHER], previous_interaction_id=asked.id, input=[
        {"type": "function_result", "call_id": call.id, "name": "get_weather", "result": "Sunny, 21 C"}])
    assert answered.status == "completed" and answered.output_text
    # A forced tool choice calls it without a marker; streamed, the call is one step.
    events = list(client.interactions.create(model=MODEL, tools=[WEATHER], input="Hi", stream=True,
                                             generation_config={"tool_choice": "any"}))
    starts = [e.step for e in events if e.event_type == "step.start"]
    assert [s.type for s in starts] == ["function_call"] and events[-1].interaction.status == "requires_action"


def test_a_thinking_model_reports_its_thoughts_beside_its_output(mock):
    # Interactions usage: total_thought_tokens beside total_output_tokens, both in total_tokens (wire-2026-11.md 1)
    client = _client(mock)
    usage = client.interactions.create(model=MODEL, input="Why is the sky blue?").usage
    assert usage.total_thought_tokens > 0
    assert usage.total_tokens == usage.total_input_tokens + usage.total_output_tokens + usage.total_thought_tokens
