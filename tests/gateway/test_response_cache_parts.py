"""The response cache's parts without servers: the policy block validated at the edge, what the key covers and
what it ignores, the in-memory store's byte bound, the entry format, and the ledger's sums for hits."""

from __future__ import annotations

import asyncio
import json

import pytest
import yaml

from prefixgate.config import Settings
from prefixgate.dialects import WIRE_FORMATS, wire_format
from prefixgate.dialects.neutral import Reply, ToolCall
from prefixgate.errors import RequestError
from prefixgate.gateway.auth import Caller
from prefixgate.gateway.proxy import Call
from prefixgate.gateway.response_cache import Answer, Entry, replay_stream, request_key
from prefixgate.gateway.response_rules import deterministic, refusal, signed, uncacheable
from prefixgate.gateway.response_store import MemoryStore
from prefixgate.ledger_rollup import SUMS, contribution
from prefixgate.policies import CallerKey, Policy, PolicyError, builtin_upstreams
from prefixgate.policies.schema import ResponseCachePolicy
from prefixgate.usage import Usage


def load(route_extra: dict) -> Policy:
    data = {"routes": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}], **route_extra}]}
    return Policy.from_dict(data, builtin_upstreams(Settings()))


def test_the_policy_block_defaults_off_and_is_validated_at_the_edge():
    assert load({}).routes[0].response_cache.mode == "off"
    # PyYAML reads a bare `on` as true: the block still means what the operator wrote.
    parsed = yaml.safe_load("response_cache: {mode: on, ttl_s: 60, max_mb: 2, tool_calls: true}")
    rc = load(parsed).routes[0].response_cache
    assert (rc.mode, rc.ttl_s, rc.max_bytes, rc.tool_calls) == ("on", 60, 2 * 1024 * 1024, True)
    assert load(yaml.safe_load("response_cache: {mode: off}")).routes[0].response_cache.mode == "off"
    for bad, where in (({"mode": "always"}, "routes.0.response_cache.mode"), ({"ttl_s": 0}, "ttl_s"),
                       ({"max_mb": 0}, "max_mb"), ({"tool_calls": "yes"}, "tool_calls"),
                       ({"ttl": 5}, "routes.0.response_cache.ttl")):
        with pytest.raises(PolicyError, match=where):
            load({"response_cache": bad})


ROUTE = load({"response_cache": {"mode": "on"}}).routes[0]
ACME = CallerKey("acme-app", "0" * 64, tenant="acme")


def key_of(body: dict, caller: CallerKey | None = ACME, dialect: str = "openai", credential: str = "k",
           route=ROUTE) -> str:
    wire = wire_format(dialect)
    conv = wire.parse_request(json.dumps(body).encode())
    call = Call("id", dialect, wire, conv, Caller(caller, credential), route, "rewrite", {}, 0.0)
    return request_key(call)


BASE = {"model": "gpt-5.5", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}


