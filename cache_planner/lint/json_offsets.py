"""Source offsets inside JSON text, for pointing a lint finding at the exact character of a prompt.

`json.loads` gives values without positions. Findings are rare, so instead of a position-keeping
parser for every file we walk the raw text along one path only when a finding needs a location:
`offset(text, ("messages", 0, "content"), 12)` is where the 13th character of that string sits in
`text`. A path that does not match (it cannot, for text we parsed, but be defensive) gives the
offset of the deepest value reached.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

_WS = re.compile(r"[ \t\r\n]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_SCALAR = re.compile(r"[^,\]\}\s]*")


def offset(text: str, path: Sequence[str | int], index: int | None = None, start: int = 0) -> int:
    """Offset in `text` of the value at `path` (of its `index`-th decoded character, for a string)."""
    at = _skip_ws(text, start)
    try:
        for key in path:
            found = _member(text, at, key)
            if found is None:
                return at
            at = found
        if index is not None and at < len(text) and text[at] == '"':
            return _char_offset(text, at, index)
    except IndexError:
        pass
    return at


def _skip_ws(text: str, i: int) -> int:
    return _WS.match(text, i).end()  # type: ignore[union-attr]


def _member(text: str, at: int, key: str | int) -> int | None:
    """Offset of the value of `key` (an object key or an array index) in the container at `at`."""
    opener = text[at]
    if (opener == "{") != isinstance(key, str) or opener not in "{[":
        return None
    i = _skip_ws(text, at + 1)
    n = 0
    while i < len(text) and text[i] not in "}]":
        if opener == "{":
            m = _STRING.match(text, i)
            if m is None:
                return None
            name = _decode(m.group())
            i = _skip_ws(text, m.end())
            i = _skip_ws(text, i + 1)  # the colon
            if name == key:
                return i
        elif n == key:
            return i
        i = _skip_ws(text, _skip_value(text, i))
        if i < len(text) and text[i] == ",":
            i = _skip_ws(text, i + 1)
        n += 1
    return None


def _skip_value(text: str, i: int) -> int:
    ch = text[i]
    if ch == '"':
        return _STRING.match(text, i).end()  # type: ignore[union-attr]
    if ch not in "{[":
        return _SCALAR.match(text, i).end()  # type: ignore[union-attr]
    depth = 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            i = _STRING.match(text, i).end()  # type: ignore[union-attr]
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def _decode(token: str) -> str:
    return json.loads(token)


def _char_offset(text: str, quote: int, index: int) -> int:
    """Offset of decoded character `index` of the JSON string whose opening quote is at `quote`."""
    i, n = quote + 1, 0
    while n < index and text[i] != '"':
        if text[i] != "\\":
            i += 1
        elif text[i + 1] != "u":
            i += 2
        else:
            # A surrogate pair is two escapes but one decoded character.
            pair = 0xD800 <= int(text[i + 2:i + 6], 16) < 0xDC00 and text[i + 6:i + 8] == "\\u"
            i += 12 if pair else 6
        n += 1
    return i
