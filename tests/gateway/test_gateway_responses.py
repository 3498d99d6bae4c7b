"""The OpenAI Responses API through the gateway to mock-providers, driven by the real openai SDK: the
planner makes dated instructions cacheable, streams are priced once, `previous_response_id` chains and
stored-response calls reach the upstream that holds them, bad input and unknown paths answer in OpenAI's
shape, completions and embeddings are forwarded and priced."""

from __future__ import annotations

import uuid
from decimal import Decimal

import httpx
import openai
import pytest

from prefixgate.ledger import read_records
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import running_gateway, settings_for
from tests.sdk.support_sdk import dated_system
from tests.support_services import ServerThread, wait_until

MODEL = "gpt-5.4"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("responses")
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp)
        with running_gateway(settings) as gw:
            yield mock, gw, settings


def _client(url: str) -> openai.OpenAI:
    # A fresh key is a fresh cache workspace at the mock (the open gateway passes the caller's key on).
    return openai.OpenAI(api_key="sk-test-" + uuid.uuid4().hex, base_url=url + "/v1", max_retries=0)


def _records(settings, n: int) -> list[dict]:
    wait_until(lambda: len(read_records(settings.ledger_path)) >= n, 10, f"{n} ledger records")
    return read_records(settings.ledger_path)


def _args(day: int, **extra) -> dict:
    return {"model": MODEL, "instructions": dated_system(day), "input": "Where is my parcel?",
            "max_output_tokens": 200, **extra}


def test_dated_instructions_are_cached_through_the_gateway_and_not_straight(stack):
    mock, gw, settings = stack
    direct, through = _client(mock.url), _client(gw.url)
    straight = [direct.responses.create(**_args(day)) for day in (1, 2)]
    planned = [through.responses.create(**_args(day)) for day in (1, 2)]
    assert straight[1].usage.input_tokens_details.cached_tokens == 0
    assert planned[1].usage.input_tokens_details.cached_tokens > 1000
    assert planned[1].prompt_cache_key.startswith("pg-")       # set by the planner, echoed by the upstream
    records = [r for r in read_records(settings.ledger_path) if r["dialect"] == "responses"]
    assert records[-1]["cache_read"] == planned[1].usage.input_tokens_details.cached_tokens
    assert any(line.startswith("rewrite: moved") for line in records[-1]["explanation"])


def test_stateless_sessions_on_gpt_6_read_the_instructions_another_session_wrote(stack):
    """GPT-5.6+ reads a prefix only where a breakpoint was written, and `instructions` cannot carry one: through
    the gateway, a second stateless session's first request reads the instructions the first session wrote;
    sent straight, it writes them again (at 1.25x input)."""
    mock, gw, settings = stack
    direct, through = _client(mock.url), _client(gw.url)

    def session(client: openai.OpenAI, question: str) -> openai.types.responses.Response:
        return client.responses.create(model="gpt-6.2-sol", instructions=dated_system(1), input=question,
                                       store=False, max_output_tokens=200)

    straight = [session(direct, q) for q in ("Where is my parcel?", "Can I change the delivery address?")]
    planned = [session(through, q) for q in ("Where is my parcel?", "Can I change the delivery address?")]
    assert straight[1].usage.input_tokens_details.cached_tokens == 0
    assert planned[1].usage.input_tokens_details.cached_tokens > 1000
    assert planned[1].instructions is None      # they went as the first input item, a developer message
    records = [r for r in read_records(settings.ledger_path) if r["model"] == "gpt-6.2-sol"]
    assert any(line.startswith("cache: instructions sent as the first input item") for line in records[-1]["explanation"])


def test_stream_yields_deltas_and_a_usage_the_ledger_prices_once(stack):
    _, gw, settings = stack
    before = len(read_records(settings.ledger_path))
    client = _client(gw.url)
    with client.responses.stream(**_args(3)) as stream:
        events = list(stream)
        final = stream.get_final_response()
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1 and "".join(deltas) == final.output_text
    assert [e.sequence_number for e in events] == list(range(len(events)))
    records = _records(settings, before + 1)
    assert len(records) == before + 1
    rec = records[-1]
    assert rec["stream"] and rec["output"] == final.usage.output_tokens
    assert rec["uncached_input"] + rec["cache_read"] == final.usage.input_tokens and rec["cost_usd"] is not None


