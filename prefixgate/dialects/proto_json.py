"""Google's REST bodies are proto3 JSON: a field may be spelled lowerCamelCase or as the proto names it
(`cachedContent`, `cached_content`). A body spelling one field both ways is refused here, before anything reads it.

Why refuse rather than check both: every reader of such a body (the tenant checks of provider_ids, the planner,
pricing, the cache lifetime cap) takes one spelling first, and which one Google's parser keeps is not ours to
know, so the gateway could check, price or cap one value while Google runs the other. protobuf's own JSON parser
refuses such a body (`should not have multiple "cached_content" fields`; the conformance suite's
FieldNameDuplicateDifferentCasing cases), so no client that Google's API accepts sends one.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from prefixgate.errors import RequestError

# Fields whose value is free-form JSON (a Struct or Value: a function's arguments or result, a JSON Schema) or a
# map (a schema's properties, labels): their keys are data, and `user_id` beside `userId` is the caller's to have.
_FREE_FORM = frozenset({"args", "response", "properties", "parametersJsonSchema", "responseJsonSchema", "labels",
                        "example", "default", "defs", "$defs", "partialArgs", "structValue", "metadata"})
_PROTO_KEY_END = re.compile(rb'_[A-Za-z0-9_]*"\s*:')
_ESCAPED_KEY = re.compile(rb'\\u[0-9A-Fa-f]{4}[A-Za-z0-9_]*"\s*:')     # a field name's last escape, to its end
_UNDERSCORES = re.compile(r"_+(.?)", re.DOTALL)


def camel(name: str) -> str:
    """A proto field name in proto3 JSON's lowerCamelCase, by protobuf's own rule (`ToJsonName`: an underscore is
    dropped and the character after it upper-cased): `cached_content` -> `cachedContent`, `a_1b` -> `a1b`. Not
    cached: it is asked of the caller's own keys."""
    return _UNDERSCORES.sub(lambda m: m.group(1).upper(), name)


@functools.cache
def snake(name: str) -> str:
    """A lowerCamelCase field's proto name: `ragCorpus` -> `rag_corpus`, `camel`'s reverse. Cached, for the field
    names the gateway reads (`field`): run for each object of a body, the regex took 80 ms of a 600-message agent
    body's walk."""
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def field(node: dict, name: str) -> Any:
    """`node`'s field `name` (lowerCamelCase) in either spelling proto3 JSON takes, None where neither is set. A
    Google body naming both is refused before it is read (`one_spelling`)."""
    found = node.get(name)
    return found if found is not None else node.get(snake(name))


def one_spelling(body: Any, raw: bytes | str | None = None) -> None:
    """Raise a 400 naming the first field `body` spells both ways, at any depth outside free-form JSON. With its
    `raw` JSON, a body with no proto-named key whose camelCase is also written in it is not walked (most are not)."""
    if raw is not None and not _maybe_twice(raw.encode() if isinstance(raw, str) else raw):
        return
    if _twice(body, paths=False) is None:
        return
    at, name, key = _twice(body, paths=True)    # found again with its path, which the first walk spares building
    where = f"{at}.{name}".lstrip(".")
    raise RequestError(f"Invalid JSON payload received. Field \"{where}\" is given twice, as \"{name}\" and "
                       f"\"{key}\": send one spelling.", field=where)


def _maybe_twice(raw: bytes) -> bool:
    """Whether `raw` writes a key with an underscore and, anywhere, that key's camelCase as a string; or a key with a
    `\\u` escape (`"file\\u005fdata"` is `file_data` to every JSON parser, Google's too), which only a walk reads."""
    if _ESCAPED_KEY.search(raw):
        return True
    keys = set()
    for found in _PROTO_KEY_END.finditer(raw):     # the tail of a key from its first underscore: quick to find
        tail = found.start()
        keys.add(raw[raw.rfind(b'"', 0, tail) + 1:raw.index(b'"', tail)])
    return any(b'"' + camel(key.decode(errors="replace")).encode() + b'"' in raw for key in keys)


def _twice(body: Any, paths: bool) -> tuple[str, str, str] | None:
    """(path, camelCase name, proto name) of the first field spelt both ways; a stack of its own, since a body as
    deep as the JSON parser takes would overflow Python's."""
    pending: list[tuple[Any, str]] = [(body, "")]
    while pending:
        node, at = pending.pop()
        if isinstance(node, list):
            pending.extend((item, f"{at}.{i}" if paths else "") for i, item in enumerate(node))
        elif isinstance(node, dict):
            for key, value in node.items():
                name = camel(key) if "_" in key else key
                if name != key and name in node:
                    return at, name, key
                if isinstance(value, (dict, list)) and name not in _FREE_FORM:
                    pending.append((value, f"{at}.{key}" if paths else ""))
    return None
