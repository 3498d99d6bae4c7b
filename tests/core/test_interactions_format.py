"""The Interactions format beyond the registry's checks: every `input` shape google-genai 3.6.1 sends goes
through the IR and back byte for byte, a planned request stays valid, usage is read as the API reports it,
`output_text` follows the SDK's rule, and what cannot leave Google is refused by name when translated."""

from __future__ import annotations

import pytest

from prefixgate.cache_planner import PlannerState, Target, plan
from prefixgate.dialects import interactions_adapter, request_dialect
from prefixgate.dialects.interactions import encode_request, parse_request, parse_usage
from prefixgate.errors import RequestError
from prefixgate.usage import Usage

WIRE = interactions_adapter.WIRE
TEXT = {"type": "text", "text": "Summarise the policy."}
SIGNED_THOUGHT = {"type": "thought", "signature": "c2lnbmF0dXJlLWJ5dGVz", "summary": [{"type": "text", "text": "hm"}]}
# Bodies as google-genai 3.6.1 sends them (captured from `client.interactions.create`), and the older shapes
# it passes through untouched.
BODIES = {
    "string": {"model": "gemini-3.8-flash", "input": "Hi", "system_instruction": "Be brief."},
    "one block": {"model": "gemini-3.8-flash", "input": TEXT},
    "blocks": {"model": "gemini-3.8-flash", "input": [TEXT, {"type": "image", "uri": "gs://b/x.png",
                                                               "mime_type": "image/png"}]},
    "steps": {"model": "gemini-3.8-flash", "previous_interaction_id": "int_001", "store": True,
              "tools": [{"description": "d", "name": "weather", "parameters": {"type": "object"}, "type": "function"},
                        {"type": "google_search"}],
              "input": [{"content": [{"text": "Weather in Oslo?", "type": "text"}], "type": "user_input"},
                        SIGNED_THOUGHT,
                        {"type": "function_call", "id": "c1", "name": "weather", "arguments": {"city": "Oslo"}},
                        {"call_id": "c1", "result": "ok", "name": "weather", "type": "function_result"},
                        {"type": "model_output", "content": [{"type": "text", "text": "Sunny."}]}],
              "generation_config": {"max_output_tokens": 256, "thinking_level": "low"}},
    "role turns": {"model": "gemini-3.8-flash", "input": [{"role": "user", "content": "Hi"},
                                                          {"role": "model", "content": [TEXT]}]},
    "continuation only": {"model": "gemini-3.8-flash", "previous_interaction_id": "int_001"},
}


@pytest.mark.parametrize("shape", sorted(BODIES))
def test_every_input_shape_encodes_back_to_the_same_body(shape):
    body = BODIES[shape]
    conv = parse_request(body)
    assert encode_request(conv) == body
    # A recorded body with no `contents` is told apart from generateContent's (replay, lint, trace export).
    assert request_dialect("gemini", body) is WIRE


def test_an_agent_call_goes_out_without_a_model_though_routed_by_the_agent_name():
    body = {"agent": "deep-research-pro-preview-12-2025", "input": "Research refunds.", "background": True}
    conv = parse_request(body)
    assert conv.model == body["agent"]
    conv.params["model"] = conv.model        # what the gateway sets for a format that carries its model in the body
    assert encode_request(conv) == body


def test_a_whole_step_is_one_untouched_block():
    conv = parse_request(BODIES["steps"])
    thought = next(b for b in conv.blocks() if b.kind == "thinking")
    assert thought.native is SIGNED_THOUGHT          # the signature goes back byte for byte