def test_the_key_ignores_transport_and_cache_markers_and_spelling():
    plain = key_of(BASE)
    assert key_of({**BASE, "stream": True, "stream_options": {"include_usage": True}}) == plain
    # A bare string and the one text block it stands for, and a cache marker, change nothing the model reads.
    blocks = {**BASE, "messages": [BASE["messages"][0], {"role": "user", "content": [
        {"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}]}]}
    assert key_of(blocks) == plain
    assert key_of(dict(reversed(BASE.items()))) == plain
    assert key_of({**BASE, "temperature": 0}) == key_of({**BASE, "temperature": 0.0}) != plain


def test_the_key_covers_scope_and_every_answer_changing_field():
    plain = key_of(BASE)
    others = [
        key_of(BASE, caller=CallerKey("globex-app", "1" * 64, tenant="globex")),
        key_of(BASE, caller=CallerKey("solo", "2" * 64)),        # no tenant: the key is the scope
        key_of(BASE, caller=None, credential="sk-other"),         # open gateway: the caller's own credential
        key_of({**BASE, "model": "gpt-5.4"}),
        key_of({**BASE, "temperature": 0.2}),
        key_of({**BASE, "response_format": {"type": "json_object"}}),
        key_of({**BASE, "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}),
        key_of({**BASE, "messages": [{"role": "system", "content": "Be long."}, BASE["messages"][1]]}),
        key_of({**BASE, "messages": [BASE["messages"][0], {"role": "user", "content": "Hi", "name": "ann"}]}),
        key_of(BASE, route=load({"name": "other"} | {"response_cache": {"mode": "on"}}).routes[0]),
    ]
    assert len({plain, *others}) == len(others) + 1
    # Another key of the same tenant shares the tenant's entries.
    assert key_of(BASE, caller=CallerKey("acme-batch", "3" * 64, tenant="acme")) == plain
    # A key without a tenant is its secret, as for what it stores upstream (ownership): a key issued again under
    # the same name (another holder, once the first is revoked) never reads the first one's answers, whose
    # stored response ids it could not reach either.
    assert key_of(BASE, caller=CallerKey("solo", "2" * 64)) != key_of(BASE, caller=CallerKey("solo", "4" * 64))
    assert "acme" not in plain and len(plain) == 64


def test_memory_store_keeps_to_its_byte_bound_least_recently_used_first_and_expires():
    now = [0.0]
    evicted: list[int] = []
    store = MemoryStore(300, evicted.append, clock=lambda: now[0])

    async def run() -> None:
        for k in "abc":
            await store.put(k * 4, b"x" * 96, ttl_s=10)     # 100 bytes each: exactly full
        assert store.bytes == 300 and not evicted
        assert await store.get("aaaa") is not None           # a is now the most recently used
        await store.put("dddd", b"x" * 96, ttl_s=10)
        assert evicted == [1] and await store.get("bbbb") is None and await store.get("aaaa") is not None
        await store.put("huge", b"x" * 400, ttl_s=10)        # larger than the whole bound: not kept, nothing evicted
        assert await store.get("huge") is None and store.bytes == 300
        now[0] = 10.0
        assert await store.get("aaaa") is None and store.bytes == 200

    asyncio.run(run())


def test_an_entry_reads_back_and_garbage_does_not():
    entry = Entry(Reply("Hi.", Usage(10, 20, {"5m": 3}, 4), "tool_calls", [ToolCall("c1", "f", {"a": 1})], "r1"),
                  '{"id":"r1"}', "openai", "openai", "gpt-5.5", "0.0001", 5.0)
    back = Entry.from_bytes(entry.to_bytes())
    assert back == entry
    for garbage in (b"", b"[]", b'{"v": 99}', entry.to_bytes()[:-3], b'{"v":1,"reply":{"text":"x"}}'):
        with pytest.raises((ValueError, KeyError, TypeError)):
            Entry.from_bytes(garbage)


def test_rollups_sum_hits_and_avoided_spend_apart_from_savings():
    base = {"status": 200, "cost_without_cache_usd": "0", "savings_usd": "0", "uncached_input": 0, "cache_read": 0,
            "cache_writes": {}, "output": 0, "latency_ms": 1.0, "ttft_ms": None}
    hit, _, _ = contribution({**base, "cost_usd": "0", "response_cache": "hit", "avoided_usd": "0.25"})
    sums = dict(zip(SUMS, hit, strict=True))
    assert (sums["response_hits"], sums["response_avoided_pico"], sums["savings_pico"], sums["spend_pico"]) == \
        (1, 250_000_000_000, 0, 0)
    shadow, _, _ = contribution({**base, "cost_usd": "0.5", "cost_without_cache_usd": "0.5", "response_cache": "shadow-hit"})
    sums = dict(zip(SUMS, shadow, strict=True))
    assert (sums["shadow_hits"], sums["shadow_avoidable_pico"], sums["response_hits"]) == (1, 500_000_000_000, 0)


@pytest.mark.parametrize("name", list(WIRE_FORMATS))
def test_a_replay_reads_back_in_every_ingress_format_whole_and_streamed(name):
    # What the caller's own format reads from a replay: the stored text, tool call, finish and usage.
    wire = wire_format(name)
    reply = Reply("Stored answer.", Usage(7, 0, {}, 3), "tool_calls", [ToolCall("call_1", "lookup", {"q": "x"})])
    whole = wire.read_reply(json.loads(json.dumps(wire.write_reply(reply, "m"))))
    assert (whole.text, whole.finish, [(c.name, c.args) for c in whole.tool_calls]) == \
        ("Stored answer.", "tool_calls", [("lookup", {"q": "x"})])
    answer, usage = Answer(), wire.stream_usage()
    events = wire.framing.split(bytearray(), replay_stream(wire, reply, "m"))
    for event in events:
        parsed = wire.framing.payload(event)
        if parsed is not None:
            answer.feed(wire.read_deltas(parsed), wire)
            usage.feed(parsed)
    streamed = answer.result()
    assert streamed is not None and streamed.text == "Stored answer." and streamed.finish == "tool_calls"
    assert [(c.name, c.args) for c in streamed.tool_calls] == [("lookup", {"q": "x"})]
    assert usage.usage is not None and usage.usage.output == 3


def _with_finish(name: str, native: str) -> dict:
    """A whole text answer in format `name` whose own finish reason is `native`."""
    body = wire_format(name).build_response("m", "An answer.", Usage(5, 0, {}, 2))
    where = {"openai": lambda b: b["choices"][0], "gemini": lambda b: b["candidates"][0]}
    field_of = {"interactions": "status", "anthropic": "stop_reason", "bedrock_invoke": "stop_reason", "openai": "finish_reason",
                "gemini": "finishReason", "responses": "status", "bedrock_converse": "stopReason"}
    where.get(name, lambda b: b)(body)[field_of[name]] = native
    return body


# (format, its own finish reason, whether the answer may be replayed): the providers' documented reasons.
FINISHES = [
    ("anthropic", "end_turn", True), ("anthropic", "stop_sequence", True), ("anthropic", "max_tokens", False),
    ("anthropic", "pause_turn", False), ("anthropic", "refusal", False),
    ("bedrock_invoke", "end_turn", True), ("bedrock_invoke", "pause_turn", False),
    ("openai", "stop", True), ("openai", "length", False), ("openai", "content_filter", False),
    ("openai", "an_unknown_reason", False),
    ("gemini", "STOP", True), ("gemini", "MAX_TOKENS", False), ("gemini", "SAFETY", False), ("gemini", "OTHER", False),
    ("gemini", "PROHIBITED_CONTENT", False), ("gemini", "BLOCKLIST", False), ("gemini", "SPII", False),
    ("gemini", "MALFORMED_FUNCTION_CALL", False),
    ("responses", "completed", True), ("responses", "incomplete", False), ("responses", "failed", False),
    ("bedrock_converse", "end_turn", True), ("bedrock_converse", "guardrail_intervened", False),
    ("bedrock_converse", "content_filtered", False),
    ("interactions", "completed", True), ("interactions", "incomplete", False), ("interactions", "failed", False),
]


@pytest.mark.parametrize(("name", "native", "replayable"), FINISHES)
def test_only_an_answer_that_ended_by_itself_is_replayable(name, native, replayable):
    wire = wire_format(name)
    caller = wire_format("responses" if name == "openai" else "openai")     # translated: the caller never saw `native`
    reply = wire.read_reply(_with_finish(name, native))
    assert (refusal(reply, wire, ResponseCachePolicy("on"), caller) is None) == replayable
    # The same answer streamed: its finish event carries the format's own reason too.
    answer = Answer()
    answer.feed([("text", "An answer."), ("finish", reply.finish, native)], wire)
    assert (refusal(answer.result(), wire, ResponseCachePolicy("on"), caller) is None) == replayable


@pytest.mark.parametrize("name", ["anthropic", "bedrock_invoke", "bedrock_converse"])
def test_an_answer_stopped_at_a_stop_sequence_is_stored_only_for_a_caller_of_another_format(name):
    # Anthropic's stop_reason stop_sequence (Converse's stopReason too) tells the caller a stop sequence ended the
    # answer, and which; its stream writer can only say end_turn from the neutral stop. A caller of another format
    # read that format's stop, which a replay says again.
    wire = wire_format(name)
    reply = wire.read_reply(_with_finish(name, "stop_sequence"))
    assert refusal(reply, wire, ResponseCachePolicy("on"), wire) == "finish a replay cannot say"
    assert refusal(reply, wire, ResponseCachePolicy("on"), wire_format("openai")) is None
    assert refusal(wire.read_reply(_with_finish(name, "end_turn")), wire, ResponseCachePolicy("on"), wire) is None


@pytest.mark.parametrize("name", ["responses", "interactions"])
def test_a_stored_answer_is_replayed_under_its_own_id(name):
    # A Responses response or an interaction is reached again by its id (previous_response_id, GET): a replay,
    # whole or streamed, must name the stored one, never a fresh id that exists nowhere upstream.
    wire = wire_format(name)
    reply = Reply("Stored answer.", Usage(7, 0, {}, 3), "stop", [], "stored-answer-1")
    assert wire.stored_id(wire.write_kept_reply(reply, "m")) == "stored-answer-1"
    answer = Answer()
    for event in wire.framing.split(bytearray(), replay_stream(wire, reply, "m")):
        parsed = wire.framing.payload(event)
        if parsed is not None:
            answer.feed(wire.read_deltas(parsed), wire)
    assert answer.result().id == "stored-answer-1"


ON_POLICY = ResponseCachePolicy("on")
# OpenAI's refusals (Structured Outputs guide): the finish is a normal "stop" / "completed"; the refusal is in
# `message.refusal` (Chat, streamed as `delta.refusal`) or a `refusal` content part (Responses), never in the text.
REFUSED_CHAT = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-5.4",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": None,
                                                     "refusal": "I'm sorry, I cannot assist with that request."},
                             "logprobs": None, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 10, "total_tokens": 22}}
REFUSED_CHUNKS = [
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": None, "refusal": ""}, "finish_reason": None}]},
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"refusal": "I'm sorry, I cannot assist with that request."}, "finish_reason": None}]},
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
]
REFUSED_RESPONSE = {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5.4", "output": [
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
     "content": [{"type": "refusal", "refusal": "I'm sorry, I cannot assist with that request."}]}],
    "usage": {"input_tokens": 12, "output_tokens": 10, "total_tokens": 22}}


