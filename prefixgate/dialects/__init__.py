"""Wire dialects: OpenAI Chat Completions, Anthropic Messages, Gemini generateContent <-> IR.

Each module offers the same functions: `parse_request`, `encode_request`, `parse_usage`,
`usage_from_response`, `usage_json`, `StreamUsage`, `build_response`, `stream_events`, `error_event`.
"""

from types import ModuleType

from prefixgate.dialects import anthropic, gemini, openai

DIALECTS: dict[str, ModuleType] = {"openai": openai, "anthropic": anthropic, "gemini": gemini}


def dialect(name: str) -> ModuleType:
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"unknown dialect {name!r}; expected one of {', '.join(DIALECTS)}") from None