@pytest.mark.parametrize(("body", "field"), [
    ({"input": "Hi"}, "model"),
    ({"model": "m"}, "input"),
    ({"model": "m", "input": 3}, "input"),
    ({"model": "m", "input": [{"type": "user_input", "content": "x"}, {"type": "nonsense"}]}, "input.1.type"),
    ({"model": "m", "input": [TEXT, {"type": "user_input"}]}, "input.0"),
    ({"model": "m", "input": [{"type": "image"}]}, "input.0"),
    ({"model": "m", "input": [{"type": "function_call", "name": "f"}]}, "input.0.id"),
    ({"model": "m", "input": "x", "system_instruction": {"parts": []}}, "system_instruction"),
    ({"model": "m", "input": "x", "previous_interaction_id": 7}, "previous_interaction_id"),
])
def test_bad_input_names_its_field(body, field):
    with pytest.raises(RequestError) as err:
        parse_request(body)
    assert err.value.field == field and err.value.status == 400


def test_a_planned_request_moves_volatile_instruction_text_into_the_new_input():
    body = {"model": "gemini-3.8-flash", "previous_interaction_id": "int_001",
            "system_instruction": "You are Ava.\nCurrent time: 2026-11-27T09:00:00Z.\n" + "Refunds within 30 days. " * 50,
            "input": [{"type": "function_result", "call_id": "c1", "result": "ok", "name": "f"}]}
    result = plan(parse_request(body), Target("gemini", "gemini-3.8-flash"), PlannerState(), "rewrite")
    sent = encode_request(result.conversation)
    assert "Current time" not in sent["system_instruction"]
    # Only tool results were new: the moved line goes in a user_input step after them, never a role turn.
    assert sent["input"][0] == body["input"][0]
    assert sent["input"][1]["type"] == "user_input" and "Current time" in sent["input"][1]["content"][0]["text"]
    assert "plan: previous_interaction_id: the earlier turns live at the provider and were not changed" \
        in result.explanation
    assert any("caches implicitly only" in line for line in result.explanation)
    assert result.cache_create is None


def test_usage_counts_cached_inside_input_and_bills_thoughts_and_tool_use():
    # total_input_tokens includes total_cached_tokens; thoughts bill as output, tool-use prompt tokens as input.
    usage = parse_usage({"total_input_tokens": 5120, "total_cached_tokens": 4096, "total_output_tokens": 9,
                         "total_thought_tokens": 60, "total_tool_use_tokens": 30, "total_tokens": 5219})
    assert usage == Usage(uncached_input=1054, cache_read=4096, output=69)


def test_output_text_is_the_last_model_output_after_the_last_user_input():
    body = {"id": "int_2", "status": "completed", "steps": [
        {"type": "user_input", "content": [TEXT]}, {"type": "model_output", "content": [{"type": "text", "text": "old"}]},
        {"type": "user_input", "content": [TEXT]}, SIGNED_THOUGHT,
        {"type": "model_output", "content": [{"type": "text", "text": "Refunds are "}, {"type": "text", "text": "capped."}]}]}
    assert WIRE.read_reply(body).text == "Refunds are capped."


@pytest.mark.parametrize(("body", "field"), [
    (BODIES["steps"], "previous_interaction_id"),
    ({"agent": "deep-research", "input": "x"}, "agent"),
    ({"model": "m", "input": "x", "background": True}, "background"),
    ({"model": "m", "input": "x", "tools": [{"type": "google_search"}]}, "tools.0"),
    ({"model": "m", "input": "x", "response_format": {"type": "json_schema"}}, "response_format"),
])
def test_what_lives_at_google_is_refused_when_translated(body, field):
    with pytest.raises(RequestError) as err:
        WIRE.read_chat(body)
    assert err.value.field == field


def test_a_thought_is_dropped_with_a_note_when_translated():
    body = {"model": "m", "input": [{"type": "user_input", "content": [TEXT]}, SIGNED_THOUGHT,
                                    {"type": "model_output", "content": [{"type": "text", "text": "ok"}]}]}
    chat = WIRE.read_chat(body)
    assert [t.role for t in chat.turns] == ["user", "assistant"]
    assert any("thought step" in note for note in chat.notes)


def test_errors_are_googles_shape_with_a_string_code():
    assert WIRE.error_body(RequestError("Interaction 'x' not found.", status=404, kind="not_found")) == {
        "error": {"code": "not_found", "message": "Interaction 'x' not found."}}
