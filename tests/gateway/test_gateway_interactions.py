"""The Gemini Interactions API through the gateway to mock-providers with the real google-genai client:
create (whole and streamed, v1 and v1beta), continuation with `previous_interaction_id`, the implicit cache
read by a later call that repeats a long instruction, a priced ledger row per call, an OpenAI chat client
reaching an Interactions-only upstream by route, and stored interactions scoped to their tenant."""

from __future__ import annotations

import json
from decimal import Decimal

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai._interactions_errors import BadRequestError, NotFoundError

from prefixgate.ledger import read_records
from prefixgate.policies.schema import hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

MODEL = "gemini-3.8-flash"
# Google's list prices for gemini-3.8-flash in USD per million tokens (introductory, through 2026-12-31):
# input, cached input, output (https://github.com/BerriAI/litellm/discussions/39357).
INPUT, CACHED, OUTPUT = Decimal("0.75"), Decimal("0.075"), Decimal("3.75")
MINIMUM = 4096          # the implicit cache's minimum for 3.x Flash and newer (ai.google.dev caching page)
ACME, GLOBEX = "gw-acme-key-0001", "gw-globex-key-0002"
# One long instruction (about 5,700 tokens) shared by every call, a question that changes.
INSTRUCTION = "You are the ACME refunds assistant. " + " ".join(
    f"Clause {i}: refunds are accepted within 30 days of purchase and shipping is free over $50." for i in range(260))


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("interactions")
    with pytest.MonkeyPatch.context() as mp, ServerThread(mock_app(MockContext())) as mock:
        mp.setenv("GEMINI_API_KEY", "AIzaGatewayKey0000000000000000")
        mp.setenv("ANTHROPIC_API_KEY", "sk-ant-gateway-key-0001")
        settings = settings_for(mock.url, tmp)
        policy = {
            "upstreams": {"interactions-only": {"kind": "gemini_interactions", "url": mock.url}},
            "routes": [
                # A model served only by the Interactions API: chat callers are translated to it.
                {"name": "agentic", "models": ["gemini-agentic"],
                 "targets": [{"upstream": "interactions-only", "model": MODEL}]},
                {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]},
                {"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
            ],
            "keys": [{"name": "acme-app", "key_sha256": hash_key(ACME), "tenant": "acme"},
                     {"name": "globex-app", "key_sha256": hash_key(GLOBEX), "tenant": "globex"}],
        }
        with running_gateway(settings, policy=policy_for(settings, policy)) as gw:
            yield gw, settings


def _client(gw, key: str = ACME, version: str = "v1") -> genai.Client:
    return genai.Client(api_key=key, http_options={"base_url": gw.url, "api_version": version})


def _records(settings, count: int) -> list[dict]:
    wait_until(lambda: len(read_records(settings.ledger_path)) >= count, 10, f"{count} ledger records")
    return read_records(settings.ledger_path)


def _records_of(settings, count: int, **fields: str) -> list[dict]:
    """The ledger's rows with these fields, once there are `count` (the writer is asynchronous)."""
    def rows() -> list[dict]:
        return [r for r in read_records(settings.ledger_path) if all(r[k] == v for k, v in fields.items())]
    wait_until(lambda: len(rows()) >= count, 10, f"{count} ledger records with {fields}")
    return rows()


def _priced(rec: dict) -> Decimal:
    return (rec["uncached_input"] * INPUT + rec["cache_read"] * CACHED + rec["output"] * OUTPUT) / 1_000_000


