"""Provider-truth miss reasons end to end: the real anthropic and openai SDKs through the gateway to
mock-providers, which answers cache diagnostics as Anthropic and OpenAI document them (wire-2026-11.md
sections 2 and 3). The gateway attaches the previous answer's id of the conversation, records the provider's
reason on the ledger row, and shows it in /api/requests, the request detail and the misses view."""

from __future__ import annotations

import uuid

import anthropic
import httpx
import openai
import pytest

from prefixgate.ledger import read_records
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

CLAUDE = "claude-sonnet-5-5"
GPT = "gpt-5.6-sol"
SYSTEM = "You answer questions about parcels for a delivery company. Be brief and exact. " * 120
TOOLS = [{"name": "track_parcel", "description": "Where a parcel is now",
          "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}}}]
MORE_TOOLS = [*TOOLS, {"name": "refund", "description": "Refund an order",
                       "input_schema": {"type": "object", "properties": {"order": {"type": "string"}}}}]
POLICY = {"routes": [
    {"name": "claude", "models": ["claude-sonnet-*"], "targets": [{"upstream": "anthropic"}]},
    {"name": "claude-off", "models": ["claude-opus-*"], "targets": [{"upstream": "anthropic"}], "diagnostics": "off"},
    {"name": "claude-capped", "models": ["claude-haiku-*"], "targets": [{"upstream": "anthropic"}],
     "diagnostics_per_minute": 1},
    {"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
]}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("diagnostics")
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp)
        with running_gateway(settings, policy=policy_for(settings, POLICY)) as gw:
            yield gw, settings


def _claude(url: str) -> anthropic.Anthropic:
    # A fresh key is a fresh cache workspace at the mock (the open gateway passes the caller's key on).
    return anthropic.Anthropic(api_key="sk-ant-" + uuid.uuid4().hex, base_url=url, max_retries=0)


def _record(settings, request_id: str) -> dict:
    wait_until(lambda: any(r["id"] == request_id for r in read_records(settings.ledger_path)), 10, "the ledger record")
    return next(r for r in read_records(settings.ledger_path) if r["id"] == request_id)


def _two_turns(client: anthropic.Anthropic, model: str, stream: bool, **extra) -> tuple:
    """Turn 1 with one tool, turn 2 (the same conversation, continued) with a tool added."""
    first_msgs = [{"role": "user", "content": "Where is parcel 7?"}]
    args = {"model": model, "max_tokens": 64, "system": SYSTEM, **extra}
    first = client.messages.with_raw_response.create(**args, tools=TOOLS, messages=first_msgs)
    reply = first.parse().content[0].text
    msgs = [*first_msgs, {"role": "assistant", "content": reply}, {"role": "user", "content": "And parcel 8?"}]
    if stream:
        with client.messages.stream(**args, tools=MORE_TOOLS, messages=msgs) as s:
            second = s.get_final_message()
            second_id = s.response.headers["x-prefixgate-request-id"]
    else:
        raw = client.messages.with_raw_response.create(**args, tools=MORE_TOOLS, messages=msgs)
        second, second_id = raw.parse(), raw.headers["x-prefixgate-request-id"]
    return first.headers["x-prefixgate-request-id"], second, second_id


@pytest.mark.parametrize("stream", [False, True])
def test_changed_tools_are_named_by_anthropic_and_shown(stack, stream):
    gw, settings = stack
    first_id, second, second_id = _two_turns(_claude(gw.url), CLAUDE, stream)
    # The SDK reads the provider's answer, which the gateway relays untouched (in a stream: message_start).
    assert second.diagnostics is not None and second.diagnostics.cache_miss_reason.type == "tools_changed"
    missed = second.diagnostics.cache_miss_reason.cache_missed_input_tokens
    assert missed > 1000            # the system prompt alone is well over 1000 tokens
    assert _record(settings, first_id)["provider_miss_reason"] == ""       # the first turn has nothing to compare
    rec = _record(settings, second_id)
    assert rec["provider_miss_reason"] == "tools_changed" and rec["provider_missed_tokens"] == missed

    listed = httpx.get(gw.url + "/api/requests", params={"range": "15m", "route": "claude"}).json()["records"]
    shown = next(r for r in listed if r["id"] == second_id)
    assert shown["provider_miss_reason"] == "tools_changed" and shown["provider_missed_tokens"] == missed
    detail = httpx.get(gw.url + f"/api/requests/{second_id}", params={"range": "15m"}).json()
    assert detail["why"]["source"] == "provider" and detail["why"]["reason"] == "tools_changed"

    route = next(r for r in httpx.get(gw.url + "/api/misses", params={"range": "15m"}).json()["routes"]
                 if r["route"] == "claude")
    tools = next(e for e in route["provider"]["reasons"] if e["reason"] == "tools_changed")
    assert tools["count"] >= 1 and float(tools["missed_usd"]) > 0
    # The inferred reason for the same miss is the tools segment too: they agree.
    assert tools["inferred"] == "tools_changed" and tools["agreed"] == tools["compared"] >= 1


def test_a_callers_own_diagnostics_pass_through_untouched(stack):
    gw, settings = stack
    client = _claude(gw.url)
    raw = client.messages.with_raw_response.create(
        model=CLAUDE, max_tokens=32, system=SYSTEM, messages=[{"role": "user", "content": "hi"}],
        diagnostics={"previous_message_id": "msg_0123456789abcdef01234567"})
    # Had the gateway replaced the caller's id (with null, or one it captured) the provider would not say this.
    assert raw.parse().diagnostics.cache_miss_reason.type == "previous_message_not_found"
    rec = _record(settings, raw.headers["x-prefixgate-request-id"])
    assert rec["provider_miss_reason"] == "previous_message_not_found" and rec["provider_missed_tokens"] is None


def test_off_routes_and_capped_turns_carry_no_diagnostics(stack):
    gw, settings = stack
    _, off, off_id = _two_turns(_claude(gw.url), "claude-opus-5-5", False)
    assert off.diagnostics is None and _record(settings, off_id)["provider_miss_reason"] == ""
    # One request a minute: the first turn takes the route's allowance, the second goes without.
    _, capped, capped_id = _two_turns(_claude(gw.url), "claude-haiku-5-5", False)
    assert capped.diagnostics is None and _record(settings, capped_id)["provider_miss_reason"] == ""


@pytest.mark.parametrize("stream", [False, True])
def test_changed_reasoning_effort_is_named_by_openai_and_shown(stack, stream):
    gw, settings = stack
    client = openai.OpenAI(api_key="sk-test-" + uuid.uuid4().hex, base_url=gw.url + "/v1", max_retries=0)
    args = {"model": GPT, "instructions": SYSTEM, "max_output_tokens": 100}
    first = client.responses.create(**args, input="Where is parcel 7?", reasoning={"effort": "low"})
    history = [{"role": "user", "content": "Where is parcel 7?"}, {"role": "assistant", "content": first.output_text},
               {"role": "user", "content": "And parcel 8?"}]
    if stream:
        events = client.responses.create(**args, input=history, reasoning={"effort": "high"}, stream=True)
        second = next(e.response for e in events if e.type == "response.completed")
        second_id = events.response.headers["x-prefixgate-request-id"]
    else:
        raw = client.responses.with_raw_response.create(**args, input=history, reasoning={"effort": "high"})
        second, second_id = raw.parse(), raw.headers["x-prefixgate-request-id"]
    diag = second.prompt_cache_diagnostics
    assert diag is not None and diag.type == "cache_miss" and diag.reason == "reasoning_effort_changed"
    assert second.prompt_cache_options.comparison_response_id == first.id   # the real earlier answer's id
    rec = _record(settings, second_id)
    assert rec["provider_miss_reason"] == "reasoning_effort_changed"
    assert rec["provider_missed_tokens"] == diag.cache_missed_tokens
    listed = httpx.get(gw.url + "/api/requests", params={"range": "15m", "route": "gpt"}).json()["records"]
    assert next(r for r in listed if r["id"] == second_id)["provider_miss_reason"] == "reasoning_effort_changed"
    route = next(r for r in httpx.get(gw.url + "/api/misses", params={"range": "15m"}).json()["routes"]
                 if r["route"] == "gpt")
    assert route["provider"]["top"]["reason"] == "reasoning_effort_changed"


def test_an_answer_id_evicted_while_a_request_is_attached_starts_a_conversation_instead_of_failing() -> None:
    """`attach` runs off the event loop (big bodies are planned on worker threads) while `read`, on the loop,
    evicts the oldest answer ids: one evicted between looking it up and fetching it must not fail the request."""
    from collections import OrderedDict
    from types import SimpleNamespace

    from prefixgate.gateway.diagnostics import ProviderDiagnostics
    from prefixgate.providers.rules import load_catalog

    class EvictedMeanwhile(OrderedDict):
        def __contains__(self, key: object) -> bool:
            return True             # it was there when looked up ...

        def __getitem__(self, key: str) -> str:
            raise KeyError(key)     # ... and evicted by `read` before it was fetched

    diagnostics = ProviderDiagnostics(load_catalog())
    diagnostics._conversation_of = EvictedMeanwhile()
    call = SimpleNamespace(caller=SimpleNamespace(key=None), route=SimpleNamespace(name="gpt"))
    conv = SimpleNamespace(params={"previous_response_id": "resp_evicted"}, segments=[])
    conversation = diagnostics._conversation(call, SimpleNamespace(name="openai"), conv, None)  # type: ignore[arg-type]
    assert len(conversation) == 32          # a conversation of its own, from what the request says


def test_count_tokens_goes_to_anthropic_as_anthropic_takes_it(stack):
    """Anthropic refuses a request without `anthropic-version` (the mock too): counting through the gateway must
    answer what counting at the provider answers. (Here beside the mock this module already runs.)"""
    gw, settings = stack
    body = {"model": CLAUDE, "system": SYSTEM, "messages": [{"role": "user", "content": "Where is parcel 7?"}]}
    key = "sk-ant-" + uuid.uuid4().hex
    direct = httpx.post(f"{settings.anthropic_base_url}/v1/messages/count_tokens", json=body, timeout=10,
                        headers={"x-api-key": key, "anthropic-version": "2023-06-01"})
    assert direct.status_code == 200
    through = _claude(gw.url).messages.count_tokens(**body)
    assert through.input_tokens == direct.json()["input_tokens"]
