"""The response cache through the gateway with the real openai, anthropic and google-genai clients against
mock-providers (docs/response-cache.md): repeats served without an upstream call, whole or streamed; every change
that can change the answer misses, and so does another tenant; unsafe answers are never stored; shadow mode
serves nothing."""

from __future__ import annotations

import json
from decimal import Decimal

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import types
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from prefixgate.ledger import read_records
from prefixgate.simulation.mock.faults import FaultPlan, FaultRule, parse_fault
from tests.gateway.support_response_cache import KEYS, cache_stack, policy
from tests.support_services import ServerThread, wait_until

ON = {"mode": "on"}
SYSTEM = "You answer in one short sentence."
ASK = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What does a prefix cache keep?"}]
CACHE = "x-prefixgate-response-cache"


def oa(gw, key: str = "ACME_KEY") -> openai.OpenAI:
    return openai.OpenAI(api_key=KEYS[key], base_url=gw.url + "/v1", max_retries=0)


def chat(client: openai.OpenAI, **changes):
    """A chat completion and the response cache's header."""
    raw = client.chat.completions.with_raw_response.create(**{"model": "gpt-5.5", "messages": ASK, **changes})
    return raw.parse(), raw.headers.get(CACHE)


def streamed_chat(client: openai.OpenAI, **changes) -> tuple[str, str | None, object]:
    with client.chat.completions.with_streaming_response.create(
            **{"model": "gpt-5.5", "messages": ASK, "stream": True, "stream_options": {"include_usage": True},
               **changes}) as resp:
        header = resp.headers.get(CACHE)
        chunks = list(resp.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, header, chunks[-1].usage


def test_openai_repeat_is_served_without_an_upstream_call_whole_and_streamed(tmp_path):
    with cache_stack(tmp_path, policy(gpt=ON), admin_token="dash-token-response-cache-0001") as (up, gw, settings):
        client = oa(gw)
        first, state = chat(client)
        assert state == "miss" and len(up.posts) == 1
        again, state = chat(client)
        assert state == "hit" and len(up.posts) == 1
        assert again.choices[0].message.content == first.choices[0].message.content
        assert again.choices[0].finish_reason == "stop"
        # The replay reports the usage the stored answer reported.
        assert again.usage.prompt_tokens == first.usage.prompt_tokens
        assert again.usage.completion_tokens == first.usage.completion_tokens
        text, state, usage = streamed_chat(client)
        assert state == "hit" and len(up.posts) == 1
        assert text == first.choices[0].message.content
        assert usage.completion_tokens == first.usage.completion_tokens
        wait_until(lambda: len(read_records(settings.ledger_path)) == 3, 10, "three ledger records")
        summary = httpx.get(gw.url + "/api/summary", params={"range": "15m"},
                            headers={"authorization": "Bearer dash-token-response-cache-0001"}).json()["totals"]
    miss, hit, streamed = read_records(settings.ledger_path)
    assert (miss["response_cache"], hit["response_cache"], streamed["response_cache"]) == ("miss", "hit", "hit")
    # A hit spent nothing and avoided what the stored answer cost; no tokens are counted for it.
    assert hit["cost_usd"] == "0" and hit["avoided_usd"] == miss["cost_usd"] and float(miss["cost_usd"]) > 0
    assert hit["uncached_input"] == hit["cache_read"] == hit["output"] == 0 and hit["savings_usd"] == "0"
    # The dashboard shows the avoided spend apart from prompt-cache savings, which only the miss contributes to.
    assert summary["response_cache"]["hits"] == 2
    assert Decimal(summary["response_cache"]["avoided_usd"]) == 2 * Decimal(miss["cost_usd"])
    assert Decimal(summary["savings_usd"]) == Decimal(miss["savings_usd"])
    assert Decimal(summary["spend_usd"]) == Decimal(miss["cost_usd"])


def test_a_streamed_first_answer_is_replayed_whole_and_streamed(tmp_path):
    with cache_stack(tmp_path, policy(gpt=ON)) as (up, gw, _):
        client = oa(gw)
        text, state, _ = streamed_chat(client, temperature=0.3)
        assert state == "miss" and len(up.posts) == 1
        again, state, _ = streamed_chat(client, temperature=0.3)
        assert (again, state) == (text, "hit")
        whole, state = chat(client, temperature=0.3)
        assert state == "hit" and whole.choices[0].message.content == text and len(up.posts) == 1


def test_a_translated_answer_is_stored_and_replayed_in_the_callers_format(tmp_path):
    # An OpenAI caller on a route to Claude: the answer was translated, and so is every replay.
    with cache_stack(tmp_path, policy(smart=ON)) as (up, gw, _):
        client = oa(gw)
        first, state = chat(client, model="smart")
        assert state == "miss" and up.posts == ["/v1/messages"]
        again, state = chat(client, model="smart")
        assert state == "hit" and again.choices[0].message.content == first.choices[0].message.content
        text, state, _ = streamed_chat(client, model="smart")
        assert (text, state) == (first.choices[0].message.content, "hit") and len(up.posts) == 1


def test_anthropic_repeat_whole_and_streamed(tmp_path):
    with cache_stack(tmp_path, policy(claude=ON)) as (up, gw, _):
        client = anthropic.Anthropic(api_key=KEYS["ACME_KEY"], base_url=gw.url, max_retries=0)
        ask = {"model": "claude-sonnet-5-5", "max_tokens": 200, "system": SYSTEM,
               "messages": [{"role": "user", "content": "What does a prefix cache keep?"}]}
        raw = client.messages.with_raw_response.create(**ask)
        first = raw.parse()
        assert raw.headers[CACHE] == "miss" and len(up.posts) == 1
        raw = client.messages.with_raw_response.create(**ask)
        assert raw.headers[CACHE] == "hit" and len(up.posts) == 1
        assert raw.parse().content[0].text == first.content[0].text and raw.parse().stop_reason == "end_turn"
        with client.messages.stream(**ask) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        assert text == first.content[0].text and final.stop_reason == "end_turn" and len(up.posts) == 1
        assert final.usage.output_tokens == first.usage.output_tokens
        # A beta header changes what the model may do (its tools, its context): another entry.
        beta = client.messages.with_raw_response.create(**ask, extra_headers={"anthropic-beta": "context-1m-2025-08-07"})
        assert beta.headers[CACHE] == "miss" and len(up.posts) == 2


def test_gemini_repeat_whole_and_streamed(tmp_path):
    with cache_stack(tmp_path, policy(gemini=ON)) as (up, gw, _):
        client = genai.Client(api_key=KEYS["ACME_KEY"], http_options=types.HttpOptions(base_url=gw.url))
        config = types.GenerateContentConfig(system_instruction=SYSTEM, temperature=0)
        first = client.models.generate_content(model="gemini-3.5-flash", contents="What does a prefix cache keep?",
                                               config=config)
        assert len(up.posts) == 1
        again = client.models.generate_content(model="gemini-3.5-flash", contents="What does a prefix cache keep?",
                                               config=config)
        assert again.text == first.text and len(up.posts) == 1
        text = "".join(c.text or "" for c in client.models.generate_content_stream(
            model="gemini-3.5-flash", contents="What does a prefix cache keep?", config=config))
        assert text == first.text and len(up.posts) == 1
        # The older SDK's stream (no alt=sse) is one JSON array of chunks: the replay is framed that way too.
        body = {"contents": [{"role": "user", "parts": [{"text": "What does a prefix cache keep?"}]}],
                "systemInstruction": {"role": "user", "parts": [{"text": SYSTEM}]}, "generationConfig": {"temperature": 0}}
        resp = httpx.post(gw.url + "/v1beta/models/gemini-3.5-flash:streamGenerateContent", json=body,
                          headers={"x-goog-api-key": KEYS["ACME_KEY"]})
        assert resp.headers[CACHE] == "hit" and len(up.posts) == 1
        chunks = resp.json()
        assert "".join(p.get("text", "") for c in chunks for p in c["candidates"][0]["content"]["parts"]) == first.text


def test_each_answer_changing_field_and_another_tenant_miss(tmp_path):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]
    with cache_stack(tmp_path, policy(gpt=ON)) as (up, gw, _):
        client = oa(gw)
        chat(client)
        assert chat(client)[1] == "hit" and len(up.posts) == 1
        changes = [
            {"messages": [{"role": "system", "content": SYSTEM + " Be formal."}, ASK[1]]},
            {"tools": tools},
            {"response_format": {"type": "json_object"}},
            {"temperature": 0.7},
            {"top_p": 0.5},
            {"seed": 7},
            {"stop": ["\n\n"]},
            {"reasoning_effort": "low"},
        ]
        for n, change in enumerate(changes, start=2):
            assert chat(client, **change)[1] == "miss", change
            assert len(up.posts) == n, change
        # Another tenant's identical request misses; another key of the same tenant shares the tenant's entries.
        assert chat(oa(gw, "GLOBEX_KEY"))[1] == "miss" and len(up.posts) == len(changes) + 2
        assert chat(oa(gw, "ACME_OTHER_KEY"))[1] == "hit" and len(up.posts) == len(changes) + 2


