"""mock-providers' Gemini thinks as Gemini 2.5 and 3.x do: `usageMetadata.thoughtsTokenCount` beside
`candidatesTokenCount`, the total their sum with the prompt (google-genai's `GenerateContentResponseUsageMetadata`:
"totalTokenCount = promptTokenCount + candidatesTokenCount + toolUsePromptTokenCount + thoughtsTokenCount"), none with
a thinkingBudget of 0, and thinking spent from maxOutputTokens: a limit it uses up leaves an empty answer stopped at
MAX_TOKENS (googleapis/python-genai#811, #2062)."""

from __future__ import annotations

import uuid

import pytest
from google import genai
from google.genai import types


@pytest.fixture
def gemini(mock_server) -> genai.Client:
    return genai.Client(api_key="sk-thinking-" + uuid.uuid4().hex,
                        http_options=types.HttpOptions(base_url=mock_server[0], api_version="v1beta"))


@pytest.mark.parametrize("model", ["gemini-2.5-pro", "gemini-3.1-pro-preview", "gemini-3.5-flash"])
def test_a_thinking_model_reports_its_thoughts_apart_from_its_answer(gemini, model):
    usage = gemini.models.generate_content(model=model, contents="Why is the sky blue?").usage_metadata
    assert usage.thoughts_token_count > 0 and usage.candidates_token_count > 0
    assert usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count + usage.thoughts_token_count


def test_streamed_usage_reports_the_thoughts_too(gemini):
    chunks = list(gemini.models.generate_content_stream(model="gemini-3.5-flash", contents="Why is the sky blue?"))
    usage = chunks[-1].usage_metadata
    assert usage.thoughts_token_count > 0
    assert usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count + usage.thoughts_token_count


def test_a_budget_of_zero_thinks_not_at_all(gemini):
    # Gemini 2.5 Flash is the subject: the thinking guide documents budget 0 as "off" for it (0..24576)
    config = types.GenerateContentConfig(thinking_config=types.ThinkingConfig(thinking_budget=0))
    usage = gemini.models.generate_content(model="gemini-2.5-flash", contents="Why?", config=config).usage_metadata
    assert not usage.thoughts_token_count
    assert usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count


def test_thinking_is_spent_from_the_output_limit(gemini):
    config = types.GenerateContentConfig(max_output_tokens=10)
    reply = gemini.models.generate_content(model="gemini-3.5-flash", contents="Why is the sky blue?", config=config)
    assert reply.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    assert not reply.text and reply.usage_metadata.thoughts_token_count == 10
