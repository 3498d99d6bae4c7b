"""JSON as the providers send it and as the ledger stores it: no spaces, non-ASCII text as itself.

orjson does the work (an agent's 400 KB body encodes in a tenth of the standard library's time); what it
refuses (integers past 64 bits, non-string keys) the standard library writes, so every value Python's
json accepts still encodes. Floats may be spelt differently from `json.dumps` (`0.00001`, not `1e-05`):
the same number. orjson writes NaN and infinities as null: request bodies never hold them (`load_body`
refuses them; they are not JSON), and no answer or record the gateway builds computes one.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def compact_bytes(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON, ready to send."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def compact(value: Any) -> str:
    return compact_bytes(value).decode()

