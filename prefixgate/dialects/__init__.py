"""Wire dialects: OpenAI Chat Completions and Responses, Anthropic Messages, Gemini generateContent <-> IR.

Each module offers the same functions: `parse_request`, `encode_request`, `parse_usage`,
`usage_from_response`, `usage_json`, `StreamUsage`, `build_response`, `stream_events`, `error_event`.
"""

from types import ModuleType

from prefixgate.dialects import anthropic, gemini, openai, responses

# Keyed by `Conversation.dialect`; "responses" is OpenAI's Responses API (provider "openai").
DIALECTS: dict[str, ModuleType] = {"openai": openai, "responses": responses, "anthropic": anthropic, "gemini": gemini}


def request_dialect(provider: str, body: dict) -> ModuleType:
    """The wire format of a provider's recorded request body: OpenAI's is Chat Completions or Responses,
    told apart by shape (Chat always has `messages`)."""
    if provider == "openai" and responses.is_responses_body(body):
        return responses
    return dialect(provider)


def dialect(name: str) -> ModuleType:
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"unknown dialect {name!r}; expected one of {', '.join(DIALECTS)}") from None
