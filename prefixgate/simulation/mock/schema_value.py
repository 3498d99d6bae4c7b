"""A fixed value that conforms to a JSON schema: the mock's tool-call arguments and structured-output answers.

Real models fill a schema with content; the mock fills it with the same values every time, so a test can
expect them: a string is "mock" (or its enum's first value, or a valid date, e-mail or URL where `format`
asks), an integer 1, a number 1.5, a boolean true, an array one item long (or `minItems`). Whatever the
caller validates against must accept it, so the parts of JSON Schema that client libraries emit are
followed: `$ref` into `$defs`/`definitions`, `anyOf`/`oneOf` (the first non-null branch), `allOf`, `const`,
`required`, `minimum`, length bounds. Gemini's OpenAPI-style upper-case types (`OBJECT`, `STRING`) read the same.
"""

from __future__ import annotations

from typing import Any

_FORMATS = {"date": "2026-01-01", "date-time": "2026-01-01T00:00:00Z", "time": "00:00:00", "email": "mock@example.com",
            "uri": "https://example.com/", "url": "https://example.com/", "uuid": "00000000-0000-4000-8000-000000000000",
            "hostname": "example.com", "ipv4": "127.0.0.1", "duration": "P1D"}


def value_for(schema: Any, root: Any = None, depth: int = 0) -> Any:
    """A value conforming to `schema`; `root` holds the definitions `$ref`s point into (the schema itself)."""
    root = schema if root is None else root
    if not isinstance(schema, dict) or depth > 12:
        return None
    if "$ref" in schema:
        return value_for(_resolve(schema["$ref"], root), root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        branches = [b for b in schema.get(key) or [] if isinstance(b, dict)]
        if branches:
            chosen = next((b for b in branches if _kind(b) != "null"), branches[0])
            return value_for(chosen, root, depth + 1)
    if schema.get("allOf"):
        merged: dict = {}
        for part in schema["allOf"]:
            part = _resolve(part["$ref"], root) if isinstance(part, dict) and "$ref" in part else part
            if isinstance(part, dict):
                merged = {**merged, **part, "properties": {**merged.get("properties", {}), **part.get("properties", {})}}
        return value_for(merged, root, depth + 1)
    kind = _kind(schema)
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: value_for(sub, root, depth + 1) for name, sub in props.items()}
    if kind == "array":
        count = max(1, int(schema.get("minItems") or 0))
        if schema.get("maxItems") is not None:
            count = min(count, int(schema["maxItems"]))
        items = schema.get("items")
        if isinstance(schema.get("prefixItems"), list):
            return [value_for(s, root, depth + 1) for s in schema["prefixItems"]]
        return [value_for(items if isinstance(items, dict) else {"type": "string"}, root, depth + 1)
                for _ in range(count)]
    if kind == "string":
        text = _FORMATS.get(schema.get("format", ""), "mock")
        least = int(schema.get("minLength") or 0)
        return text + "x" * max(0, least - len(text))
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        value = (1 if kind == "integer" else 1.5) if low is None else low + (1 if "exclusiveMinimum" in schema else 0)
        high = schema.get("maximum")
        return min(value, high) if high is not None else value
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "mock"


def _kind(schema: dict) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if str(k).lower() != "null"), "null")
    if kind is None:
        return "object" if "properties" in schema else ""
    return str(kind).lower()


def _resolve(ref: str, root: Any) -> Any:
    """A local `#/...` reference's target (`#/$defs/City`, `#/definitions/City`, `#` itself)."""
    node = root
    for part in ref.removeprefix("#").strip("/").split("/") if ref != "#" else []:
        node = node.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(node, dict) else None
    return node