def test_create_continue_and_read_the_instruction_from_the_implicit_cache(stack):
    gw, settings = stack
    before = len(read_records(settings.ledger_path))
    client = _client(gw)
    first = client.interactions.create(model=MODEL, system_instruction=INSTRUCTION, input="Can I return shoes?")
    assert first.status == "completed" and first.output_text and first.id
    assert first.usage.total_cached_tokens == 0 and first.usage.total_input_tokens > MINIMUM
    # The server holds the first turn: the gateway sends only the new question, the usage counts it all.
    second = client.interactions.create(model=MODEL, system_instruction=INSTRUCTION, input="And socks?",
                                        previous_interaction_id=first.id)
    assert second.output_text and second.previous_interaction_id == first.id
    assert second.usage.total_input_tokens > first.usage.total_input_tokens
    assert second.usage.total_cached_tokens >= MINIMUM
    # A fresh interaction repeating the long instruction reads it from the cache too (v1beta, as older clients).
    older = _client(gw, version="v1beta")   # held: a collected client closes its connection pool
    third = older.interactions.create(model=MODEL, system_instruction=INSTRUCTION, input="What about hats?")
    assert third.usage.total_cached_tokens >= MINIMUM
    records = _records(settings, before + 3)[before:]
    assert [r["dialect"] for r in records] == ["interactions"] * 3 and all(r["status"] == 200 for r in records)
    for rec, answer in zip(records, (first, second, third), strict=True):
        assert rec["cache_read"] == answer.usage.total_cached_tokens
        assert rec["uncached_input"] + rec["cache_read"] == answer.usage.total_input_tokens
        assert Decimal(rec["cost_usd"]) == _priced(rec)
    assert any("caches implicitly only" in line for line in records[0]["explanation"])
    assert any("previous_interaction_id: the earlier turns live at the provider" in line
               for line in records[1]["explanation"])


def test_streamed_creation_relays_the_events_and_records_the_usage(stack):
    gw, settings = stack
    before = len(read_records(settings.ledger_path))
    client = _client(gw)
    events = list(client.interactions.create(model=MODEL, system_instruction=INSTRUCTION,
                                             input="Stream me an answer.", stream=True))
    kinds = [e.event_type for e in events]
    assert kinds[0] == "interaction.created" and kinds[-1] == "interaction.completed" and "step.delta" in kinds
    text = "".join(e.delta.text for e in events if e.event_type == "step.delta")
    final = events[-1].interaction
    assert text and final.status == "completed" and final.usage.total_cached_tokens >= MINIMUM
    rec = _records(settings, before + 1)[-1]
    assert rec["stream"] and rec["status"] == 200 and rec["cache_read"] == final.usage.total_cached_tokens
    assert Decimal(rec["cost_usd"]) == _priced(rec) > 0


def test_another_tenant_cannot_read_delete_or_continue_an_interaction(stack):
    gw, _ = stack
    owner, theirs = _client(gw), _client(gw, GLOBEX)
    mine = owner.interactions.create(model=MODEL, input="Remember the number 7.")
    for attempt in (lambda: theirs.interactions.get(mine.id), lambda: theirs.interactions.delete(mine.id),
                    lambda: theirs.interactions.create(model=MODEL, input="Which number?",
                                                       previous_interaction_id=mine.id)):
        with pytest.raises(NotFoundError):
            attempt()
    # Its owner still can, and after deleting it, cannot any more.
    assert owner.interactions.get(mine.id).id == mine.id
    owner.interactions.delete(mine.id)
    with pytest.raises(NotFoundError):
        owner.interactions.get(mine.id)


def test_an_openai_chat_client_reaches_an_interactions_only_model_by_route(stack):
    gw, settings = stack
    chat = openai.OpenAI(api_key=ACME, base_url=gw.url + "/v1", max_retries=0)
    answer = chat.chat.completions.create(model="gemini-agentic", max_tokens=64, messages=[
        {"role": "system", "content": INSTRUCTION}, {"role": "user", "content": "Can I return a lamp?"}])
    assert answer.object == "chat.completion" and answer.choices[0].message.content
    assert answer.choices[0].finish_reason in ("stop", "length") and answer.usage.prompt_tokens > MINIMUM
    streamed = chat.chat.completions.create(model="gemini-agentic", max_tokens=64, stream=True,
                                            stream_options={"include_usage": True}, messages=[
        {"role": "system", "content": INSTRUCTION}, {"role": "user", "content": "And a chair?"}])
    chunks = list(streamed)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens >= MINIMUM
    records = _records_of(settings, 2, dialect="openai")[:2]       # no earlier test sends Chat Completions
    for rec in records:
        assert (rec["dialect"], rec["target"], rec["model"], rec["status"]) == ("openai", "interactions-only", MODEL, 200)
        assert any(line.startswith("translate: openai -> interactions") for line in rec["explanation"])
        assert Decimal(rec["cost_usd"]) == _priced(rec) > 0


