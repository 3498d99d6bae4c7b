"""Reasoning tokens and failed finishes crossing formats: what the target said, in the caller's own fields."""

from __future__ import annotations

import pytest

from prefixgate.dialects import gemini as ge
from prefixgate.dialects import openai as oa
from prefixgate.dialects import wire_format
from prefixgate.dialects.sse import parse_sse, split_lines
from prefixgate.dialects.translate import translate_reply

# Gemini 2.5 thinking: 40 thought tokens and 10 answer tokens, billed as 50 output tokens.
GEMINI_THINKING = {"candidates": [{"content": {"role": "model", "parts": [{"text": "42"}]}, "finishReason": "STOP"}],
                   "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 10, "thoughtsTokenCount": 40,
                                     "totalTokenCount": 62}}
# OpenAI reasoning model: completion_tokens includes its 30 reasoning tokens.
CHAT_REASONING = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-5.4", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "42"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 45, "total_tokens": 57,
              "completion_tokens_details": {"reasoning_tokens": 30}}}


def test_gemini_thoughts_reach_a_chat_caller_as_reasoning_tokens_inside_completion_tokens():
    usage = translate_reply(GEMINI_THINKING, ge.WIRE, oa.WIRE, "gemini-3.5-flash")["usage"]
    assert usage["completion_tokens"] == 50
    assert usage["completion_tokens_details"]["reasoning_tokens"] == 40
    assert usage["total_tokens"] == 62


def test_gemini_thoughts_reach_responses_and_interactions_callers():
    resp = translate_reply(GEMINI_THINKING, ge.WIRE, wire_format("responses"), "gemini-3.5-flash")["usage"]
    assert (resp["output_tokens"], resp["output_tokens_details"]["reasoning_tokens"]) == (50, 40)
    inter = translate_reply(GEMINI_THINKING, ge.WIRE, wire_format("interactions"), "gemini-3.5-flash")["usage"]
    assert (inter["total_output_tokens"], inter["total_thought_tokens"], inter["total_tokens"]) == (10, 40, 62)


def test_openai_reasoning_reaches_a_gemini_caller_as_thoughts_not_billed_twice():
    meta = translate_reply(CHAT_REASONING, oa.WIRE, ge.WIRE, "gpt-5.4")["usageMetadata"]
    assert (meta["candidatesTokenCount"], meta["thoughtsTokenCount"], meta["totalTokenCount"]) == (15, 30, 57)
    assert oa.usage_from_response(CHAT_REASONING).output == 45


def test_a_responses_reasoning_model_reports_its_reasoning_to_a_chat_caller():
    # GPT-5.4 through the Responses API (a Chat caller routed there): reasoning inside output_tokens.
    body = {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5.4",
            "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "42"}]}],
            "usage": {"input_tokens": 12, "output_tokens": 45, "total_tokens": 57,
                      "output_tokens_details": {"reasoning_tokens": 30}}}
    usage = translate_reply(body, wire_format("responses"), oa.WIRE, "gpt-5.4")["usage"]
    assert (usage["completion_tokens"], usage["completion_tokens_details"]["reasoning_tokens"]) == (45, 30)


def test_streamed_gemini_thoughts_reach_a_chat_callers_usage_chunk():
    stream_usage = ge.WIRE.stream_usage()
    stream_usage.feed(GEMINI_THINKING)
    writer = oa.WIRE.stream_writer("gemini-3.5-flash")
    out = writer.write(ge.WIRE.read_deltas(GEMINI_THINKING)) + writer.finish(stream_usage.usage)
    usage = [e.json()["usage"] for e in parse_sse(split_lines([out])) if e.data != "[DONE]" and e.json().get("usage")]
    assert usage[-1]["completion_tokens_details"]["reasoning_tokens"] == 40


# Gemini's FinishReason and Converse's StopReason values (google-genai types.FinishReason; botocore bedrock-runtime
# StopReason) for answers that failed: none is a whole answer, and none may reach a caller as one.
FAILED_GEMINI = ("MALFORMED_FUNCTION_CALL", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "UNEXPECTED_TOOL_CALL")
FAILED_CONVERSE = ("malformed_model_output", "malformed_tool_use")


@pytest.mark.parametrize("reason", FAILED_GEMINI)
def test_a_failed_gemini_answer_is_not_a_stop_for_chat_or_claude_callers(reason):
    body = {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": reason}],
            "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 0}}
    assert translate_reply(body, ge.WIRE, oa.WIRE, "m")["choices"][0]["finish_reason"] == "content_filter"
    assert translate_reply(body, ge.WIRE, wire_format("anthropic"), "m")["stop_reason"] == "refusal"
    assert ("finish", "content_filter", reason) in ge.WIRE.read_deltas(body)


@pytest.mark.parametrize("reason", ["abort", "error"])
def test_an_aborted_compatible_stream_is_not_a_stop_for_a_claude_caller(reason):
    # vLLM ends a stream its engine aborted with finish_reason "abort" (vllm-project/vllm#57082): the answer was cut.
    chunk = {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}
    writer = wire_format("anthropic").stream_writer("m")
    out = writer.write(oa.WIRE.read_deltas(chunk)) + writer.finish(None)
    stops = [e.json()["delta"]["stop_reason"] for e in parse_sse(split_lines([out])) if e.json()["type"] == "message_delta"]
    assert stops == ["refusal"]


@pytest.mark.parametrize("status", ["cancelled", "budget_exceeded"])
def test_a_cancelled_interaction_is_not_a_stop_for_a_chat_caller(status):
    body = {"id": "int_1", "status": status, "steps": [{"type": "model_output", "content": [{"type": "text", "text": "Par"}]}],
            "usage": {"total_input_tokens": 9, "total_output_tokens": 1}}
    assert translate_reply(body, wire_format("interactions"), oa.WIRE, "m")["choices"][0]["finish_reason"] == "content_filter"


@pytest.mark.parametrize("block", ["SAFETY", "PROHIBITED_CONTENT", "BLOCK_REASON_UNSPECIFIED"])
def test_a_prompt_gemini_blocked_is_not_an_empty_stop_whole_or_streamed(block):
    # Gemini answers a blocked prompt with `promptFeedback.blockReason` and no candidates at all.
    body = {"promptFeedback": {"blockReason": block}, "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9}}
    assert translate_reply(body, ge.WIRE, oa.WIRE, "m")["choices"][0]["finish_reason"] == "content_filter"
    writer = wire_format("anthropic").stream_writer("m")
    out = writer.write(ge.WIRE.read_deltas(body)) + writer.finish(None)
    stops = [e.json()["delta"]["stop_reason"] for e in parse_sse(split_lines([out])) if e.json()["type"] == "message_delta"]
    assert stops == ["refusal"]


@pytest.mark.parametrize("reason", FAILED_CONVERSE)
def test_a_failed_converse_answer_is_not_a_stop_for_chat_or_gemini_callers(reason):
    converse = wire_format("bedrock_converse")
    body = {"output": {"message": {"role": "assistant", "content": [{"text": ""}]}}, "stopReason": reason,
            "usage": {"inputTokens": 9, "outputTokens": 3, "totalTokens": 12}}
    assert translate_reply(body, converse, oa.WIRE, "m")["choices"][0]["finish_reason"] == "content_filter"
    assert translate_reply(body, converse, ge.WIRE, "m")["candidates"][0]["finishReason"] == "SAFETY"
    assert ("finish", "content_filter", reason) in converse.read_deltas({"messageStop": {"stopReason": reason}})
