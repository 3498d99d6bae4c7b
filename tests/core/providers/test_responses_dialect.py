"""The Responses wire format <-> IR (byte-faithful, reasoning items untouched), its bad-input errors, and
Responses bodies in the simulator, `prefixgate replay` and the planner's trace reader."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from prefixgate.cache_planner.trace import plan_trace
from prefixgate.cli import main
from prefixgate.dialects import request_dialect
from prefixgate.dialects import responses as rs
from prefixgate.errors import RequestError
from prefixgate.providers.trace import parse_record
from prefixgate.simulation.replay import planner, replay
from prefixgate.simulation.simulator import Simulator
from tests.core.providers.support_prompts import text_of

STATIC = text_of(1500)
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "why"}],
             "encrypted_content": "gAAAAB\u00e9/+==\n"}
CHAIN = [
    {"role": "user", "content": "hi"},
    REASONING,
    {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": "{\"a\": 1}"},
    {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done", "annotations": []}]},
    {"role": "user", "content": [{"type": "input_text", "text": "more"}, {"type": "input_image", "image_url": "data:,"}]},
    {"type": "item_reference", "id": "msg_9"},
]


@pytest.mark.parametrize("body", [
    {"model": "gpt-5.4", "input": "hello"},
    {"model": "gpt-5.4", "instructions": "Be brief.", "input": CHAIN, "store": False, "include": ["reasoning.encrypted_content"]},
    {"input": CHAIN, "tools": [{"type": "function", "name": "f", "parameters": {}}, {"type": "web_search"}],
     "model": "gpt-5.4-mini", "prompt_cache_key": "k", "stream": True},
    {"model": "gpt-5.4", "previous_response_id": "resp_1", "input": []},
])
def test_unannotated_round_trip_is_byte_faithful(body):
    conv = rs.parse_request(json.dumps(body))
    assert json.dumps(rs.encode_request(conv)) == json.dumps(body)


def test_reasoning_and_call_items_are_single_untouched_blocks():
    conv = rs.parse_request({"model": "gpt-5.4", "input": CHAIN})
    kinds = [(s.role, s.blocks[0].kind) for s in conv.segments]
    assert kinds[1:4] == [("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result")]
    assert conv.segments[1].blocks[0].native is REASONING


@pytest.mark.parametrize(("body", "param"), [
    ({"input": "x"}, "model"),
    ({"model": "m", "input": {"role": "user"}}, "input"),
    ({"model": "m", "input": ["text"]}, "input.0"),
    ({"model": "m", "input": [{"content": "x"}]}, "input.0.type"),
    ({"model": "m", "input": [{"type": "message", "role": "tool", "content": "x"}]}, "input.0.role"),
    ({"model": "m", "input": [{"type": "function_call_output", "output": "x"}]}, "input.0.call_id"),
    ({"model": "m", "input": [{"role": "user", "content": None}]}, "input.0.content"),
    ({"model": "m", "instructions": ["x"], "input": "x"}, "instructions"),
    ({"model": "m", "input": "x", "tools": [{"name": "f"}]}, "tools.0.type"),
    ({"model": "m", "input": "x", "previous_response_id": 3}, "previous_response_id"),
    ({"model": "m", "input": "x", "max_output_tokens": 4}, "max_output_tokens"),
])
def test_bad_input_names_the_field(body, param):
    with pytest.raises(RequestError) as err:
        rs.parse_request(body)
    assert err.value.field == param and err.value.status == 400


def test_body_shape_tells_chat_from_responses():
    assert request_dialect("openai", {"model": "m", "input": "x"}).name == "responses"
    assert request_dialect("openai", {"model": "m", "messages": []}).name == "openai"
    assert request_dialect("anthropic", {"model": "m", "input": "x"}).name == "anthropic"


def test_simulator_caches_responses_in_128_token_steps_with_retention():
    sim = Simulator(entry_visible_after_s=0.0)
    body = {"model": "gpt-5.4", "instructions": STATIC, "input": "q", "prompt_cache_retention": "24h"}
    assert sim.respond("openai", body, now=0).usage.cache_read == 0
    # An in_memory entry would be gone after an idle hour; a 24h one is still there.
    again = sim.respond("openai", {**body, "input": "other"}, now=3600).usage
    assert again.cache_read >= 1024 and again.cache_read % 128 == 0
    brief = {**body, "prompt_cache_retention": "in_memory"}
    sim.respond("openai", brief, now=0, tenant="other")
    assert sim.respond("openai", {**brief, "input": "x"}, now=60, tenant="other").usage.cache_read > 0
    assert sim.respond("openai", {**brief, "input": "y"}, now=60 + 7200, tenant="other").usage.cache_read == 0


def _trace(tmp_path):
    lines = [{"t": i * 30, "provider": "openai", "model": "gpt-5.4", "route": "agent", "output_tokens": 20,
              "body": {"model": "gpt-5.4", "instructions": f"Request id {i:08x}-{i * 7919:04x}.\n" + STATIC,
                       "input": [{"role": "user", "content": f"question {i}"}]}} for i in range(6)]
    path = tmp_path / "responses.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path, lines


def test_replay_and_planner_accept_responses_bodies(tmp_path):
    path, lines = _trace(tmp_path)
    records = [parse_record(json.dumps(line), n + 1) for n, line in enumerate(lines)]
    sent = replay(records).total
    planned = replay(records, planner(), strategy_name="planner").total
    assert sent.errors == planned.errors == 0
    # The id leads the instructions, so as sent nothing is ever cached; the planner moves it out.
    assert sent.usage.cache_read == 0 and planned.usage.cache_read >= 5 * 1024
    assert planned.cost.total < sent.cost.total
    out = list(plan_trace(records))
    assert out[-1]["body"]["prompt_cache_key"].startswith("pg-")
    assert "Request id" in out[-1]["body"]["input"][0]["content"][0]["text"]
    assert "Request id" not in out[-1]["body"]["instructions"]
    result = CliRunner().invoke(main, ["replay", str(path), "--strategy", "planner", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["total"]["requests"] == 6
