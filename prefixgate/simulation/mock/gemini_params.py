"""What Gemini's generateContent accepts at the top of a body.

The API parses bodies as proto3 JSON: a field the message lacks is a 400 INVALID_ARGUMENT `Invalid JSON payload
received. Unknown name "<field>": Cannot find field.` (seen in e.g. google-gemini/gemini-cli#13972,
Alishahryar1/free-claude-code#542). Proto3 JSON takes each field by its lowerCamelCase or its proto name.
The fields are GenerateContentRequest's (https://ai.google.dev/api/generate-content), plus the `labels`,
`serviceTier` and `store` that google-genai 3.6.1 may send.

A turn without parts is refused too: `* GenerateContentRequest.contents[0].parts: contents.parts must not be
empty.` (the error clients such as the Vercel AI SDK filter empty messages to avoid).
"""

from __future__ import annotations

from typing import Any

from prefixgate.errors import RequestError
from prefixgate.providers.rules import ModelRules
from prefixgate.simulation.mock.gemini_generation_params import check_generation_config
from prefixgate.simulation.mock.gemini_part_params import check_file_data
from prefixgate.simulation.mock.gemini_signature_params import check_thought_signatures

# A Gemini model the catalogue gives no limit: every 2.5 and 3.x model answers up to 65,536 tokens.
OUTPUT_TOKEN_LIMIT = 65_536
_CAMEL = ("model", "contents", "tools", "toolConfig", "safetySettings", "systemInstruction", "generationConfig",
          "cachedContent", "labels", "serviceTier", "store")
_KNOWN = frozenset(_CAMEL) | frozenset("".join("_" + c.lower() if c.isupper() else c for c in n) for n in _CAMEL)


def check_generate_body(body: dict[str, Any], model: ModelRules) -> None:
    """Raise the 400 generateContent answers `body` with on `model`, if any."""
    unknown = [name for name in body if name not in _KNOWN]
    if unknown:
        raise RequestError("\n".join(f'Invalid JSON payload received. Unknown name "{name}": Cannot find field.'
                                     for name in unknown), field=unknown[0])
    contents = body.get("contents")
    for i, content in enumerate(contents if isinstance(contents, list) else []):
        if isinstance(content, dict) and not content.get("parts"):
            raise RequestError(f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty.\n",
                               field=f"contents.{i}.parts")
    check_file_data(contents, "contents")
    check_generation_config(body, model.id, model.max_output_tokens or OUTPUT_TOKEN_LIMIT)
    check_thought_signatures(contents if isinstance(contents, list) else [], model.id)
