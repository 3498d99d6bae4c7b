"""PG007 unstable-key-order."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from prefixgate.cache_planner.lint.inputs import Request
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule
from prefixgate.cache_planner.lint.rules.samples import ref, sample_key
from prefixgate.ir import CACHE_MARKERS


def _canonical(value: Any) -> Any:
    """A tool or schema with key order and `required`/`enum` order ignored: what it means, not how it was written."""
    if isinstance(value, dict):
        return {k: sorted(v, key=json.dumps) if k in ("required", "enum") and isinstance(v, list) else _canonical(v)
                for k, v in sorted(value.items()) if k not in CACHE_MARKERS}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _tool_name(native: Any) -> str:
    if not isinstance(native, dict):
        return "?"
    return str(native.get("name") or (native.get("function") or {}).get("name") or
               next((d.get("name") for d in native.get("functionDeclarations", native.get("function_declarations", []))
                     if isinstance(d, dict)), None) or "?")


def _order_conflict(siblings: list[dict]) -> tuple[int, int, str, str] | None:
    """Two sibling objects that put the same two keys in opposite orders: (i, j, key a, key b)."""
    orders = [{k: n for n, k in enumerate(d)} for d in siblings]
    for i in range(len(orders)):
        for j in range(i + 1, len(orders)):
            common = [k for k in orders[i] if k in orders[j]]
            for a, b in zip(common, common[1:], strict=False):
                if orders[j][a] > orders[j][b]:
                    return i, j, a, b
    return None


def _sibling_groups(native: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], list[dict]]]:
    """Groups of objects a serialiser writes with one code path: the members of each `properties` map."""
    if isinstance(native, dict):
        props = native.get("properties")
        if isinstance(props, dict):
            members = [v for v in props.values() if isinstance(v, dict)]
            if len(members) > 1:
                yield (*path, "properties"), members
        for k, v in native.items():
            yield from _sibling_groups(v, (*path, k))
    elif isinstance(native, list):
        for i, v in enumerate(native):
            yield from _sibling_groups(v, (*path, i))


@rule("PG007", "unstable-key-order", "warning",
      "Tool definitions or JSON schemas are serialised with an unstable key order, so equal tools give unequal prefixes.",
      "Serialise tools and schemas deterministically (define them once as literals, or json.dumps(sort_keys=True)).",
      "corpus", cost="replay")
def unstable_key_order(requests: list[Request], ctx: Context) -> Iterator[Hit]:
    """## What it does
    Compares tool definitions and JSON schemas across samples of one route (and sibling properties within
    one request) for the same content serialised in different key orders.

    ## Why it matters
    Tools come first in the prefix: a reordered key changes the bytes and misses the cache for the whole
    request.

    ## Example
    Tools built from a `set` or from a dict merged in varying order per request.

    ## Use instead
    Define tools once as literals, or serialise with `json.dumps(..., sort_keys=True)`.
    """
    seen: dict[tuple[Any, ...], tuple[str, Request, int]] = {}
    for req in requests:
        if req.conv is None:
            continue
        tool_blocks = [(i, b) for i, b in enumerate(req.conv.blocks()) if b.kind in ("tool_def", "schema")]
        reported = False
        for i, block in tool_blocks:
            native = block.native
            canonical = json.dumps(_canonical(native))
            form = json.dumps({k: v for k, v in native.items() if k not in CACHE_MARKERS}) if isinstance(native, dict) else ""
            first = seen.setdefault((*sample_key(req), req.provider, canonical), (form, req, i))
            if first[0] != form and not reported:
                reported = True
                yield Hit(f"tool {_tool_name(native)!r} is the same as in {ref(req, first[1])} but serialised in another "
                          "key order: the prefix misses from here on", req.where(i), req, {"across": True})
        if reported:
            continue
        tops = [b.native.get("function") if isinstance(b.native.get("function"), dict) else b.native
                for _, b in tool_blocks if isinstance(b.native, dict)]
        groups = [((), tops)] + [g for _, b in tool_blocks for g in _sibling_groups(b.native)]
        for path, siblings in groups:
            conflict = _order_conflict(siblings)
            if conflict is not None:
                _, _, a, b = conflict
                where = " in " + ".".join(map(str, path)) if path else " across tool definitions"
                yield Hit(f"keys {a!r} and {b!r} appear in both orders{where}: the serialiser does not keep a "
                          "stable order, so the next request may differ", req.where(tool_blocks[0][0]), req, {"across": False})
                break
