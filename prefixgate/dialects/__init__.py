"""Wire formats: one adapter (`wire.WireFormat`) per format, one module each, registered here.

Each module also offers its format's functions directly (`parse_request`, `encode_request`,
`parse_usage`, `usage_from_response`, `usage_json`, `StreamUsage`, `build_response`, `stream_events`,
`error_event`), which the mock providers and tests use; everything else goes through the adapter.
"""

from __future__ import annotations

from prefixgate.dialects import (
    anthropic,
    bedrock_invoke,
    converse,
    gemini,
    interactions_adapter,
    openai,
    responses_adapter,
    vertex_anthropic,
    vertex_gemini,
)
from prefixgate.dialects.interactions import is_interactions_body
from prefixgate.dialects.responses import is_responses_body
from prefixgate.dialects.wire import WireFormat

# One line per wire format. Order matters only to `format_of_path`: the last one answers every path no
# other format claims, and Vertex's and Interactions' come before Gemini's (which claims every `{model}:{method}`
# path and all of /v1beta/).
WIRE_FORMATS: dict[str, WireFormat] = {w.name: w for w in (
    anthropic.WIRE, vertex_anthropic.WIRE, vertex_gemini.WIRE, interactions_adapter.WIRE, gemini.WIRE, responses_adapter.WIRE, bedrock_invoke.WIRE, converse.WIRE, openai.WIRE)}
# The name lint, replay and trace readers use for the same registry.
DIALECTS = WIRE_FORMATS


def request_dialect(provider: str, body: dict) -> WireFormat:
    """The wire format of a provider's recorded request body, told apart by shape where a provider has
    several: OpenAI's Chat Completions always has `messages`, Responses never; Bedrock's InvokeModel body is
    Anthropic's with `anthropic_version`, its Messages API body names a `model`, Converse neither; Gemini's
    generateContent body always has `contents`, an Interactions body never."""
    if provider == "openai" and is_responses_body(body):
        return responses_adapter.WIRE
    if provider == "gemini" and is_interactions_body(body):
        return interactions_adapter.WIRE
    if provider == "bedrock":
        if "model" in body:
            return anthropic.WIRE
        return bedrock_invoke.WIRE if "anthropic_version" in body else converse.WIRE
    return wire_format(provider)


def wire_format(name: str) -> WireFormat:
    try:
        return WIRE_FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown wire format {name!r}; expected one of {', '.join(sorted(WIRE_FORMATS))}") from None


def format_of_path(path: str) -> WireFormat:
    """The format whose error shape answers a problem on `path`."""
    return next(w for w in WIRE_FORMATS.values() if w.owns_path(path))
