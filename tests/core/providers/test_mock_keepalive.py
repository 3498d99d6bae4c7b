"""The refreshes `cache_planner.keepalive` builds, sent by the real SDKs to mock-providers: accepted, and they
read the cached prefix (a hit restarts the TTL) without writing it again."""

from __future__ import annotations

import uuid

import anthropic
import openai
import pytest

from prefixgate.cache_planner.keepalive import refresh_body
from tests.core.providers.support_prompts import text_of

pytestmark = pytest.mark.slow
SYSTEM = text_of(2000)


def key() -> str:
    return "sk-test-" + uuid.uuid4().hex  # a fresh workspace: a cold cache


def test_claude_prewarm_refresh_reads_the_prefix_and_answers_nothing(mock_server):
    url, _ = mock_server
    claude = anthropic.Anthropic(api_key=key(), base_url=url, max_retries=0)
    body = {"model": "claude-sonnet-4-6", "max_tokens": 40,
            "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "Why?"}]}
    assert claude.messages.create(**body).usage.cache_creation_input_tokens == 2000
    refresh = refresh_body("anthropic", body)
    answer = claude.messages.create(**refresh.body)
    # A max_tokens: 0 pre-warm returns no content, stopping at max_tokens (A2).
    assert answer.content == [] and answer.stop_reason == "max_tokens"
    assert answer.usage.cache_read_input_tokens == 2000 and answer.usage.cache_creation_input_tokens == 0


def test_openai_chat_refresh_is_accepted_and_reads_the_prefix(mock_server):
    url, _ = mock_server
    client = openai.OpenAI(api_key=key(), base_url=url + "/v1", max_retries=0)
    body = {"model": "gpt-5.4", "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Why?"}]}
    client.chat.completions.create(**body)
    answer = client.chat.completions.create(**refresh_body("openai", body).body)
    assert answer.usage.completion_tokens <= 1
    assert answer.usage.prompt_tokens_details.cached_tokens >= 1024
