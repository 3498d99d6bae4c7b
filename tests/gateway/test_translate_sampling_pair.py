"""Claude Opus 4.1 to the 4.6 models answer `temperature` and `top_p` together with a 400 "`temperature` and `top_p`
cannot both be specified for this model. Please use only one." (on Anthropic's API and Bedrock's: see
prefixgate/dialects/sampling.py); OpenAI and Gemini take both. Translated, such a request keeps the caller's
temperature and leaves top_p out, with a note, instead of failing on a pair the caller's own API accepts."""

from __future__ import annotations

import pytest

from prefixgate.dialects import wire_format
from prefixgate.dialects.translate import translate_body

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.3, "top_p": 0.9}
GEMINI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": {"temperature": 0.3, "topP": 0.9}}


@pytest.mark.parametrize("source,body,target,model,config", [
    ("openai", CHAT, "anthropic", "claude-haiku-4-5", None),
    ("openai", CHAT, "anthropic", "claude-sonnet-4-5-20250929", None),
    ("openai", CHAT, "bedrock_converse", "us.anthropic.claude-sonnet-4-6", "inferenceConfig"),
    ("gemini", GEMINI, "vertex_anthropic", "claude-opus-4-1@20250805", None),
])
def test_a_claude_that_takes_one_of_the_two_gets_the_temperature(source, body, target, model, config):
    out, notes = translate_body(body, wire_format(source), wire_format(target), model)
    sent = out[config] if config else out
    assert sent["temperature"] == 0.3
    assert not {"top_p", "topP"} & set(sent)
    assert any("not both" in n for n in notes), notes


def test_one_of_the_two_alone_is_kept():
    out, notes = translate_body({**CHAT, "temperature": None}, wire_format("openai"), wire_format("anthropic"),
                                "claude-haiku-4-5")
    assert out["top_p"] == 0.9 and "temperature" not in out
    assert not any("not both" in n for n in notes)
