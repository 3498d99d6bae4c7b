"""mock-providers refuses the request fields the hosted APIs refuse, in their words, so that a gateway that sends
one (a caller's leftover, a translation's) fails here as it would in production. Sources are in the docstrings
of prefixgate/simulation/mock/{anthropic,openai,gemini}_params.py."""

from __future__ import annotations

import uuid
from datetime import date

import anthropic
import boto3
import botocore.exceptions
import httpx
import openai
import pytest
from botocore.config import Config
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

HI = [{"role": "user", "content": "hi"}]


def key() -> str:
    return "sk-fields-" + uuid.uuid4().hex


@pytest.fixture
def claude(mock_server):
    """The 2.x SDK, which sends `anthropic-version: 2026-10-21`."""
    return anthropic.Anthropic(api_key=key(), base_url=mock_server[0], max_retries=0)


@pytest.fixture
def claude_2023(mock_server):
    return anthropic.Anthropic(api_key=key(), base_url=mock_server[0], max_retries=0,
                               default_headers={"anthropic-version": "2023-06-01"})


def _refused(call, message: str) -> None:
    with pytest.raises(anthropic.BadRequestError) as e:
        call()
    assert e.value.status_code == 400
    assert e.value.body["error"] == {"type": "invalid_request_error", "message": message}


def test_anthropic_refuses_an_unknown_top_level_field(claude_2023):
    _refused(lambda: claude_2023.messages.create(model="claude-haiku-4-5", max_tokens=5, messages=HI,
                                                 extra_body={"frequency_penalty": 0.5}),
             "frequency_penalty: Extra inputs are not permitted")


def test_anthropic_2026_10_21_has_no_sampling_parameters_even_at_their_defaults(claude):
    _refused(lambda: claude.messages.create(model="claude-haiku-4-5", max_tokens=5, messages=HI,
                                            extra_body={"temperature": 1.0}),
             "temperature: Extra inputs are not permitted")


def test_anthropic_2023_06_01_takes_temperature_from_0_to_1(claude_2023):
    ok = claude_2023.messages.create(model="claude-haiku-4-5", max_tokens=5, messages=HI, extra_body={"temperature": 0.3})
    assert ok.stop_reason in ("end_turn", "max_tokens")
    _refused(lambda: claude_2023.messages.create(model="claude-haiku-4-5", max_tokens=5, messages=HI,
                                                 extra_body={"temperature": 1.5}),
             "temperature: range: 0..1")


@pytest.mark.parametrize("model", ["claude-sonnet-5-5", "claude-opus-4-7"])
def test_newer_claude_models_refuse_a_non_default_temperature(claude_2023, model):
    _refused(lambda: claude_2023.messages.create(model=model, max_tokens=5, messages=HI, extra_body={"temperature": 0.2}),
             "`temperature` is deprecated for this model.")
    ok = claude_2023.messages.create(model=model, max_tokens=5, messages=HI, extra_body={"temperature": 1})
    assert ok.model == model


@pytest.mark.parametrize("model", ["claude-haiku-4-5", "claude-sonnet-4-5", "claude-sonnet-4-6", "claude-opus-4-1",
                                   "claude-opus-4-6"])
def test_claude_4_1_to_4_6_refuse_temperature_and_top_p_together(claude_2023, mock_server, monkeypatch, model):
    monkeypatch.setattr(mock_server[1], "today", date(2026, 8, 4))    # the Claude API served Opus 4.1 until 2026-08-05
    _refused(lambda: claude_2023.messages.create(model=model, max_tokens=5, messages=HI,
                                                 extra_body={"temperature": 0.2, "top_p": 0.9}),
             "`temperature` and `top_p` cannot both be specified for this model. Please use only one.")
    assert claude_2023.messages.create(model=model, max_tokens=5, messages=HI, extra_body={"top_p": 0.9}).model == model


def test_claude_sonnet_4_takes_temperature_and_top_p_together(claude_2023, mock_server, monkeypatch):
    monkeypatch.setattr(mock_server[1], "today", date(2026, 6, 14))   # retired on the Claude API 2026-06-15
    ok = claude_2023.messages.create(model="claude-sonnet-4", max_tokens=5, messages=HI,
                                     extra_body={"temperature": 0.2, "top_p": 0.9})
    assert ok.stop_reason in ("end_turn", "max_tokens")