def test_errors_truncated_answers_and_tool_calls_are_never_stored(tmp_path):
    # The upstream refuses the first request for this model once with a 400 (not retried), then answers.
    faults = FaultPlan([FaultRule(parse_fault("status=400"), model="gpt-5.2", times=1),
                        FaultRule(parse_fault("drop_stream_after=2"), model="gpt-5.4-mini", times=1)])
    with cache_stack(tmp_path, policy(gpt=ON), faults=faults) as (up, gw, _):
        client = oa(gw)
        with pytest.raises(openai.BadRequestError):
            chat(client, model="gpt-5.2")
        assert chat(client, model="gpt-5.2")[1] == "miss" and len(up.posts) == 2
        # A stream the upstream breaks off is not stored either.
        with pytest.raises(openai.APIError):
            streamed_chat(client, model="gpt-5.4-mini")
        assert streamed_chat(client, model="gpt-5.4-mini")[1] == "miss" and len(up.posts) == 4
        assert streamed_chat(client, model="gpt-5.4-mini")[1] == "hit" and len(up.posts) == 4
        # Cut at max_tokens: finish_reason "length" is never replayed.
        cut, state = chat(client, max_completion_tokens=3)
        assert cut.choices[0].finish_reason == "length" and state == "miss"
        assert chat(client, max_completion_tokens=3)[1] == "miss" and len(up.posts) == 6
        # A function call (the mock calls a tool when tool_choice is required) is not stored by default.
        responses = dict(model="gpt-5.5", input="Look it up.", tool_choice="required",
                         tools=[{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}])
        raw = client.responses.with_raw_response.create(**responses)
        assert raw.parse().output[0].type == "function_call" and raw.headers[CACHE] == "miss"
        assert client.responses.with_raw_response.create(**responses).headers[CACHE] == "miss" and len(up.posts) == 8