def test_a_refusal_under_a_normal_finish_is_never_stored():
    # Stored, it was replayed as an empty answer to every streamed request (the refusal is no text or tool call).
    chat, responses = wire_format("openai"), wire_format("responses")
    assert refusal(chat.read_reply(REFUSED_CHAT), chat, ON_POLICY, chat) == "empty"
    assert refusal(responses.read_reply(REFUSED_RESPONSE), responses, ON_POLICY, responses) == "empty"
    answer = Answer()
    for chunk in REFUSED_CHUNKS:
        answer.feed(chat.read_deltas(chunk), chat)
    assert refusal(answer.result(), chat, ON_POLICY, chat) == "empty"


def test_requests_on_state_the_request_changes_or_asking_log_probabilities_bypass():
    responses, claude = wire_format("responses"), wire_format("anthropic")
    # A Responses conversation gains each turn upstream; a replay would answer from an older conversation and
    # leave the turn out of it. An Anthropic container keeps the files its code execution wrote.
    turn = {"model": "gpt-5.4", "input": "And then?", "conversation": "conv_123"}
    assert uncacheable(responses.parse_request(json.dumps(turn).encode())) == "server-side state"
    container = {"model": "claude-sonnet-5-5", "max_tokens": 100, "container": "container_011",
                 "messages": [{"role": "user", "content": "Run it again."}]}
    assert uncacheable(claude.parse_request(json.dumps(container).encode())) == "server-side state"
    # Responses' code interpreter in a container named by id (OpenAI's code interpreter guide: `container` is a
    # container id, or {"type": "auto"} for a new one): its files change between requests.
    coded = {"model": "gpt-5.4", "input": "Add a total column to data.csv.",
             "tools": [{"type": "code_interpreter", "container": "cntr_682dfc4bd1b08191"}]}
    assert uncacheable(responses.parse_request(json.dumps(coded).encode())) == "server-side state"
    fresh = {**coded, "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}
    assert uncacheable(responses.parse_request(json.dumps(fresh).encode())) is None
    # Responses asks for log probabilities through `include`; a streamed replay carries none.
    logprobs = {"model": "gpt-5.4", "input": "Hi", "include": ["message.output_text.logprobs"]}
    assert uncacheable(responses.parse_request(json.dumps(logprobs).encode())) == "log probabilities asked"
    plain = {"model": "gpt-5.4", "input": "Hi", "include": ["reasoning.encrypted_content"]}
    assert uncacheable(responses.parse_request(json.dumps(plain).encode())) is None


def test_a_tool_call_whose_arguments_are_not_json_is_never_stored():
    # A model's malformed arguments, streamed: a replay could only send them back as some other JSON object
    # than the one the model wrote, and the caller's tool would run on that.
    chat = wire_format("openai")
    answer = Answer()
    for delta in ({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": ""}}]},
                  {"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "unterminated'}}]}):
        answer.feed(chat.read_deltas({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}), chat)
    answer.feed(chat.read_deltas({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}), chat)
    assert refusal(answer.result(), chat, ResponseCachePolicy("on", tool_calls=True), chat) == "malformed tool call"


def test_requests_whose_provider_acts_for_the_caller_bypass():
    # The provider itself calls the caller's MCP servers (tools that may write: a ticket filed, a mail sent) or
    # its webhook: a replay would report the calls as made and make none of them.
    crm = "https://crm.example/mcp"
    bodies = {
        "responses": {"model": "gpt-5.4", "input": "File the refund ticket.",
                      "tools": [{"type": "mcp", "server_label": "crm", "server_url": crm, "require_approval": "never"}]},
        "anthropic": {"model": "claude-sonnet-5-5", "max_tokens": 100, "mcp_servers": [{"type": "url", "url": crm, "name": "crm"}],
                      "tools": [{"type": "mcp_toolset", "mcp_server_name": "crm"}],
                      "messages": [{"role": "user", "content": "File the refund ticket."}]},
        "interactions": {"model": "gemini-3.5-flash", "input": "File the refund ticket.",
                         "tools": [{"type": "mcp_server", "name": "crm", "url": crm}]},
    }
    for name, body in bodies.items():
        assert uncacheable(wire_format(name).parse_request(json.dumps(body).encode())) == "the provider acts for the caller", name
    hooked = {"model": "gemini-3.5-flash", "input": "Summarise the week.", "webhook_config": {"uri": "https://acme.example/hook"}}
    assert uncacheable(wire_format("interactions").parse_request(json.dumps(hooked).encode())) == "the provider acts for the caller"


@pytest.mark.parametrize(("name", "body"), [
    ("openai", {"model": "gpt-5.4", "temperature": 0, "messages": [{"role": "user", "content": "Hi"}]}),
    ("anthropic", {"model": "claude-sonnet-5-5", "max_tokens": 50, "temperature": 0,
                   "messages": [{"role": "user", "content": "Hi"}]}),
    ("gemini", {"generationConfig": {"temperature": 0}, "contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}),
    ("bedrock_converse", {"inferenceConfig": {"temperature": 0}, "messages": [{"role": "user", "content": [{"text": "Hi"}]}]}),
    ("interactions", {"model": "gemini-3.5-flash", "input": "Hi", "generation_config": {"temperature": 0}}),
])
def test_shadow_mode_compares_temperature_0_requests_in_every_format(name, body):
    # Where each format puts its temperature (the providers' request references): top level, generationConfig,
    # Converse's inferenceConfig, the Interactions API's generation_config.
    wire = wire_format(name)
    conv = wire.parse_request(json.dumps(body).encode(), model="m") if name in ("gemini", "bedrock_converse") \
        else wire.parse_request(json.dumps(body).encode())
    assert deterministic(conv)
    warm = json.loads(json.dumps(body).replace('"temperature": 0', '"temperature": 0.7'))
    conv = wire.parse_request(json.dumps(warm).encode(), model="m") if name in ("gemini", "bedrock_converse") \
        else wire.parse_request(json.dumps(warm).encode())
    assert not deterministic(conv)


# Rich requests, one per body format, from the providers' request references: every field an answer can depend on.
RICH = {
    "openai": {"model": "gpt-5.4", "messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "name": "ann", "content": [{"type": "text", "text": "hi"},
                                                    {"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "low"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": True}}],
        "tool_choice": "auto", "parallel_tool_calls": True, "seed": 1, "temperature": 0.5, "top_p": 0.9,
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object"}}},
        "max_completion_tokens": 100, "stop": ["x"], "reasoning_effort": "low", "service_tier": "flex", "verbosity": "low",
        "frequency_penalty": 0.1, "logit_bias": {"12": 1}, "prediction": {"type": "content", "content": "z"},
        "user": "u", "safety_identifier": "s", "prompt_cache_key": "p", "metadata": {"a": "b"}},
    "responses": {"model": "gpt-5.4", "instructions": "Be brief.", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc_1"},
        {"type": "function_call_output", "call_id": "c1", "output": "r"}, {"type": "item_reference", "id": "msg_1"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"}],
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}], "tool_choice": "auto",
        "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}}, "verbosity": "low"},
        "reasoning": {"effort": "low"}, "max_output_tokens": 100, "temperature": 0.5, "truncation": "auto",
        "previous_response_id": "resp_1", "store": False, "max_tool_calls": 3},
    "anthropic": {"model": "claude-sonnet-5-5", "max_tokens": 100, "system": [{"type": "text", "text": "Be brief."}],
                  "messages": [
                      {"role": "user", "content": [
                          {"type": "text", "text": "hi"},
                          {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"},
                           "citations": {"enabled": True}}]},
                      {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "sig"},
                                                        {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r", "is_error": True}]}],
                  "tools": [{"name": "f", "input_schema": {"type": "object"}}], "stop_sequences": ["x"],
                  "tool_choice": {"type": "auto", "disable_parallel_tool_use": True}, "top_k": 5,
                  "thinking": {"type": "enabled", "budget_tokens": 1024}, "metadata": {"user_id": "u"}},
    "gemini": {"contents": [{"role": "user", "parts": [{"text": "hi"}, {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]},
                            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "s"}]},
                            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"r": 1}}}]}],
               "systemInstruction": {"parts": [{"text": "Be brief."}]},
               "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "object"}}]}],
               "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
               "generationConfig": {"temperature": 0.5, "topK": 5, "maxOutputTokens": 100, "seed": 1,
                                    "responseMimeType": "application/json", "thinkingConfig": {"thinkingBudget": 100}},
               "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
               "cachedContent": "cachedContents/a"},
    "bedrock_converse": {"system": [{"text": "Be brief."}], "messages": [
        {"role": "user", "content": [{"text": "hi"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "f", "input": {"a": 1}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "r"}], "status": "error"}}]}],
        "toolConfig": {"tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object"}}}}], "toolChoice": {"auto": {}}},
        "inferenceConfig": {"maxTokens": 100, "temperature": 0.5, "stopSequences": ["x"]},
        "additionalModelRequestFields": {"top_k": 5}, "guardrailConfig": {"guardrailIdentifier": "g", "guardrailVersion": "1"}},
}