def test_chat_completions_refuses_an_unrecognized_argument(mock_server):
    client = openai.OpenAI(api_key=key(), base_url=mock_server[0] + "/v1", max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="gpt-5.4", messages=HI, extra_body={"top_k": 3})
    assert e.value.body == {"message": "Unrecognized request argument supplied: top_k", "type": "invalid_request_error",
                            "param": None, "code": None}


def test_chat_completions_temperature_is_at_most_2(mock_server):
    client = openai.OpenAI(api_key=key(), base_url=mock_server[0] + "/v1", max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="gpt-5.4", messages=HI, temperature=2.1)
    assert e.value.body["message"] == ("Invalid 'temperature': decimal above maximum value. Expected a value <= 2, "
                                       "but got 2.1 instead.")
    assert e.value.body["param"] == "temperature"
    assert client.chat.completions.create(model="gpt-5.4", messages=HI, temperature=2).choices


def test_generate_content_refuses_an_unknown_field(mock_server):
    client = genai.Client(api_key=key(), http_options=types.HttpOptions(base_url=mock_server[0], api_version="v1beta"))
    config = types.GenerateContentConfig(http_options=types.HttpOptions(extra_body={"frequency_penalty": 0.5}))
    with pytest.raises(genai_errors.ClientError) as e:
        client.models.generate_content(model="gemini-3.5-flash", contents="hi", config=config)
    assert e.value.code == 400 and e.value.status == "INVALID_ARGUMENT"
    assert e.value.message == 'Invalid JSON payload received. Unknown name "frequency_penalty": Cannot find field.'
    # snake_case proto names are accepted as well as lowerCamelCase ones
    config = types.GenerateContentConfig(http_options=types.HttpOptions(
        extra_body={"generation_config": {"max_output_tokens": 96}}))
    assert client.models.generate_content(model="gemini-3.5-flash", contents="hi", config=config).text


