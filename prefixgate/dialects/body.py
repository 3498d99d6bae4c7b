"""Putting a request body back together around its re-encoded prefix fields."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from prefixgate.ir import Conversation, Segment, touched

# A replacement value meaning "remove this key" (None is a real JSON value: OpenAI's `content: null`).
DROP: Any = object()


def split_body(body: dict, prefix_fields: set[str]) -> tuple[dict, list[str]]:
    """The body's non-prefix fields, and the order of all its keys (to rebuild it byte-faithfully)."""
    return {k: v for k, v in body.items() if k not in prefix_fields}, list(body)


def rebuild_body(conv: Conversation, encoded: dict[str, Any]) -> dict:
    """A body with `encoded` prefix fields (DROP removes one) and the other params, in original key order.

    Fields the planner introduced (a system prompt that was absent, a cache key) go after the rest.
    """
    out: dict[str, Any] = {}
    for key in conv.field_order:
        if key in encoded:
            if encoded[key] is not DROP:
                out[key] = encoded[key]
        elif key in conv.params:
            out[key] = conv.params[key]
    for source in (conv.params, encoded):
        for key, value in source.items():
            if key not in out and key not in conv.field_order and value is not DROP:
                out[key] = value
    # Cache fields the planner set win over the caller's (their position is kept if the caller had one).
    for key, value in conv.cache_params.items():
        if value is DROP:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def merge_native(native: dict, replacements: dict[str, Any]) -> dict:
    """`native` with some keys replaced in place (order kept), new ones appended, DROP ones removed."""
    out = {k: replacements.get(k, v) for k, v in native.items()}
    out.update({k: v for k, v in replacements.items() if k not in native})
    return {k: v for k, v in out.items() if v is not DROP}


def encode_messages(segments: list[Segment], encode: Callable[[Segment], dict | None]) -> list[dict]:
    """The messages of `segments`, in order: the untouched ones as they came in (see `touched`: most of an
    agent's history), the others as `encode` makes them. `encode` returns None for
    a segment that is not a message (a tools list, a top-level system prompt), which it puts elsewhere."""
    messages: list[dict] = []
    done = 0
    for i in touched(segments):
        messages.extend(map(_NATIVE, segments[done:i]))
        done = i + 1
        message = encode(segments[i])
        if message is not None:
            messages.append(message)
    messages.extend(map(_NATIVE, segments[done:]))
    return messages


_NATIVE = operator.attrgetter("native")
