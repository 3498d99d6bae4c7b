"""What Anthropic's Messages API accepts at the top of a body, by `anthropic-version` and model.

- Unknown top-level fields are a 400 `<field>: Extra inputs are not permitted` (the API's pydantic wording,
  seen in e.g. anthropics/claude-code#14135, #4378). The known fields are anthropic-sdk-python 2.14.0's
  `MessageCreateParams` plus its beta ones (accepted here without checking their `anthropic-beta` header).
- `anthropic-version: 2026-10-21` (the version the 2.x SDKs send by default) has no sampling parameters:
  `temperature`, `top_p` or `top_k` is rejected that way even at its default value; 2023-06-01 keeps them
  (codersera.com "Anthropic API Version 2026-10-21: Every Breaking Change"; the 2.14.0 SDK has no such fields).
- On 2023-06-01, `temperature` and `top_p` range 0..1 (Messages API reference), and Claude Opus 4.7 and later
  reject a non-default sampling parameter on every request: "`temperature` is deprecated for this model."
  (the models: `dialects/sampling.py`; UKGovernmentBEIS/inspect_ai#3721 shows temperature=0.0 refused on Opus 4.7),
  and Opus 4.1 to 4.6, Sonnet 4.5/4.6 and Haiku 4.5 refuse the two together: "`temperature` and `top_p` cannot both
  be specified for this model. Please use only one." (cloud-apim/otoroshi-llm-extension#140).
- `max_tokens` over the model's output limit (the catalogue's `max_output_tokens`): `max_tokens: <n> > <limit>, which
  is the maximum allowed number of output tokens for <model>` (as quoted by clients that hit it, e.g. "max_tokens:
  100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5").
- Empty content: `messages.<i>: all messages must have non-empty content except for the optional final assistant
  message` (a "" or [] content), and `messages: text content blocks must be non-empty` (a text block of "");
  both invalid_request_error 400s that agents and proxies keep hitting when they resend an aborted turn.
- An image or document block whose `source` is not an object: `messages.<i>.content.<j>.document.source: Input
  should be a valid dictionary or object to extract fields from` (pydantic's wording for a tagged union of models
  given a non-object, as the API words `messages.3.content.1.tool_use.input: Input should be a valid dictionary`,
  anthropics/anthropic-sdk-typescript#648); on /v1/messages/count_tokens too.
"""

from __future__ import annotations

from typing import Any

from prefixgate.dialects.sampling import takes_one_of_two, takes_sampling
from prefixgate.errors import RequestError
from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.simulation.mock.anthropic_tool_params import check_tool_pairs

SAMPLING = ("temperature", "top_p", "top_k")
# anthropic 2.14.0 types/message_create_params.py (+ `stream`), then types/beta/message_create_params.py (less
# `betas`, which the SDK sends as the anthropic-beta header).
_KNOWN = frozenset({
    "cache_control", "container", "diagnostics", "inference_geo", "max_tokens", "messages", "metadata", "model",
    "output_config", "service_tier", "speed", "stop_sequences", "stream", "system", "thinking", "tool_choice",
    "tools", "user_profile_id", "workspace_id",
})
# Beta fields are refused the same way without an `anthropic-beta` header ("context_management: Extra inputs are
# not permitted", anthropics/claude-code#14135); which beta each needs is not checked.
_BETA = frozenset({"billing_policy", "compaction", "context_management", "fallback_credit_token", "fallbacks",
                   "mcp_servers", "thread"})
# /v1/messages/count_tokens: 2.14.0 types/message_count_tokens_params.py, then the beta one. It takes no
# `max_tokens` (Wei-Shaw/sub2api#4913: "Extra inputs are not permitted"), nor sampling or `stream`.
_COUNT_KNOWN = frozenset({
    "cache_control", "messages", "model", "output_config", "speed", "system", "thinking", "tool_choice", "tools",
    "user_profile_id", "workspace_id",
})
_COUNT_BETA = frozenset({"billing_policy", "compaction", "context_management", "mcp_servers"})
NO_SAMPLING_VERSION = "2026-10-21"
# The values a model that takes no sampling parameters still accepts (the defaults).
_DEFAULTS = {"temperature": 1, "top_p": 1}


