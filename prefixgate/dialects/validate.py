"""Shared checks for request bodies: each failure is a RequestError that names the field."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from prefixgate.dialects import unique_keys
from prefixgate.dialects.resent import Body, ResentBodies
from prefixgate.errors import RequestError

# An escaped surrogate (or colon: `unique_keys` counts colons), or a surrogate in raw bytes: json.loads decodes bytes
# with "surrogatepass", so ED A0-BF (UTF-8's spelling of U+D800-U+DFFF, which is not valid UTF-8) reads as a lone
# surrogate too. Each pattern alone starts with a literal, which the regex engine finds fast (as one alternation
# they scanned ~100x slower).
_ESCAPE, _RAW_SURROGATE = re.compile(rb"\\u(?:[dD]|003[aA])"), re.compile(rb"\xed[\xa0-\xbf]")
_HIGH, _LOW = b"89abAB", b"cdefCDEF"
_TYPE_NAMES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
               float: "a number", type(None): "null"}


def load_body(body: bytes | str | dict) -> dict:
    """The request body as a JSON object, or a RequestError saying why not."""
    if isinstance(body, dict):
        return body
    try:
        value = json.loads(body, parse_constant=_not_json, parse_float=_finite)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RequestError(f"request body is not valid JSON: {e}") from None
    except RecursionError:
        raise RequestError("request body is nested too deeply to be a model request") from None
    except ValueError as e:     # an integer past Python's 4300-digit conversion limit
        raise RequestError(f"request body holds a number the gateway cannot read: {str(e).split(';')[0]}") from None
    if not isinstance(value, dict):
        raise RequestError(f"request body must be a JSON object, not {_json_type(value)}")
    # Text is checked as its UTF-8 bytes, whose JSON is the same text (a lone surrogate in it written as its bytes,
    # which the scan finds): one encode, not the second parse of `unique_keys.exact`.
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if _odd_escapes(raw) or json.detect_encoding(raw) != "utf-8":     # the scans read UTF-8 bytes only
        _no_lone_surrogate(value)
        unique_keys.exact(raw, _DECODER)
    else:
        unique_keys.check(raw, [(0, len(raw))], [value], _DECODER)
    return value


def load_resent(body: bytes | str | dict, array: str, bodies: ResentBodies) -> tuple[dict, Body | None]:
    """`load_body`, parsing only what `body` does not repeat of a recent body (`dialects.resent`), with
    where `array`'s elements sit in its bytes; the same value, errors and checks as `load_body`."""
    found = bodies.load(body, array, _DECODER, _checked) if isinstance(body, bytes) else None
    if found is None:
        return load_body(body), None
    return found.data, found


def _checked(found: Body) -> None:
    """`load_body`'s checks of a resent body, where it was parsed: the reused parts passed them in the body they came
    from (a body that fails one is never remembered)."""
    spans, values = found.parsed_here()
    if any(_odd_escapes(found.raw, start, end) for start, end in spans):
        _no_lone_surrogate(found.data)
        unique_keys.exact(found.raw, _DECODER)
    else:
        unique_keys.check(found.raw, spans, values, _DECODER)


def _odd_escapes(raw: bytes, start: int = 0, end: int | None = None) -> bool:
    """Whether `raw[start:end]` needs the whole checks: a lone surrogate may hide in it (`_no_lone_surrogate`, a
    dumps of the body), or a colon is escaped (`\\u003a`, which no encoder writes: `unique_keys.exact`). True at raw
    surrogate bytes, at an escape of either half that is not one of a pair, and where a backslash before "ud" is
    itself escaped (text that reads as an escape: rare, so left to the whole check). A whole escaped pair (an emoji
    from a client that escapes non-ASCII, as Python's json.dumps does) is passed over: otherwise every request
    resending one would pay a dumps of its whole body."""
    end = len(raw) if end is None else end
    # 0xED leads every raw surrogate, and is rare (Hangul): memchr passes a body over 40x quicker than the regex.
    if raw.find(b"\xed", start, end) != -1 and _RAW_SURROGATE.search(raw, start, end):
        return True
    pair_end = -1
    for found in _ESCAPE.finditer(raw, start, end):
        i = found.start()
        if i < pair_end:
            continue                            # the low half of the pair just passed
        if raw[i + 2] == 0x30 or i + 12 > len(raw):
            return True                         # an escaped colon, or no room for a pair
        run = i
        while run > 0 and raw[run - 1] == 0x5C:
            run -= 1
        if (i - run) % 2 or raw[i + 3] not in _HIGH or raw[i + 6:i + 9] not in (b"\\ud", b"\\uD") \
                or raw[i + 9] not in _LOW:
            return True
        pair_end = i + 12
    return False


def _no_lone_surrogate(value: Any) -> None:
    # JSON may escape half a UTF-16 pair ("\ud800"), which no UTF-8 can carry: every later step (hashing,
    # counting tokens, sending upstream) would fail on it. Only a surrogate escape or raw surrogate bytes make one.
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise RequestError("request body holds a lone UTF-16 surrogate escape (\\ud800-\\udfff without its "
                           "pair), which is not valid Unicode") from None


def _not_json(name: str) -> Any:
    # Python's json reads NaN and Infinity, which are not JSON: no provider takes them, and the encoder
    # (compact_json) would send them as null, a silent change of the caller's request.
    raise RequestError(f"request body is not valid JSON: {name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):     # 1e400: valid JSON, but no double holds it
        raise RequestError(f"request body holds the number {text[:40]}, too large for a double")
    return value


# What `load_body`'s json.loads call is, for the resent-body parser's scanner.
_DECODER = json.JSONDecoder(parse_constant=_not_json, parse_float=_finite)


def expect(value: Any, kind: type | tuple[type, ...], field: str) -> Any:
    """`value` if it has the JSON type `kind`; bools are never accepted as integers."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        wanted = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
        raise RequestError(f"{field}: expected {wanted}, got {_json_type(value)}", field=field)
    return value


def require(body: dict, key: str, kind: type | tuple[type, ...], field: str | None = None) -> Any:
    name = field or key
    if key not in body:
        raise RequestError(f"{name}: field required", field=name)
    return expect(body[key], kind, name)


def optional(body: dict, key: str, kind: type | tuple[type, ...], field: str | None = None) -> Any:
    """`body[key]` if it has the JSON type `kind`, None where absent or null; else a 400 naming `field`."""
    value = body.get(key)
    return None if value is None else expect(value, kind, field or key)


def typed_tool(tool: Any, field: str) -> dict:
    """A tool definition keyed by `type` (Responses, Interactions): a function tool must name itself."""
    expect(tool, dict, field)
    require(tool, "type", str, f"{field}.type")
    if tool["type"] == "function":
        require(tool, "name", str, f"{field}.name")
    return tool


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return _TYPE_NAMES.get(type(value), type(value).__name__)