def test_tool_calls_are_stored_when_the_route_allows_them(tmp_path):
    with cache_stack(tmp_path, policy(gpt={"mode": "on", "tool_calls": True})) as (up, gw, _):
        client = oa(gw)
        ask = dict(model="gpt-5.5", input="Look it up.", tool_choice="required",
                   tools=[{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}])
        first = client.responses.create(**ask)
        raw = client.responses.with_raw_response.create(**ask)
        assert raw.headers[CACHE] == "hit" and len(up.posts) == 1
        again = raw.parse()
        assert [(o.type, o.name, o.arguments) for o in again.output] == [(o.type, o.name, o.arguments) for o in first.output]
        # Streamed to the Responses SDK: the stored call arrives as its events, and the final response holds it.
        with client.responses.stream(**ask) as stream:
            final = stream.get_final_response()
        assert [(o.type, o.name, o.arguments) for o in final.output] == [(o.type, o.name, o.arguments) for o in first.output]
        assert len(up.posts) == 1


def test_shadow_mode_serves_nothing_and_reports_would_be_hits(tmp_path):
    with cache_stack(tmp_path, policy(shadow={"mode": "shadow"})) as (up, gw, settings):
        client = oa(gw)
        first, state = chat(client, model="gpt-5.4", temperature=0)
        assert state == "miss"
        again, state = chat(client, model="gpt-5.4", temperature=0)
        assert state == "shadow-hit" and len(up.posts) == 2
        text, state, _ = streamed_chat(client, model="gpt-5.4", temperature=0)
        assert state == "shadow-hit" and len(up.posts) == 3 and text == first.choices[0].message.content
        metrics = openai.DefaultHttpxClient().get(gw.url + "/metrics").text
        wait_until(lambda: len(read_records(settings.ledger_path)) == 3, 10, "three ledger records")
    assert 'prefixgate_response_cache_lookups_total{result="shadow-hit",route="shadow"} 2.0' in metrics
    # Temperature 0: each fresh answer was compared with the stored one (the mock answers deterministically).
    assert 'prefixgate_response_cache_shadow_compared_total{result="matched",route="shadow"} 2.0' in metrics
    records = read_records(settings.ledger_path)
    assert [r["response_cache"] for r in records] == ["miss", "shadow-hit", "shadow-hit"]
    assert all(r["avoided_usd"] is None and float(r["cost_usd"]) > 0 for r in records)
    assert any(line.startswith("response-cache: shadow-hit") for line in records[1]["explanation"])