def check_body(body: dict[str, Any], version: str, model_id: str, betas: str | None = None) -> None:
    """Raise the 400 the Messages API answers `body` with, if any, under `version` for `model_id`, sent with the
    `anthropic-beta` header `betas` (None: a platform that takes betas otherwise, unchecked)."""
    sampling = () if version >= NO_SAMPLING_VERSION else SAMPLING
    _check_fields(body, _KNOWN | frozenset(sampling), _BETA, betas)
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1):
            raise RequestError(f"{name}: range: 0..1", field=name)
    _check_max_tokens(body.get("max_tokens"), model_id)
    refused = deprecated_sampling(body, model_id)
    if refused is not None:
        raise RequestError(f"`{refused}` is deprecated for this model.", field=refused)
    if sampling_pair(body, model_id):
        raise RequestError(SAMPLING_PAIR, field="top_p")
    _check_contents(body.get("messages"))
    check_tool_pairs(body.get("messages") if isinstance(body.get("messages"), list) else [])


def _check_max_tokens(value: Any, model_id: str) -> None:
    try:
        limit = resolve_model("anthropic", model_id).max_output_tokens
    except UnknownModel:
        return
    if limit and isinstance(value, int) and not isinstance(value, bool) and value > limit:
        raise RequestError(f"max_tokens: {value} > {limit}, which is the maximum allowed number of output tokens for "
                           f"{model_id}", field="max_tokens")


def _check_contents(messages: Any) -> None:
    messages = messages if isinstance(messages, list) else []
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        final_assistant = i == len(messages) - 1 and message.get("role") == "assistant"
        if content in ("", []) and not final_assistant:
            raise RequestError(f"messages.{i}: all messages must have non-empty content except for the optional "
                               "final assistant message", field=f"messages.{i}")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "text" and block.get("text") == "":
                raise RequestError("messages: text content blocks must be non-empty", field=f"messages.{i}")
        _check_sources(content if isinstance(content, list) else [], f"messages.{i}.content")


def _check_sources(blocks: list, path: str) -> None:
    for j, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in ("image", "document") and "source" in block and not isinstance(block["source"], dict):
            field = f"{path}.{j}.{kind}.source"
            raise RequestError(f"{field}: Input should be a valid dictionary or object to extract fields from",
                               field=field)


def check_count_body(body: dict[str, Any], betas: str | None) -> None:
    """Raise the 400 `/v1/messages/count_tokens` answers `body` with, if any."""
    _check_fields(body, _COUNT_KNOWN, _COUNT_BETA, betas)
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, dict) else None
        _check_sources(content if isinstance(content, list) else [], f"messages.{i}.content")


def _check_fields(body: dict[str, Any], known: frozenset[str], beta: frozenset[str], betas: str | None) -> None:
    allowed = known | beta if betas is None or betas.strip() else known
    for name in body:
        if name not in allowed:
            raise RequestError(f"{name}: Extra inputs are not permitted", field=name)


SAMPLING_PAIR = "`temperature` and `top_p` cannot both be specified for this model. Please use only one."


def sampling_pair(params: dict[str, Any], model_id: str) -> bool:
    """Whether `params` (a Messages body, or Converse's `inferenceConfig`) sets both `temperature` and `top_p` for a
    model that takes only one of them."""
    return "temperature" in params and ("top_p" in params or "topP" in params) and takes_one_of_two(model_id)


def deprecated_sampling(params: dict[str, Any], model_id: str) -> str | None:
    """The sampling parameter in `params` (a Messages body, or Converse's `inferenceConfig`) that `model_id`
    (any platform's id) refuses, if any."""
    if takes_sampling(model_id):
        return None
    names = {"temperature": "temperature", "top_p": "top_p", "topP": "top_p", "top_k": "top_k"}
    for name, canonical in names.items():
        if name in params and params[name] != _DEFAULTS.get(canonical):
            return name
    return None
