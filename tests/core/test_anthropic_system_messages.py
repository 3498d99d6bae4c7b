"""Anthropic `system` messages inside `messages` (Opus 4.8+; Claude Code 2.1 sends one): accepted, kept in
place on the way back, and not mistaken for the top-level system prompt."""

from __future__ import annotations

from prefixgate.dialects import anthropic as an


def test_a_system_message_round_trips_in_place():
    body = {"model": "claude-opus-4-8", "max_tokens": 10, "system": "Top-level instructions.",
            "messages": [{"role": "user", "content": "hi"},
                         {"role": "system", "content": "Available agent types: claude, Explore."}]}
    conv = an.parse_request(body)
    assert [s.role for s in conv.segments] == ["system", "user", "system"]
    assert an.encode_request(conv) == body
    conv.segments[-1].blocks[0].set_text("Available agent types: claude.")
    out = an.encode_request(conv)
    assert out["system"] == "Top-level instructions." and out["messages"][1]["role"] == "system"
    assert out["messages"][1]["content"] == "Available agent types: claude."
