"""The real openai SDK's Responses calls against mock-providers: caching, streaming events, stored
responses and chains, scripted function calls, and errors in OpenAI's shape with `param`."""

from __future__ import annotations

import json
import uuid

import httpx
import openai
import pytest

from prefixgate.simulation.mock.script import scripted_call
from tests.core.providers.support_prompts import text_of

pytestmark = pytest.mark.slow
INSTRUCTIONS = text_of(2000)
TOOL = {"type": "function", "name": "get_weather", "description": "Weather in a city", "strict": True,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                       "required": ["city", "unit"], "additionalProperties": False}}


@pytest.fixture
def client(mock_server):
    url, _ = mock_server
    return openai.OpenAI(api_key="sk-test-" + uuid.uuid4().hex, base_url=url + "/v1", max_retries=0)


def test_second_identical_request_reads_the_prefix_in_128_token_steps(client):
    first = client.responses.create(model="gpt-5.4", instructions=INSTRUCTIONS, input="Why?")
    assert first.usage.input_tokens_details.cached_tokens == 0 and first.usage.input_tokens > 2000
    second = client.responses.create(model="gpt-5.4", instructions=INSTRUCTIONS, input="And how?")
    cached = second.usage.input_tokens_details.cached_tokens
    assert cached >= 1024 and cached % 128 == 0 and cached <= second.usage.input_tokens
    assert second.output_text and second.status == "completed" and second.id.startswith("resp_")


def test_short_prompts_are_never_cached_and_cache_keys_route_apart(client):
    short = [client.responses.create(model="gpt-5.4", input="hi").usage for _ in range(2)]
    assert all(u.input_tokens_details.cached_tokens == 0 for u in short)
    client.responses.create(model="gpt-5.4", instructions=INSTRUCTIONS, input="q", prompt_cache_key="a")
    other = client.responses.create(model="gpt-5.4", instructions=INSTRUCTIONS, input="q", prompt_cache_key="b")
    assert other.usage.input_tokens_details.cached_tokens == 0
    same = client.responses.create(model="gpt-5.4", instructions=INSTRUCTIONS, input="q", prompt_cache_key="a",
                                   prompt_cache_retention="24h")
    assert same.usage.input_tokens_details.cached_tokens >= 1024 and same.prompt_cache_retention == "24h"


def test_stream_has_the_full_event_sequence_with_sequence_numbers(client):
    with client.responses.stream(model="gpt-5.4", instructions=INSTRUCTIONS, input="Why?") as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == final.output_text and kinds.count("response.output_text.delta") > 1
    assert events[0].response.usage is None and final.usage.input_tokens > 2000


def test_stored_responses_chain_retrieve_list_and_delete(client):
    first = client.responses.create(model="gpt-5.4", instructions=INSTRUCTIONS, input="Why?")
    chained = client.responses.create(model="gpt-5.4", input="Say more.", previous_response_id=first.id)
    # The chain is billed whole: the earlier input and answer (not its instructions: those are never carried).
    assert chained.usage.input_tokens > first.usage.output_tokens + 4
    assert chained.previous_response_id == first.id
    assert client.responses.retrieve(first.id).output_text == first.output_text
    items = client.responses.input_items.list(chained.id, order="asc")
    assert [i.role for i in items.data if i.type == "message"] == ["user", "assistant", "user"]
    assert client.responses.input_tokens.count(model="gpt-5.4", input="x", previous_response_id=first.id).input_tokens > 0
    replay = list(client.responses.retrieve(first.id, stream=True, starting_after=2))
    assert replay[0].sequence_number == 3 and replay[-1].type == "response.completed"
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="gpt-5.4", input="again", previous_response_id=first.id)
    assert err.value.body["param"] == "previous_response_id"
    with pytest.raises(openai.BadRequestError):
        client.responses.cancel(chained.id)  # only background responses can be cancelled


def test_store_false_is_not_retrievable(client):
    r = client.responses.create(model="gpt-5.4", input="hi", store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)


def test_a_required_tool_choice_gets_a_function_call_then_its_output_gets_text(client):
    first = client.responses.create(model="gpt-5.4", input="Weather in Paris?", tools=[TOOL], tool_choice="required")
    call = next(i for i in first.output if i.type == "function_call")
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "mock", "unit": "c"}
    second = client.responses.create(model="gpt-5.4", tools=[TOOL], previous_response_id=first.id, input=[
        {"type": "function_call_output", "call_id": call.call_id, "output": "18C"}])
    assert second.output[0].type == "message" and second.output_text


def test_the_marker_asks_for_a_call_with_given_arguments():
    body = {"tools": [TOOL]}
    items = [{"role": "user", "content": 'Do it [[mock:call get_weather {"city":"Oslo","unit":"f"}]]'}]
    assert scripted_call(body, items).arguments == '{"city":"Oslo","unit":"f"}'
    assert scripted_call({**body, "tool_choice": "none"}, items) is None
    assert scripted_call(body, [{"role": "user", "content": "[[mock:call unknown]]"}]) is None


def test_reasoning_items_carry_encrypted_content_and_tokens(client):
    r = client.responses.create(model="gpt-5.4", input="Think.", reasoning={"effort": "low"},
                                include=["reasoning.encrypted_content"], store=False)
    assert r.output[0].type == "reasoning" and r.output[0].encrypted_content.startswith("gAAAA")
    assert r.usage.output_tokens_details.reasoning_tokens == 64 and r.usage.output_tokens > 64


@pytest.mark.parametrize(("body", "param"), [
    ({"model": "gpt-5.4", "input": 5}, "input"),
    ({"model": "gpt-5.4", "input": [{"type": "bogus"}]}, "input.0.type"),
    ({"model": "gpt-5.4", "input": [{"role": "robot", "content": "x"}]}, "input.0.role"),
    ({"model": "gpt-5.4", "input": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]}, "input.0.content.0.type"),
    ({"model": "gpt-5.4", "input": "x", "previous_response_id": "resp_missing"}, "previous_response_id"),
    ({"model": "gpt-5.4", "input": "x", "prompt_cache_retention": "1w"}, "prompt_cache_retention"),
])
def test_bad_input_is_a_400_in_openais_shape_naming_the_field(mock_server, body, param):
    url, _ = mock_server
    r = httpx.post(url + "/v1/responses", json=body, headers={"authorization": "Bearer sk-x"})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == param and r.json()["error"]["type"] == "invalid_request_error"
