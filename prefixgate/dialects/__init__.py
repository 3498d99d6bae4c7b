"""Wire formats: one adapter (`wire.WireFormat`) per format, one module each, registered here.

Each module also offers its format's functions directly (`parse_request`, `encode_request`,
`parse_usage`, `usage_from_response`, `usage_json`, `StreamUsage`, `build_response`, `stream_events`,
`error_event`), which the mock providers and tests use; everything else goes through the adapter.
"""

from __future__ import annotations

from prefixgate.dialects import anthropic, bedrock_invoke, converse, gemini, openai
from prefixgate.dialects.wire import WireFormat

# One line per wire format. Order matters only to `format_of_path`: the last one answers every path no
# other format claims.
WIRE_FORMATS: dict[str, WireFormat] = {w.name: w for w in (anthropic.WIRE, gemini.WIRE, bedrock_invoke.WIRE, converse.WIRE,
                                                           openai.WIRE)}
# The name lint, replay and trace readers use for the same registry.
DIALECTS = WIRE_FORMATS


def wire_format(name: str) -> WireFormat:
    try:
        return WIRE_FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown wire format {name!r}; expected one of {', '.join(sorted(WIRE_FORMATS))}") from None


def format_of_path(path: str) -> WireFormat:
    """The format whose error shape answers a problem on `path`."""
    return next(w for w in WIRE_FORMATS.values() if w.owns_path(path))
