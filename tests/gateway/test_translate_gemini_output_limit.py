"""A caller's output limit over a Gemini model's own reaches Gemini cut to the model's limit: Gemini refuses a larger
maxOutputTokens with a 400 naming a field the caller never sent, where Claude and OpenAI callers may ask for
128,000 tokens. Every Gemini 2.5 and 3.x model answers at most 65,536 tokens (ai.google.dev/gemini-api/docs/models).
"""

from __future__ import annotations

import anthropic
import pytest

from prefixgate.dialects import wire_format
from prefixgate.dialects.translate import translate_body
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import running_gateway, settings_for
from tests.support_services import ServerThread

HI = [{"role": "user", "content": "Write the whole report."}]


@pytest.mark.parametrize("source,body,target", [
    ("anthropic", {"model": "claude-opus-4-7", "max_tokens": 128_000, "messages": HI}, "gemini"),
    ("openai", {"model": "gpt-5.4", "max_completion_tokens": 100_000, "messages": HI}, "vertex_gemini"),
])
def test_a_limit_over_the_gemini_models_own_is_cut_to_it(source, body, target):
    out, notes = translate_body(body, wire_format(source), wire_format(target), "gemini-3.5-flash")
    assert out["generationConfig"]["maxOutputTokens"] == 65_536
    assert any("maxOutputTokens 65536" in n for n in notes), notes


def test_a_limit_within_the_models_own_is_kept():
    body = {"model": "claude-opus-4-7", "max_tokens": 65_536, "messages": HI}
    out, notes = translate_body(body, wire_format("anthropic"), wire_format("gemini"), "gemini-3.1-pro-preview")
    assert out["generationConfig"]["maxOutputTokens"] == 65_536
    assert not any("output limit" in n for n in notes)


def test_a_claude_caller_asking_128000_tokens_of_gemini_gets_an_answer(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "gk-output-limit-0123456789")
    with ServerThread(mock_app(MockContext()), log_level="critical") as mock, \
            running_gateway(settings_for(mock.url, tmp_path)) as gw:
        claude = anthropic.Anthropic(api_key="pg-output-limit", base_url=gw.url, max_retries=0)
        message = claude.messages.create(model="gemini-3.5-flash", max_tokens=128_000, messages=HI, timeout=60)
        assert message.stop_reason == "end_turn" and message.content[0].text