def test_request_header_skips_reading_writing_or_refreshes(tmp_path):
    with cache_stack(tmp_path, policy(gpt=ON)) as (up, gw, _):
        client = oa(gw)
        control = "x-prefixgate-response-cache-control"
        assert chat(client, extra_headers={control: "skip-write"})[1] == "miss"
        assert chat(client)[1] == "miss" and len(up.posts) == 2        # the first answer was not stored
        assert chat(client, extra_headers={control: "skip-read"})[1] == "bypass" and len(up.posts) == 3
        assert chat(client, extra_headers={control: "refresh"})[1] == "miss" and len(up.posts) == 4
        assert chat(client, extra_headers={control: "skip-write"})[1] == "hit" and len(up.posts) == 4
        # A request the cache cannot replay faithfully (several candidates) bypasses it.
        assert chat(client, n=2)[1] == "bypass"


def test_routes_without_the_cache_say_nothing_and_never_serve(tmp_path):
    with cache_stack(tmp_path, policy()) as (up, gw, _):
        client = oa(gw)
        assert chat(client)[1] is None and chat(client)[1] is None and len(up.posts) == 2


def test_a_replayed_stored_response_keeps_the_id_a_follow_up_names(tmp_path):
    # A Responses answer the upstream stored (store defaults to true) is reached again by its id: a replay, whole
    # or streamed, must name that id, or the caller's next turn (previous_response_id) and retrieve get a 404.
    with cache_stack(tmp_path, policy(gpt=ON)) as (up, gw, _):
        client = oa(gw)
        ask = dict(model="gpt-5.5", input="What does a prefix cache keep?")
        first = client.responses.create(**ask)
        with client.responses.stream(**ask) as stream:
            replayed = stream.get_final_response()
        assert len(up.posts) == 1 and replayed.id == first.id
        follow = client.responses.create(model="gpt-5.5", input="And then?", previous_response_id=replayed.id)
        assert follow.previous_response_id == first.id
        # Streamed first: the whole replay names the streamed answer's id, which the upstream keeps.
        ask = dict(model="gpt-5.5", input="What does a response cache keep?")
        with client.responses.stream(**ask) as stream:
            streamed = stream.get_final_response()
        raw = client.responses.with_raw_response.create(**ask)
        assert raw.headers[CACHE] == "hit" and raw.parse().id == streamed.id
        assert client.responses.retrieve(streamed.id).output_text == streamed.output_text


def test_the_standard_cache_control_request_directives_are_obeyed(tmp_path):
    # RFC 9111 5.2.1: no-store, the answer is never stored (a stored one may still answer); no-cache, no stored
    # answer is served without going to the origin, whose fresh answer may be stored.
    with cache_stack(tmp_path, policy(gpt=ON)) as (up, gw, _):
        client = oa(gw)
        assert chat(client, extra_headers={"Cache-Control": "no-store"})[1] == "miss"
        assert chat(client)[1] == "miss" and len(up.posts) == 2        # the no-store answer was not kept
        assert chat(client, extra_headers={"Cache-Control": "no-store"})[1] == "hit" and len(up.posts) == 2
        assert chat(client, extra_headers={"Cache-Control": "max-age=0, no-cache"})[1] == "miss" and len(up.posts) == 3
        assert chat(client, extra_headers={"Cache-Control": "no-cache, no-store"})[1] == "bypass" and len(up.posts) == 4


def test_a_balanced_routes_answers_are_stored_from_every_target(tmp_path):
    # A balanced route's targets are one pool serving one model (policies/balance.py): the answers of the targets
    # after the first are not fallbacks. Round robin sends the second new prompt to the second target.
    def pool(mock_url: str) -> dict:
        data = policy(gpt=ON)
        data["upstreams"] = {"east": {"kind": "openai", "url": mock_url}, "west": {"kind": "openai", "url": mock_url}}
        data["routes"][1] |= {"balance": "round_robin", "targets": [{"upstream": "east"}, {"upstream": "west"}]}
        return data
    with cache_stack(tmp_path, pool) as (up, gw, _):
        client = oa(gw)
        targets = []
        for question in ("What does a prefix cache keep?", "What does a response cache keep?"):
            ask = [{"role": "user", "content": question}]
            raw = client.chat.completions.with_raw_response.create(model="gpt-5.5", messages=ask)
            targets.append(raw.headers["x-prefixgate-target"])
            again = client.chat.completions.with_raw_response.create(model="gpt-5.5", messages=ask)
            assert again.headers[CACHE] == "hit", question
        assert sorted(targets) == ["east", "west"] and len(up.posts) == 2


