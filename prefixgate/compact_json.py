"""JSON as the providers send it and as the ledger stores it: no spaces, non-ASCII text as itself."""

from __future__ import annotations

import json
from typing import Any


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def compact_bytes(value: Any) -> bytes:
    """`compact` as UTF-8, ready to send."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