@pytest.fixture
def runtime(mock_server, monkeypatch):
    """boto3's Bedrock Runtime, signing with the credentials the mock checks."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFIELDS")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fields/secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")      # the mock's region: the client's signature is scoped to it
    return boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=mock_server[0],
                        aws_access_key_id="AKIDFIELDS", aws_secret_access_key="fields/secret",
                        config=Config(retries={"max_attempts": 1}))


@pytest.mark.parametrize("model,refused", [("us.anthropic.claude-opus-4-7", True), ("us.anthropic.claude-opus-4-6", False)])
def test_bedrock_converse_refuses_temperature_on_claude_4_7_and_later(runtime, model, refused):
    args = {"modelId": model, "messages": [{"role": "user", "content": [{"text": "hi"}]}],
            "inferenceConfig": {"maxTokens": 5, "temperature": 0.2}}
    if not refused:
        assert runtime.converse(**args)["stopReason"] in ("end_turn", "max_tokens")
        return
    with pytest.raises(botocore.exceptions.ClientError) as e:
        runtime.converse(**args)
    assert e.value.response["Error"]["Code"] == "ValidationException"
    assert e.value.response["Error"]["Message"] == ("The model returned the following errors: temperature is "
                                                    "deprecated for this model.")


def test_bedrock_converse_refuses_temperature_and_top_p_together_on_sonnet_4_6(runtime):
    with pytest.raises(botocore.exceptions.ClientError) as e:
        runtime.converse(modelId="us.anthropic.claude-sonnet-4-6", messages=[{"role": "user", "content": [{"text": "hi"}]}],
                         inferenceConfig={"maxTokens": 5, "temperature": 0.2, "topP": 0.9})
    assert e.value.response["Error"]["Message"] == (
        "The model returned the following errors: `temperature` and `top_p` cannot both be specified for this model. "
        "Please use only one.")


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_prompt_cache_key_is_at_most_64_characters(mock_server, api):
    client = openai.OpenAI(api_key=key(), base_url=mock_server[0] + "/v1", max_retries=0)

    def send(cache_key: str):
        if api == "chat":
            return client.chat.completions.create(model="gpt-5.4", messages=HI, prompt_cache_key=cache_key)
        return client.responses.create(model="gpt-5.4", input="hi", prompt_cache_key=cache_key)

    assert send("k" * 64)
    with pytest.raises(openai.BadRequestError) as e:
        send("k" * 72)
    assert e.value.body["message"] == ("Invalid 'prompt_cache_key': string too long. Expected a string with maximum "
                                       "length 64, but got a string with length 72 instead.")
    assert e.value.body["param"] == "prompt_cache_key"


def test_generate_content_refuses_a_turn_without_parts(mock_server):
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": []},
                         {"role": "user", "parts": [{"text": "again"}]}]}
    r = httpx.post(mock_server[0] + "/v1beta/models/gemini-3.5-flash:generateContent", json=body,
                   headers={"x-goog-api-key": key()})
    assert r.status_code == 400
    assert r.json()["error"] == {"code": 400, "status": "INVALID_ARGUMENT", "message":
                                 "* GenerateContentRequest.contents[1].parts: contents.parts must not be empty.\n"}


def test_count_tokens_takes_no_max_tokens(claude):
    counted = claude.messages.count_tokens(model="claude-haiku-4-5", messages=HI)
    assert counted.input_tokens > 0
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.count_tokens(model="claude-haiku-4-5", messages=HI, extra_body={"max_tokens": 10})
    assert e.value.body["error"] == {"type": "invalid_request_error",
                                     "message": "max_tokens: Extra inputs are not permitted"}


def test_anthropic_refuses_empty_content_before_the_final_turn(claude_2023):
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}, {"role": "user", "content": "x"}]
    _refused(lambda: claude_2023.messages.create(model="claude-haiku-4-5", max_tokens=5, messages=turns),
             "messages.1: all messages must have non-empty content except for the optional final assistant message")
    blocks = [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": ""}]}]
    _refused(lambda: claude_2023.messages.create(model="claude-haiku-4-5", max_tokens=5, messages=blocks),
             "messages: text content blocks must be non-empty")


def test_bedrock_converse_refuses_a_blank_text_block(runtime):
    messages = [{"role": "user", "content": [{"text": "hi"}]}, {"role": "assistant", "content": [{"text": ""}]},
                {"role": "user", "content": [{"text": "again"}]}]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        runtime.converse(modelId="us.anthropic.claude-haiku-4-5", messages=messages, inferenceConfig={"maxTokens": 5})
    assert e.value.response["Error"]["Code"] == "ValidationException"
    assert e.value.response["Error"]["Message"] == ("The text field in the ContentBlock object at messages.1.content.0 "
                                                    "is blank. Add text to the text field, and try again.")


def test_a_beta_field_needs_an_anthropic_beta_header(claude_2023):
    edits = {"context_management": {"edits": []}}
    _refused(lambda: claude_2023.messages.create(model="claude-haiku-4-5", max_tokens=5, messages=HI, extra_body=edits),
             "context_management: Extra inputs are not permitted")
    ok = claude_2023.messages.create(model="claude-haiku-4-5", max_tokens=5, messages=HI, extra_body=edits,
                                     extra_headers={"anthropic-beta": "context-management-2025-06-27"})
    assert ok.model == "claude-haiku-4-5"


def test_responses_refuses_an_unknown_parameter_in_its_own_words(mock_server):
    client = openai.OpenAI(api_key=key(), base_url=mock_server[0] + "/v1", max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="gpt-5.4", input="hi", extra_body={"system": "be brief"})
    assert e.value.body == {"message": "Unknown parameter: 'system'.", "type": "invalid_request_error",
                            "param": "system", "code": "unknown_parameter"}
    # Codex CLI's client_metadata is outside the SDK's types, and OpenAI takes it
    ok = client.responses.create(model="gpt-5.4", input="hi", extra_body={"client_metadata": {"session_id": "s"}})
    assert ok.status == "completed"


@pytest.fixture
def gemini(mock_server) -> genai.Client:
    return genai.Client(api_key=key(), http_options=types.HttpOptions(base_url=mock_server[0], api_version="v1beta"))


@pytest.mark.parametrize("config,message", [
    ({"temperature": 2.5}, "Unable to submit request because it has a temperature value of 2.5 but the supported range "
                           "is from 0 (inclusive) to 2.0001 (exclusive). Update the value and try again."),
    ({"top_p": 1.5}, "Unable to submit request because it has a topP value of 1.5 but the supported range is from 0 "
                     "(inclusive) to 1.0001 (exclusive). Update the value and try again."),
    ({"top_k": 100}, "Unable to submit request because it has a topK value of 100 but the supported range is from 1 "
                     "(inclusive) to 65 (exclusive). Update the value and try again."),
    ({"candidate_count": 9}, "Unable to submit request because it has a candidateCount value of 9 but the supported "
                             "range is from 1 (inclusive) to 9 (exclusive). Update the value and try again."),
    ({"max_output_tokens": 100000}, "Unable to submit request because it has a maxOutputTokens value of 100000 but the "
                                    "supported range is from 1 (inclusive) to 65537 (exclusive). Update the value and "
                                    "try again."),
])
def test_generate_content_refuses_a_generation_config_value_out_of_range(gemini, config, message):
    with pytest.raises(genai_errors.ClientError) as e:
        gemini.models.generate_content(model="gemini-3.5-flash", contents="hi",
                                                    config=types.GenerateContentConfig(**config))
    assert (e.value.code, e.value.status, e.value.message) == (400, "INVALID_ARGUMENT", message)


def test_generate_content_takes_the_edges_of_each_range(gemini):
    config = types.GenerateContentConfig(temperature=2, top_p=1, top_k=64, candidate_count=1, max_output_tokens=65536)
    assert gemini.models.generate_content(model="gemini-3.5-flash", contents="hi", config=config).text


# Gemini 2.5 is the subject here: its published thinking-budget ranges, and its lack of thinking_level
@pytest.mark.parametrize("model,thinking,message", [
    ("gemini-2.5-pro", {"thinking_budget": 0}, "Budget 0 is invalid. This model only works in thinking mode."),
    ("gemini-3.1-pro-preview", {"thinking_budget": 0}, "Budget 0 is invalid. This model only works in thinking mode."),
    ("gemini-2.5-pro", {"thinking_budget": 64000},
     "The thinking budget 64000 is invalid. Please choose a value between 128 and 32768."),
    ("gemini-2.5-flash", {"thinking_budget": 32000},
     "The thinking budget 32000 is invalid. Please choose a value between 0 and 24576."),
    ("gemini-2.5-flash", {"thinking_level": "LOW"}, "Thinking level is not supported for this model."),
])
def test_generate_content_refuses_a_thinking_config_the_model_does_not_take(gemini, model, thinking, message):
    config = types.GenerateContentConfig(thinking_config=types.ThinkingConfig(**thinking))
    with pytest.raises(genai_errors.ClientError) as e:
        gemini.models.generate_content(model=model, contents="hi", config=config)
    assert (e.value.code, e.value.message) == (400, message)


# the edges of Gemini 2.5's published budget ranges (the subject, as above)
@pytest.mark.parametrize("model,thinking", [
    ("gemini-2.5-pro", {"thinking_budget": -1}), ("gemini-2.5-pro", {"thinking_budget": 32768}),
    ("gemini-2.5-flash", {"thinking_budget": 0}), ("gemini-3.5-flash", {"thinking_level": "LOW"}),
])
def test_generate_content_takes_a_thinking_config_within_the_models_range(gemini, model, thinking):
    config = types.GenerateContentConfig(thinking_config=types.ThinkingConfig(**thinking))
    assert gemini.models.generate_content(model=model, contents="hi", config=config).text


def test_anthropic_refuses_max_tokens_over_the_models_output_limit(claude_2023):
    # Claude Haiku 4.5 answers at most 64,000 tokens (platform.claude.com/docs/en/models/overview)
    _refused(lambda: claude_2023.messages.create(model="claude-haiku-4-5", max_tokens=100_000, messages=HI, timeout=60),
             "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-haiku-4-5")
    assert claude_2023.messages.create(model="claude-haiku-4-5", max_tokens=64_000, messages=HI, timeout=60).content


def test_responses_temperature_is_at_most_2(mock_server):
    client = openai.OpenAI(api_key=key(), base_url=mock_server[0] + "/v1", max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="gpt-5.4", input="hi", temperature=2.5)
    assert e.value.body == {"message": "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but "
                                       "got 2.5 instead.", "type": "invalid_request_error", "param": "temperature",
                            "code": "decimal_above_max_value"}


def test_input_tokens_takes_no_output_settings(mock_server):
    client = openai.OpenAI(api_key=key(), base_url=mock_server[0] + "/v1", max_retries=0)
    assert client.responses.input_tokens.count(model="gpt-5.4", input="hi").input_tokens > 0
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.input_tokens.count(model="gpt-5.4", input="hi", extra_body={"max_output_tokens": 100})
    assert (e.value.body["message"], e.value.body["code"]) == ("Unknown parameter: 'max_output_tokens'.",
                                                               "unknown_parameter")
