"""Parsing then encoding an unannotated request gives back the same JSON, key order included."""

from __future__ import annotations

import json

from hypothesis import given, settings

from prefixgate.dialects import anthropic as an
from prefixgate.dialects import gemini as ge
from prefixgate.dialects import openai as oa
from prefixgate.ir import Checkpoint
from tests.core.support_strategies import anthropic_body, gemini_body, openai_body

EXAMPLES = settings(max_examples=150, deadline=None)


def same(a: dict, b: dict) -> bool:
    return json.dumps(a) == json.dumps(b)


@EXAMPLES
@given(anthropic_body)
def test_anthropic_round_trip(body):
    assert same(an.encode_request(an.parse_request(json.dumps(body))), body)


@EXAMPLES
@given(openai_body)
def test_openai_round_trip(body):
    assert same(oa.encode_request(oa.parse_request(json.dumps(body).encode())), body)


@EXAMPLES
@given(gemini_body)
def test_gemini_round_trip(body):
    assert same(ge.encode_request(ge.parse_request(body, model="gemini-3.5-flash")), body)


@EXAMPLES
@given(anthropic_body)
def test_anthropic_checkpoints_are_written_and_removed(body):
    conv = an.parse_request(body)
    blocks = conv.blocks()
    for b in blocks:
        b.checkpoint = None
    if blocks:
        blocks[-1].checkpoint = Checkpoint("1h")
    encoded = an.encode_request(conv)
    out = json.dumps(encoded)
    # Markers are counted on blocks, not in the JSON text: a generated text may well read "cache_control".
    assert _markers(encoded) == (1 if blocks else 0)
    # Text is never lost: re-parsing the encoded body sees every block's text again.
    again = an.parse_request(out)
    assert [b.text for b in again.blocks()] == [b.text for b in blocks]


def _markers(encoded: dict) -> int:
    """The blocks (tools, system blocks, messages' content blocks) that carry a `cache_control` key."""
    blocks = list(encoded.get("tools") or [])
    blocks += encoded["system"] if isinstance(encoded.get("system"), list) else []
    for message in encoded.get("messages") or []:
        blocks += message["content"] if isinstance(message.get("content"), list) else []
    return sum(isinstance(b, dict) and "cache_control" in b for b in blocks)


def test_anthropic_string_system_becomes_blocks_when_marked():
    body = {"model": "m", "max_tokens": 1, "system": "Be nice.", "messages": [{"role": "user", "content": "hi"}]}
    conv = an.parse_request(body)
    conv.segments[0].blocks[0].checkpoint = Checkpoint()
    out = an.encode_request(conv)
    assert out["system"] == [{"type": "text", "text": "Be nice.", "cache_control": {"type": "ephemeral"}}]
    assert out["messages"] == body["messages"]


def test_edited_text_is_encoded_in_every_dialect():
    conv = oa.parse_request({"model": "gpt-5.4", "messages": [{"role": "system", "content": "It is 10:00. Be nice."}]})
    conv.segments[0].blocks[0].set_text("Be nice.")
    assert oa.encode_request(conv)["messages"][0]["content"] == "Be nice."
    conv = ge.parse_request({"contents": [{"role": "user", "parts": [{"text": "a"}, {"text": "b"}]}]})
    conv.segments[0].blocks[1].set_text("B")
    assert ge.encode_request(conv)["contents"][0]["parts"] == [{"text": "a"}, {"text": "B"}]


def test_openai_breakpoint_and_cache_key():
    conv = oa.parse_request({"model": "gpt-5.6-sol", "messages": [{"role": "user", "content": [{"type": "text", "text": "doc"}]}]})
    conv.segments[0].blocks[0].checkpoint = Checkpoint("30m")
    conv.cache_params["prompt_cache_key"] = "k1"
    out = oa.encode_request(conv)
    assert out["messages"][0]["content"][0]["prompt_cache_breakpoint"] == {"mode": "explicit"}
    assert out["prompt_cache_key"] == "k1"


def test_prefix_keys_are_chained():
    a = an.parse_request({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]})
    b = an.parse_request({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "z"}, {"role": "assistant", "content": "y"}]})
    ka, kb = a.prefix_keys(), b.prefix_keys()
    assert ka[0] != kb[0] and ka[1] != kb[1]  # same last block, different prefix
    assert a.prefix_keys() == ka
