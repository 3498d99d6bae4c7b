"""What Gemini's generateContent accepts in `generationConfig`, per model.

- A sampling value out of range is a 400 INVALID_ARGUMENT `Unable to submit request because it has a <field> value
  of <v> but the supported range is from <low> (inclusive) to <high> (exclusive). Update the value and try again.`
  (maxOutputTokens: "... from 1 (inclusive) to 65537 (exclusive)" reported by gemini-cli users and many proxies;
  topK: "... from 1 (inclusive) to 41 (exclusive)" on older models; temperature on Gemini 3.x Flash: "from 0
  (inclusive) to 2.0001 (exclusive)"). Ranges: temperature 0..2, topP 0..1, topK 1..64 (the `topK` models.get
  lists for 2.5 and 3.x; "topK: 64 (fixed)" on the Vertex model cards), candidateCount 1..8 (the same cards),
  maxOutputTokens 1..the model's output limit (the catalogue's `max_output_tokens`).
- thinkingConfig (ai.google.dev/gemini-api/docs/thinking): `thinkingBudget` is -1 (dynamic) or within the model's
  range, else "The thinking budget <b> is invalid. Please choose a value between <low> and <high>." (2.5 Pro
  128..32768; 2.5 Flash 0..24576). Pro models cannot stop thinking: a budget of 0 is "Budget 0 is invalid. This
  model only works in thinking mode." (2.5 Pro and 3.1 Pro alike). `thinkingLevel` is Gemini 3's; a model before
  3 answers it with "Thinking level is not supported for this model.". Gemini 3's own budget ranges are not
  published, so only its Pro's zero is checked.
- A value of the wrong JSON type is the API's proto3 JSON parse error, a 400 INVALID_ARGUMENT `Invalid value at
  'generation_config.temperature' (TYPE_FLOAT), "hot"` (a message field: the message's type URL instead); a number
  written as a string ("0.5") is valid proto3 JSON, so this check lets it by.
"""

from __future__ import annotations

import json
import re
from typing import Any

from prefixgate.errors import RequestError

TOP_K = 64
MAX_CANDIDATES = 8
# (lowest, highest) thinking budget by model family, where the thinking guide publishes one.
_BUDGETS = {"gemini-2.5-pro": (128, 32_768), "gemini-2.5-flash": (0, 24_576)}
_DYNAMIC = -1
_CONFIG_TYPES = {"temperature": "TYPE_FLOAT", "topP": "TYPE_FLOAT", "topK": "TYPE_INT32",
                 "candidateCount": "TYPE_INT32", "maxOutputTokens": "TYPE_INT32"}
_THINKING_TYPES = {"thinkingBudget": "TYPE_INT32"}


def check_generation_config(body: dict[str, Any], model_id: str, output_limit: int) -> None:
    """Raise the 400 generateContent answers `body`'s generationConfig with on `model_id`, whose answers run to
    `output_limit` tokens at most, if any."""
    config = proto_field(body, "generationConfig")
    if config is None:
        return
    check_config_types(config, "generation_config")
    _check_range(config, "temperature", 0, 2, "2.0001")
    _check_range(config, "topP", 0, 1, "1.0001")
    _check_range(config, "topK", 1, TOP_K, str(TOP_K + 1))
    _check_range(config, "candidateCount", 1, MAX_CANDIDATES, str(MAX_CANDIDATES + 1))
    _check_range(config, "maxOutputTokens", 1, output_limit, str(output_limit + 1))
    thinking = proto_field(config, "thinkingConfig")
    if thinking is not None:
        _check_thinking(thinking, model_id)


def check_config_types(config: Any, path: str) -> None:
    """Raise the proto3 JSON parse error for a generationConfig (at proto path `path`) holding a value of the
    wrong JSON type, if any: generateContent's, or the one inside countTokens' generateContentRequest."""
    _check_types(config, path, "GenerationConfig", _CONFIG_TYPES)
    thinking = proto_field(config, "thinkingConfig")
    if thinking is not None:
        _check_types(thinking, f"{path}.thinking_config", "ThinkingConfig", _THINKING_TYPES)


def _check_types(message: Any, path: str, message_type: str, fields: dict[str, str]) -> None:
    if not isinstance(message, dict):
        raise RequestError(f"Invalid value at '{path}' (type.googleapis.com/google.ai.generativelanguage.v1beta."
                           f"{message_type}), {json_shown(message)}", field=path)
    for name, proto_type in fields.items():
        value = proto_field(message, name)
        if value is not None and not _is_number(value):
            snake = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)
            raise RequestError(f"Invalid value at '{path}.{snake}' ({proto_type}), {json_shown(value)}",
                               field=f"{path}.{snake}")


def _is_number(value: Any) -> bool:
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return False
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def json_shown(value: Any) -> str:
    """`value` as the proto3 JSON parse error quotes it."""
    return json.dumps(value) if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _check_range(config: dict, name: str, low: float, high: float, shown_high: str) -> None:
    value = proto_field(config, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or low <= value <= high:
        return
    raise RequestError(f"Unable to submit request because it has a {name} value of {_shown(value)} but the supported range "
                       f"is from {low} (inclusive) to {shown_high} (exclusive). Update the value and try again.",
                       field=f"generationConfig.{name}")


def _check_thinking(thinking: dict, model_id: str) -> None:
    version = re.match(r"gemini-(\d+)", model_id)
    if proto_field(thinking, "thinkingLevel") is not None and version is not None and int(version.group(1)) < 3:
        raise RequestError("Thinking level is not supported for this model.",
                           field="generationConfig.thinkingConfig.thinkingLevel")
    budget = proto_field(thinking, "thinkingBudget")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget == _DYNAMIC:
        return
    field = "generationConfig.thinkingConfig.thinkingBudget"
    if budget == 0 and "-pro" in model_id:
        raise RequestError("Budget 0 is invalid. This model only works in thinking mode.", field=field)
    low, high = _BUDGETS.get(model_id, (budget, budget))
    if not low <= budget <= high:
        raise RequestError(f"The thinking budget {budget} is invalid. Please choose a value between {low} and {high}.",
                           field=field)


def _shown(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def proto_field(message: dict, camel: str) -> Any:
    """A proto3 JSON field, by its lowerCamelCase name or its proto (snake_case) name."""
    if camel in message:
        return message[camel]
    return message.get(re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel))