def test_previous_response_id_chains_and_stored_calls_reach_the_upstream(stack):
    _, gw, settings = stack
    client = _client(gw.url)
    first = client.responses.create(**_args(4))
    second = client.responses.create(model=MODEL, instructions=dated_system(4), input="And when?",
                                     previous_response_id=first.id, max_output_tokens=200)
    assert second.previous_response_id == first.id
    assert second.usage.input_tokens > first.usage.input_tokens      # the chain is billed whole
    rec = read_records(settings.ledger_path)[-1]
    assert "plan: previous_response_id: the earlier turns live at the provider and were not changed" in rec["explanation"]
    assert client.responses.retrieve(first.id).output_text == first.output_text
    items = client.responses.input_items.list(second.id, order="asc")
    assert [i.role for i in items.data if i.type == "message"] == ["user", "assistant", "user"]
    assert client.responses.input_tokens.count(model=MODEL, input="hi").input_tokens > 0
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input="again", previous_response_id=first.id)
    assert err.value.body["param"] == "previous_response_id"


@pytest.mark.parametrize(("body", "param"), [
    ({"model": MODEL, "input": 5}, "input"),
    ({"model": MODEL, "input": [{"type": "bogus"}]}, "input.0.type"),
    ({"model": MODEL, "input": [{"role": "robot", "content": "x"}]}, "input.0.role"),
    ({"model": MODEL}, "input"),
])
def test_bad_input_is_a_400_naming_the_field_and_never_reaches_the_ledger(stack, body, param):
    _, gw, settings = stack
    before = len(read_records(settings.ledger_path))
    r = httpx.post(gw.url + "/v1/responses", json=body, headers={"authorization": "Bearer sk-x"})
    assert r.status_code == 400 and r.json()["error"]["param"] == param
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert len(read_records(settings.ledger_path)) == before


def test_unknown_paths_answer_in_the_callers_error_shape(stack):
    _, gw, _ = stack
    r = httpx.get(gw.url + "/v1/responses/resp_1/nope", headers={"authorization": "Bearer sk-x"})
    # OpenAI's own 404s are of type invalid_request_error (its error types have no not_found).
    assert r.status_code == 404 and r.json()["error"]["type"] == "invalid_request_error"
    r = httpx.post(gw.url + "/v1/messages/batches", headers={"x-api-key": "k"})
    assert r.status_code == 404 and r.json()["type"] == "error"
    with pytest.raises(openai.NotFoundError):
        _client(gw.url).post("/realtime/sessions", cast_to=dict, body={})


def test_completions_and_embeddings_are_forwarded_and_priced(stack):
    _, gw, settings = stack
    before = len(read_records(settings.ledger_path))
    client = _client(gw.url)
    done = client.completions.create(model=MODEL, prompt="Say hi", max_tokens=20)
    vectors = client.embeddings.create(model="text-embedding-3-small", input=["one", "two"])
    assert done.choices[0].text and done.usage.prompt_tokens > 0
    assert len(vectors.data) == 2 and len(vectors.data[0].embedding) == 16 and vectors.usage.prompt_tokens == 2
    completion, embedding = _records(settings, before + 2)[-2:]
    assert completion["uncached_input"] == done.usage.prompt_tokens and completion["output"] == done.usage.completion_tokens
    # gpt-5.4's list prices (https://developers.openai.com/api/docs/models/gpt-5.4): $2.50 input, $15 output per million.
    assert Decimal(completion["cost_usd"]) == (done.usage.prompt_tokens * Decimal("2.50")
                                               + done.usage.completion_tokens * Decimal("15")) / 1_000_000
    assert embedding["uncached_input"] == 2 and embedding["status"] == 200
    assert all(r["explanation"][0].endswith("forwarded unplanned") for r in (completion, embedding))


def test_reasoning_items_reach_the_upstream_byte_exact(stack):
    _, gw, _ = stack
    client = _client(gw.url)
    reasoning = {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Plan: é."}],
                 "encrypted_content": "gAAAAB\u00e9/+==\n\u2028x"}
    made = client.responses.create(model="gpt-5.4", instructions=dated_system(8), reasoning={"effort": "low"},
                                   include=["reasoning.encrypted_content"], max_output_tokens=200,
                                   input=[{"role": "user", "content": "Hi"}, reasoning,
                                          {"role": "user", "content": "Go on"}])
    assert made.output[0].type == "reasoning" and made.output[0].encrypted_content
    listed = client.responses.input_items.list(made.id, order="asc").data
    sent = next(i for i in listed if i.type == "reasoning")
    assert sent.model_dump(exclude_none=True) == reasoning
