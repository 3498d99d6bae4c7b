"""What OpenAI's Chat Completions and Responses APIs accept at the top of a body.

- An unknown top-level field is a 400 `Unrecognized request argument supplied: <field>` (invalid_request_error,
  param null; reported against api.openai.com in e.g. coroot/coroot#698, xlinx/sd-webui-decadetw-auto-prompt-llm#29).
  The known fields are openai-python 3.57.0's `CompletionCreateParams` plus `stream`.
- `prompt_cache_key` (Chat and Responses) is at most 64 characters: "Invalid 'prompt_cache_key': string too long.
  Expected a string with maximum length 64, but got a string with length 72 instead." (param `prompt_cache_key`,
  code `string_above_max_length`; theopenco/llmgateway#3110, earendil-works/pi#4719).
- The Responses API words an unknown top-level field differently: a 400 `Unknown parameter: '<field>'.` with param
  `<field>` and code `unknown_parameter` (as api.openai.com answers `system` on /v1/responses). Its known fields
  are openai-python 3.57.0's `ResponseCreateParamsBase` plus `stream`, and Codex CLI's `client_metadata` (outside
  the SDK's types, but sent by Codex on every request to api.openai.com with an API key: openai/codex#16912,
  #27122).
- `temperature` ranges 0..2 (Chat and Responses): "Invalid 'temperature': decimal above maximum value. Expected a
  value <= 2, but got 2.1 instead." (param `temperature`, code `decimal_above_max_value`).
- A value of the wrong JSON type is a 400 `Invalid type for '<param>': expected a decimal, but got a string
  instead.` (code `invalid_type`, param the path as OpenAI writes it, e.g. `messages[0].content[0].file`): checked
  for `temperature` (Chat and Responses), Responses' `prompt` and a Chat content part's `file` (objects).
- `/v1/responses/input_tokens` takes openai-python 3.57.0's `InputTokenCountParams` only, refused as above.
"""

from __future__ import annotations

from typing import Any

from prefixgate.errors import RequestError

CACHE_KEY_MAX = 64
# openai 3.57.0 types/chat/completion_create_params.py
_KNOWN = frozenset({
    "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs", "max_completion_tokens",
    "max_tokens", "messages", "metadata", "modalities", "model", "moderation", "n", "parallel_tool_calls",
    "prediction", "presence_penalty", "prompt_cache_key", "prompt_cache_options", "prompt_cache_retention",
    "reasoning_effort", "response_format", "safety_identifier", "seed", "service_tier", "stop", "store", "stream",
    "stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user", "verbosity",
    "web_search_options",
})

# openai 3.57.0 types/responses/response_create_params.py
_RESPONSES_KNOWN = frozenset({
    "access_programs", "background", "background_options", "client_metadata", "context_management", "conversation",
    "image", "include", "input", "instructions", "max_output_tokens", "max_tool_calls", "metadata", "model",
    "moderation", "parallel_tool_calls", "previous_response_id", "prompt", "prompt_cache_key", "prompt_cache_options",
    "prompt_cache_retention", "reasoning", "safety_identifier", "service_tier", "store", "stream", "stream_options",
    "temperature", "text", "tool_choice", "tools", "top_logprobs", "top_p", "truncation", "user",
})

# openai 3.57.0 types/responses/input_token_count_params.py
_INPUT_TOKENS_KNOWN = frozenset({
    "conversation", "input", "instructions", "model", "parallel_tool_calls", "personality", "previous_response_id",
    "reasoning", "text", "tool_choice", "tools", "truncation",
})


def check_chat_body(body: dict[str, Any]) -> None:
    """Raise the 400 Chat Completions answers `body` with, if any."""
    unknown = [name for name in body if name not in _KNOWN]
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        raise RequestError(f"Unrecognized request argument{plural} supplied: {', '.join(sorted(unknown))}")
    check_cache_key(body)
    _check_temperature(body)
    _check_file_parts(body.get("messages"))


def check_responses_body(body: dict[str, Any]) -> None:
    """Raise the 400 the Responses API answers `body` with, if any."""
    _check_known(body, _RESPONSES_KNOWN)
    check_cache_key(body)
    _check_temperature(body)
    if body.get("prompt") is not None and not isinstance(body["prompt"], dict):
        raise _invalid_type("prompt", "an object", body["prompt"])


def check_input_tokens_body(body: dict[str, Any]) -> None:
    """Raise the 400 `/v1/responses/input_tokens` answers `body` with, if any (it counts, so it takes no output
    settings: `stream`, `store`, `max_output_tokens`...)."""
    _check_known(body, _INPUT_TOKENS_KNOWN)


def _check_known(body: dict[str, Any], known: frozenset[str]) -> None:
    for name in body:
        if name not in known:
            raise RequestError(f"Unknown parameter: '{name}'.", field=name, code="unknown_parameter")


_JSON_KINDS = ((bool, "a boolean"), (str, "a string"), (dict, "an object"), (list, "an array"),
               ((int, float), "a number"), (type(None), "null"))


def _invalid_type(param: str, expected: str, value: Any) -> RequestError:
    got = next(name for kind, name in _JSON_KINDS if isinstance(value, kind))
    return RequestError(f"Invalid type for '{param}': expected {expected}, but got {got} instead.", field=param,
                        code="invalid_type")


def _check_file_parts(messages: Any) -> None:
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, dict) else None
        for j, part in enumerate(content if isinstance(content, list) else []):
            if isinstance(part, dict) and part.get("type") == "file" and "file" in part \
                    and not isinstance(part["file"], dict):
                raise _invalid_type(f"messages[{i}].content[{j}].file", "an object", part["file"])


def _check_temperature(body: dict[str, Any]) -> None:
    value = body.get("temperature")
    if isinstance(value, (bool, str, dict, list)):
        raise _invalid_type("temperature", "a decimal", value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        shown = f"{value:g}" if isinstance(value, int) else repr(value)
        if value > 2:
            raise RequestError(f"Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got "
                               f"{shown} instead.", field="temperature", code="decimal_above_max_value")
        if value < 0:
            raise RequestError(f"Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got "
                               f"{shown} instead.", field="temperature", code="decimal_below_min_value")


def check_cache_key(body: dict[str, Any]) -> None:
    """Raise the 400 for a `prompt_cache_key` over OpenAI's 64 characters."""
    key = body.get("prompt_cache_key")
    if isinstance(key, str) and len(key) > CACHE_KEY_MAX:
        raise RequestError(f"Invalid 'prompt_cache_key': string too long. Expected a string with maximum length "
                           f"{CACHE_KEY_MAX}, but got a string with length {len(key)} instead.", field="prompt_cache_key")
