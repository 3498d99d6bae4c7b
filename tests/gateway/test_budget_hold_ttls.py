"""A prompt's hold is priced at the write its marks' TTLs ask for (gateway/estimate.held_cost on the body as sent).

Claude bills a cache write at its TTL's price: 1.25 times the input price for the default 5 minutes, twice it for an
hour (https://platform.claude.com/docs/en/build-with-claude/prompt-caching). A body whose marks all ask for 5
minutes was held at the hour-long write all the same, as if any of it might be written for an hour: a budget of
requests marked the default way fitted 5/8 as many of them as it pays for."""

from __future__ import annotations

import json
import math
import threading
from decimal import Decimal

import anthropic as anthropic_sdk

from prefixgate.dialects import anthropic, converse
from prefixgate.gateway.estimate import held_cost
from prefixgate.policies.schema import hash_key
from prefixgate.usage import Usage
from tests.gateway.support_gateway import policy_stack
from tests.gateway.test_budget_hold_marks import (
    BYTES_PER_TOKEN,
    INPUT,
    MAX_TOKENS,
    MTOK,
    OUTPUT,
    SONNET,
    WRITE_1H,
    body,
    converse_body,
)
from tests.support_services import wait_until

WRITE_5M = Decimal("2.50")      # Claude Sonnet 5.5's 5-minute cache write, USD per million tokens ($2 input x 1.25)
FIVE, HOUR = {"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}     # the default TTL is 5 minutes


def compact(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def messages_hold(payload: dict) -> tuple[Decimal, int, int]:
    """(the hold, the prompt's tokens by size, the tokens of its last turn's text, which no mark covers)."""
    raw = compact(payload)
    prompt = Usage(uncached_input=math.ceil(len(raw) / BYTES_PER_TOKEN), output=MAX_TOKENS)
    turn = len(compact(payload["messages"][0]["content"][0])) // BYTES_PER_TOKEN
    return held_cost(prompt, SONNET, anthropic.parse_request(raw)), prompt.uncached_input, turn


def with_system_mark(mark: dict) -> dict:
    payload = body(marked=False)
    payload["system"][0]["cache_control"] = mark
    return payload


def test_a_prompt_whose_marks_all_ask_for_five_minutes_is_held_at_the_five_minute_write():
    hold, tokens, turn = messages_hold(with_system_mark(FIVE))
    assert hold == ((tokens - turn) * WRITE_5M + turn * INPUT + MAX_TOKENS * OUTPUT) / MTOK


def test_one_hour_long_mark_holds_the_written_part_at_the_hour_long_write():
    payload = with_system_mark(HOUR)
    payload["messages"][0]["content"].insert(0, {"type": "text", "text": "Shift notes. " * 500, "cache_control": FIVE})
    raw = compact(payload)
    tokens = math.ceil(len(raw) / BYTES_PER_TOKEN)
    turn = len(compact(payload["messages"][0]["content"][1])) // BYTES_PER_TOKEN
    prompt = Usage(uncached_input=tokens, output=MAX_TOKENS)
    assert held_cost(prompt, SONNET, anthropic.parse_request(raw)) == \
        ((tokens - turn) * WRITE_1H + turn * INPUT + MAX_TOKENS * OUTPUT) / MTOK


def test_an_hour_long_mark_nested_in_an_earlier_tool_result_counts_too():
    payload = with_system_mark(FIVE)
    result = {"type": "text", "text": "Dock 4 is free.", "cache_control": HOUR}
    payload["messages"] = [
        {"role": "user", "content": [{"type": "text", "text": "Which dock?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "docks", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": [result]},
                                     {"type": "text", "text": "Today's pallets, one a line. " * 1500,
                                      "cache_control": FIVE}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
        {"role": "user", "content": [{"type": "text", "text": "And tomorrow's? " * 800}]}]
    raw = compact(payload)
    tokens = math.ceil(len(raw) / BYTES_PER_TOKEN)
    tail = (len(compact(payload["messages"][3]["content"][0])) + len(compact(payload["messages"][4]["content"][0]))) \
        // BYTES_PER_TOKEN
    prompt = Usage(uncached_input=tokens, output=MAX_TOKENS)
    assert held_cost(prompt, SONNET, anthropic.parse_request(raw)) == \
        ((tokens - tail) * WRITE_1H + tail * INPUT + MAX_TOKENS * OUTPUT) / MTOK


def test_the_automatic_marker_at_five_minutes_writes_the_whole_prompt_at_the_five_minute_write():
    payload = body(marked=False)
    payload["cache_control"] = FIVE
    hold, tokens, _ = messages_hold(payload)
    assert hold == (tokens * WRITE_5M + MAX_TOKENS * OUTPUT) / MTOK


def test_an_automatic_hour_long_marker_over_five_minute_marks_asks_for_the_hour():
    payload = with_system_mark(FIVE)
    payload["cache_control"] = HOUR
    hold, tokens, _ = messages_hold(payload)
    assert hold == (tokens * WRITE_1H + MAX_TOKENS * OUTPUT) / MTOK


def test_a_converse_cache_point_without_a_ttl_is_held_at_the_five_minute_write():
    payload = converse_body("system")
    payload["system"][1] = {"cachePoint": {"type": "default"}}      # Bedrock's default TTL: 5 minutes
    raw = compact(payload)
    prompt = Usage(uncached_input=math.ceil(len(raw) / BYTES_PER_TOKEN), output=MAX_TOKENS)
    tail = len(compact(payload["messages"][0]["content"][0])) // BYTES_PER_TOKEN
    hold = held_cost(prompt, SONNET, converse.parse_request(raw, model="anthropic.claude-sonnet-5-5"))
    assert hold == ((prompt.uncached_input - tail) * WRITE_5M + tail * INPUT + MAX_TOKENS * OUTPUT) / MTOK


SECRET = "pg-planned-holds-0001"
PLANNED = {"routes": [{"name": "claude", "models": ["claude-*"],
                       "targets": [{"upstream": "anthropic", "model": "claude-sonnet-5-5"}]}],
           "keys": [{"name": "planned", "key_sha256": hash_key(SECRET), "budget": {"usd": 1.0, "period": "total"},
                     "routes": ["claude"]}]}


def test_a_planned_body_s_hold_is_repriced_at_the_write_its_marks_ask_for(tmp_path):
    """Admission holds a prompt the planner has yet to mark at the dearest write (Claude's hour-long one); once the
    planner has marked it, for 5 minutes, the hold is the 5-minute write's."""
    sizes: list[int] = []

    def sized(request) -> None:
        sizes.append(len(request.content))

    with policy_stack(tmp_path, PLANNED) as (up, gw, _):
        limits = gw.server.config.app.state.proxy.limits
        up.fail("hang")     # the request stays out while its hold is read
        caller = anthropic_sdk.Anthropic(base_url=gw.url, api_key=SECRET, max_retries=0, timeout=5,
                                         http_client=anthropic_sdk.DefaultHttpxClient(event_hooks={"request": [sized]}))

        def ask() -> None:
            try:
                caller.messages.create(model="claude-sonnet-5-5", max_tokens=MAX_TOKENS,
                                       system=[{"type": "text", "text": "Warehouse manual. " * 4000}],
                                       messages=[{"role": "user", "content": "Which dock first?"}])
            except anthropic_sdk.APIError:
                pass        # the caller gives up on the hanging upstream
        running = threading.Thread(target=ask)
        running.start()
        wait_until(lambda: len(up.received) == 1, 10, "the request upstream")
        held = dict(limits.reserved)
        sent = up.received[0].body
        running.join(30)
    marks = [b.get("cache_control") for b in sent["system"]] + \
        [b.get("cache_control") for m in sent["messages"] for b in m["content"]]
    assert FIVE in marks and HOUR not in marks, marks        # the planner's marks: all 5 minutes
    tokens = math.ceil(sizes[0] / BYTES_PER_TOKEN)
    expected = (tokens * WRITE_5M + MAX_TOKENS * OUTPUT) / MTOK       # its last mark is on its last block
    assert held == {"spend:planned:all": math.ceil(expected * 10**9)}, (held, expected)
