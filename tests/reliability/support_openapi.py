"""An OpenAPI description of the gateway's model endpoints, for schemathesis.

The gateway serves no schema of its own (it answers the providers' APIs, whose schemas are theirs), so
this one describes the subset of each dialect the gateway parses itself: enough for schemathesis to
generate valid requests and, in negative mode, requests that break each rule.
"""

from __future__ import annotations

TEXT_OR_PARTS = {"oneOf": [{"type": "string"}, {"type": "array", "items": {
    "type": "object", "required": ["type", "text"],
    "properties": {"type": {"type": "string", "enum": ["text"]}, "text": {"type": "string"}}}}]}
ERRORS = {"description": "an error in the caller's dialect",
          "content": {"application/json": {"schema": {"type": "object"}}}}


def body(schema: dict) -> dict:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def operation(schema: dict, **extra) -> dict:
    return {"post": {"requestBody": body(schema), **extra, "responses": {
        "200": {"description": "the answer"}, "400": ERRORS, "401": ERRORS, "404": ERRORS, "413": ERRORS}}}


OPENAI = {"type": "object", "required": ["model", "messages"], "properties": {
    "model": {"type": "string", "enum": ["gpt-5.4"]},
    "messages": {"type": "array", "minItems": 1, "maxItems": 4, "items": {
        "type": "object", "required": ["role", "content"],
        "properties": {"role": {"type": "string", "enum": ["system", "user", "assistant"]}, "content": TEXT_OR_PARTS}}},
    "stream": {"type": "boolean"},
    "max_tokens": {"type": "integer", "minimum": 1, "maximum": 4096},
    "temperature": {"type": "number", "minimum": 0, "maximum": 2},
    "prompt_cache_key": {"type": "string", "maxLength": 64}}}

ANTHROPIC = {"type": "object", "required": ["model", "max_tokens", "messages"], "properties": {
    "model": {"type": "string", "enum": ["claude-haiku-4-5"]},
    "max_tokens": {"type": "integer", "minimum": 1, "maximum": 4096},
    "system": TEXT_OR_PARTS,
    "messages": {"type": "array", "minItems": 1, "maxItems": 4, "items": {
        "type": "object", "required": ["role", "content"],
        "properties": {"role": {"type": "string", "enum": ["user", "assistant"]}, "content": TEXT_OR_PARTS}}},
    "stream": {"type": "boolean"}}}

GEMINI = {"type": "object", "required": ["contents"], "properties": {
    "contents": {"type": "array", "minItems": 1, "maxItems": 4, "items": {
        "type": "object", "required": ["parts"],
        "properties": {"role": {"type": "string", "enum": ["user", "model"]}, "parts": {
            "type": "array", "minItems": 1, "items": {"type": "object", "required": ["text"],
                                                      "properties": {"text": {"type": "string"}}}}}}},
    "systemInstruction": {"type": "object", "properties": {"parts": {"type": "array", "items": {
        "type": "object", "properties": {"text": {"type": "string"}}}}}},
    "generationConfig": {"type": "object", "properties": {"maxOutputTokens": {"type": "integer", "minimum": 1},
                                                          "temperature": {"type": "number"}}}}}

SCHEMA = {
    "openapi": "3.0.3",
    "info": {"title": "prefixgate gateway (model endpoints)", "version": "1"},
    "paths": {
        "/v1/chat/completions": operation(OPENAI),
        "/v1/messages": operation(ANTHROPIC),
        "/v1beta/models/gemini-3.5-flash:generateContent": operation(GEMINI),
        "/v1beta/models/gemini-3.5-flash:streamGenerateContent": operation(GEMINI),
    },
}