def test_a_stream_the_client_hung_up_on_is_never_stored(tmp_path):
    # The caller leaves after the first event; the answer it never saw whole is not the route's to replay.
    faults = FaultPlan([FaultRule(parse_fault("event_delay=0.2"), model="gpt-5.5")])
    with cache_stack(tmp_path, policy(gpt=ON), faults=faults) as (up, gw, settings):
        body = {"model": "gpt-5.5", "messages": ASK, "stream": True}
        auth = {"authorization": f"Bearer {KEYS['ACME_KEY']}"}
        with httpx.stream("POST", gw.url + "/v1/chat/completions", json=body, headers=auth) as resp:
            assert resp.headers[CACHE] == "miss"
            next(resp.iter_lines())
        wait_until(lambda: len(read_records(settings.ledger_path)) == 1, 10, "the hung-up request's record")
        assert read_records(settings.ledger_path)[0]["status"] == 499
        assert chat(oa(gw))[1] == "miss" and len(up.posts) == 2


def test_an_answer_stopped_at_a_stop_sequence_is_never_replayed_to_its_own_format(tmp_path):
    # Anthropic says which stop sequence ended an answer (stop_reason "stop_sequence", stop_sequence the string); a
    # ReAct loop reads it to run the tool. A streamed replay (its writer reads the neutral "stop") said end_turn.
    said = "Thought: I should look the order up.\nAction: lookup[1042]\n"
    whole = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-5-5",
             "content": [{"type": "text", "text": said}], "stop_reason": "stop_sequence", "stop_sequence": "Observation:",
             "usage": {"input_tokens": 40, "output_tokens": 14}}
    events = [("message_start", {"message": {**whole, "content": [], "stop_reason": None, "stop_sequence": None,
                                              "usage": {"input_tokens": 40, "output_tokens": 1}}}),
              ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
              ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": said}}),
              ("content_block_stop", {"index": 0}),
              ("message_delta", {"delta": {"stop_reason": "stop_sequence", "stop_sequence": "Observation:"},
                                 "usage": {"output_tokens": 14}}),
              ("message_stop", {})]

    async def messages(request: Request) -> Response:
        if (await request.json()).get("stream"):
            sse = "".join(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n" for kind, data in events)
            return Response(sse, media_type="text/event-stream")
        return JSONResponse(whole)

    stopping = Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])
    with ServerThread(stopping) as react, cache_stack(tmp_path, lambda _: {
            **policy(), "upstreams": {"react": {"kind": "anthropic", "url": react.url}},
            "routes": [{"name": "react", "models": ["claude-*"], "targets": [{"upstream": "react"}], "response_cache": ON}]
    }) as (_, gw, _settings):
        client = anthropic.Anthropic(api_key=KEYS["ACME_KEY"], base_url=gw.url, max_retries=0)
        ask = {"model": "claude-sonnet-5-5", "max_tokens": 200, "stop_sequences": ["Observation:"],
               "messages": [{"role": "user", "content": "Where is order 1042?"}]}
        assert client.messages.create(**ask).stop_reason == "stop_sequence"
        with client.messages.stream(**ask) as stream:
            final = stream.get_final_message()
        assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", "Observation:")


def test_a_hit_for_a_retiring_model_carries_the_warning_a_miss_does(tmp_path):
    # claude-sonnet-4-5 retires on 2026-11-30, replacement claude-sonnet-5-5 (Anthropic's Sonnet 4.5 overview):
    # the lifecycle header (docs/providers.md) is how a caller hears of it, on every answer, served from the cache too.
    with cache_stack(tmp_path, policy(claude=ON)) as (up, gw, _):
        client = anthropic.Anthropic(api_key=KEYS["ACME_KEY"], base_url=gw.url, max_retries=0)
        ask = {"model": "claude-sonnet-4-5", "max_tokens": 200, "messages": [{"role": "user", "content": "Hi"}]}
        miss = client.messages.with_raw_response.create(**ask)
        hit = client.messages.with_raw_response.create(**ask)
        assert (miss.headers[CACHE], hit.headers[CACHE]) == ("miss", "hit") and len(up.posts) == 1
        warned = "2026-11-30; replacement=claude-sonnet-5-5"
        assert miss.headers["x-prefixgate-model-retires"] == hit.headers["x-prefixgate-model-retires"] == warned