def test_an_openai_tool_loop_through_an_interactions_only_model(stack):
    gw, _ = stack
    chat = openai.OpenAI(api_key=ACME, base_url=gw.url + "/v1", max_retries=0)
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    messages = [{"role": "user", "content": "Weather in Oslo?"}]
    first = chat.chat.completions.create(model="gemini-agentic", messages=messages, tools=tools, tool_choice="required")
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls"
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "mock"})
    streamed = list(chat.chat.completions.create(model="gemini-agentic", messages=messages, tools=tools,
                                                 tool_choice="required", stream=True))
    deltas = [tc for c in streamed if c.choices for tc in c.choices[0].delta.tool_calls or []]
    assert deltas[0].function.name == "get_weather"
    assert json.loads("".join(d.function.arguments or "" for d in deltas)) == {"city": "mock"}
    assert [c.choices[0].finish_reason for c in streamed if c.choices and c.choices[0].finish_reason] == ["tool_calls"]
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C"}]
    final = chat.chat.completions.create(model="gemini-agentic", messages=messages, tools=tools)
    assert final.choices[0].finish_reason == "stop" and final.choices[0].message.content


def test_an_anthropic_client_reaches_an_interactions_only_model_by_route(stack):
    gw, settings = stack
    claude = anthropic.Anthropic(api_key=ACME, base_url=gw.url, max_retries=0)
    message = claude.messages.create(model="gemini-agentic", max_tokens=64, system=INSTRUCTION,
                                     messages=[{"role": "user", "content": "Can I return a rug?"}])
    assert message.type == "message" and message.content[0].text and message.usage.input_tokens > 0
    (rec,) = _records_of(settings, 1, dialect="anthropic")
    assert (rec["target"], rec["status"]) == ("interactions-only", 200)
    assert rec["uncached_input"] + rec["cache_read"] == message.usage.input_tokens + message.usage.cache_read_input_tokens


def test_a_gemini_upstream_serves_interactions_callers_untranslated(stack):
    gw, settings = stack
    client = _client(gw)
    answer = client.interactions.create(model="gemini-3.5-flash", input="Hi")
    assert answer.output_text and answer.model == "gemini-3.5-flash"
    (rec,) = _records_of(settings, 1, dialect="interactions", model="gemini-3.5-flash")
    assert (rec["target"], rec["status"]) == ("gemini", 200)
    assert not any(line.startswith("translate:") for line in rec["explanation"])


def test_an_interactions_client_reaches_claude_translated_except_a_continuation(stack):
    gw, settings = stack
    client = _client(gw)
    answer = client.interactions.create(model="claude-sonnet-5-5", system_instruction="Be brief.", input="Hi",
                                        generation_config={"max_output_tokens": 64})
    assert answer.status == "completed" and answer.output_text and answer.usage.total_input_tokens > 0
    events = list(client.interactions.create(model="claude-sonnet-5-5", input="Hi again", stream=True,
                                             generation_config={"max_output_tokens": 64}))
    assert events[-1].event_type == "interaction.completed" and events[-1].interaction.usage.total_output_tokens > 0
    assert "".join(e.delta.text for e in events if e.event_type == "step.delta")
    rec = _records_of(settings, 2, dialect="interactions", target="anthropic")[-1]
    assert any(line.startswith("translate: interactions -> anthropic") for line in rec["explanation"])
    # The earlier turns live at Google: Claude cannot continue them, and the refusal names the field.
    mine = client.interactions.create(model=MODEL, input="Remember 7.")
    with pytest.raises(BadRequestError, match="previous_interaction_id"):
        client.interactions.create(model="claude-sonnet-5-5", input="Which number?", previous_interaction_id=mine.id,
                                   generation_config={"max_output_tokens": 64})


def test_bad_input_is_a_400_in_googles_shape_before_anything_is_sent_or_recorded(stack):
    gw, settings = stack
    resp = httpx.post(f"{gw.url}/v1beta/interactions", headers={"x-goog-api-key": ACME},
                      json={"model": MODEL, "input": [{"type": "user_input", "content": [{"type": "image"}]}]})
    assert resp.status_code == 400 and resp.json() == {"error": {
        "code": "invalid_argument", "message": "input.0.content.0: image content needs `data` (base64) or `uri`"}}
    unknown = httpx.get(f"{gw.url}/v1/interactions/int_never", headers={"x-goog-api-key": ACME})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    assert httpx.post(f"{gw.url}/v1/interactions", json={"model": MODEL, "input": "x"}).status_code == 401
    assert not [r for r in read_records(settings.ledger_path) if "content needs" in r["error"]]