def _leaves(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))
    else:
        yield path, value


def _changed(body: dict, path: tuple, value) -> dict:
    body = json.loads(json.dumps(body))
    where = body
    for step in path[:-1]:
        where = where[step]
    where[path[-1]] = (not value) if isinstance(value, bool) else value + 1 if isinstance(value, (int, float)) \
        else "x" if value is None else value + "x"
    return body


@pytest.mark.parametrize("name", list(RICH))
def test_every_field_of_a_rich_request_is_in_the_key(name):
    # Each leaf changed in turn (a string gains a letter, a number grows by one, a flag flips, a null becomes text):
    # each such request must miss the other's entry. A change the format refuses is no request.
    wire = wire_format(name)

    def key(body: dict) -> str:
        conv = wire.parse_request(json.dumps(body).encode(), model="m") if name in ("gemini", "bedrock_converse") \
            else wire.parse_request(json.dumps(body).encode())
        return request_key(Call("id", name, wire, conv, Caller(ACME, "k"), ROUTE, "rewrite", {}, 0.0))
    plain, checked = key(RICH[name]), 0
    for path, value in _leaves(RICH[name]):
        try:
            changed = key(_changed(RICH[name], path, value))
        except RequestError:
            continue
        assert changed != plain, path
        checked += 1
    assert checked >= 15


def test_reasoning_state_a_caller_must_send_back_is_told_from_an_empty_field():
    # Claude's thinking block carries its `signature`, and a redacted one its `data` (Anthropic's extended thinking
    # guide); a Responses reasoning item's `encrypted_content` is null unless `include` asked for it, and a stored
    # response keeps its reasoning upstream.
    thinking = {"content": [{"type": "thinking", "thinking": "Look it up.", "signature": "EqQBCgIYAhIM"},
                            {"type": "tool_use", "id": "toolu_01", "name": "lookup", "input": {}}]}
    assert signed(thinking) and signed({"content": [{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"}]})
    reasoning = {"output": [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": None},
                            {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{}"}]}
    assert not signed(reasoning)
    reasoning["output"][0]["encrypted_content"] = "gAAAAABo"
    assert signed(reasoning)