def test_a_gemini_3_call_is_never_replayed_without_its_thought_signature(tmp_path):
    # Gemini 3 signs its function calls (thoughtSignature on the part) and answers a 400 to a next turn that sends a
    # call back without it (ai.google.dev/gemini-api/docs/thought-signatures). A streamed replay, written from the
    # neutral call, had no signature, so the agent's next turn failed.
    with cache_stack(tmp_path, policy(gemini={"mode": "on", "tool_calls": True})) as (up, gw, _):
        client = genai.Client(api_key=KEYS["ACME_KEY"], http_options={"base_url": gw.url, "api_version": "v1beta"})
        lookup = types.Tool(function_declarations=[types.FunctionDeclaration(
            name="lookup", description="Look an order up", parameters={"type": "object", "properties": {"id": {"type": "string"}}})])
        config = types.GenerateContentConfig(
            tools=[lookup], tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(mode="ANY")),
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
        ask = [types.Content(role="user", parts=[types.Part(text="Where is order 7?")])]

        def next_turn(call: types.Part) -> str | None:
            result = types.Part(function_response=types.FunctionResponse(name="lookup", response={"status": "shipped"}))
            return client.models.generate_content(model="gemini-3.8-flash", config=types.GenerateContentConfig(tools=[lookup]),
                                                  contents=[*ask, types.Content(role="model", parts=[call]),
                                                            types.Content(role="user", parts=[result])]).text

        first = client.models.generate_content(model="gemini-3.8-flash", contents=ask, config=config)
        assert first.candidates[0].content.parts[0].thought_signature and len(up.posts) == 1
        chunks = list(client.models.generate_content_stream(model="gemini-3.8-flash", contents=ask, config=config))
        streamed = next(p for c in chunks for p in c.candidates[0].content.parts if p.function_call)
        assert streamed.thought_signature and len(up.posts) == 2        # not served from the cache
        assert next_turn(streamed)
        # A whole request is still served the exact body stored, signature and all.
        again = client.models.generate_content(model="gemini-3.8-flash", contents=ask, config=config)
        assert len(up.posts) == 3 and again.candidates[0].content.parts[0].thought_signature == \
            first.candidates[0].content.parts[0].thought_signature
        assert next_turn(again.candidates[0].content.parts[0]) and len(up.posts) == 4


def test_claudes_signed_thinking_before_a_tool_call_is_never_replayed_away(tmp_path):
    # With extended thinking, the assistant turn that calls a tool must go back with its thinking block (signature
    # and all) beside the tool result, or Claude answers a 400 (Anthropic's extended thinking guide, tool use). A
    # streamed replay, written from the neutral call, had only the tool_use.
    msg = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-5-5", "content": [],
           "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 40, "output_tokens": 1}}
    events = [("message_start", {"message": msg}),
              ("content_block_start", {"index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
              ("content_block_delta", {"index": 0, "delta": {"type": "thinking_delta", "thinking": "Look the order up."}}),
              ("content_block_delta", {"index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9G"}}),
              ("content_block_stop", {"index": 0}),
              ("content_block_start", {"index": 1, "content_block": {"type": "tool_use", "id": "toolu_01", "name": "lookup",
                                                                     "input": {}}}),
              ("content_block_delta", {"index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"id": "7"}'}}),
              ("content_block_stop", {"index": 1}),
              ("message_delta", {"delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 30}}),
              ("message_stop", {})]
    posts = []

    async def messages(request: Request) -> Response:
        posts.append(request.url.path)
        return Response("".join(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n" for kind, data in events),
                        media_type="text/event-stream")

    thinker = Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])
    with ServerThread(thinker) as up, cache_stack(tmp_path, lambda _: {
            **policy(), "upstreams": {"thinker": {"kind": "anthropic", "url": up.url}},
            "routes": [{"name": "agent", "models": ["claude-*"], "targets": [{"upstream": "thinker"}],
                        "response_cache": {"mode": "on", "tool_calls": True}}]}) as (_, gw, _settings):
        client = anthropic.Anthropic(api_key=KEYS["ACME_KEY"], base_url=gw.url, max_retries=0)
        ask = {"model": "claude-sonnet-5-5", "max_tokens": 2000, "thinking": {"type": "enabled", "budget_tokens": 1024},
               "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
               "messages": [{"role": "user", "content": "Where is order 7?"}]}
        for turn in (1, 2):
            with client.messages.stream(**ask) as stream:
                final = stream.get_final_message()
            assert [b.type for b in final.content] == ["thinking", "tool_use"] and len(posts) == turn
