"""What a remembered value holds in memory: a deep `sys.getsizeof` walk over the objects only it holds.

`weigh(value, skip)` adds up every object reachable from `value` through dicts, lists, tuples, sets and
plain objects' attributes, each once, leaving out those in `skip` (what another entry already paid for,
such as the parsed messages a resent body shares with the one it resends). getsizeof leaves out what the
allocator adds (a 16-byte alignment and a block header for each object on the heap): `OVERHEAD` adds it
back, and `OPAQUE` stands for the state of an object the walk cannot see into (a hash object's state).
Both were calibrated against tracemalloc on parsed agent bodies and their segments; tests/core/test_reuse.py
checks the estimate stays within a quarter of tracemalloc's figure.
"""

from __future__ import annotations

import sys
from typing import Any

OVERHEAD = 8            # per heap object: pymalloc rounds each to 16 bytes, half of that on average (measured)
OPAQUE = 240            # a hashlib object: its C state (sha256's is ~200 bytes) that getsizeof does not see
_CONTAINERS = (dict, list, tuple, set, frozenset)
_ATOMS = (str, bytes, int, float, bool, type(None))
_getsizeof = sys.getsizeof


def weigh(value: Any, skip: set[int] | None = None, refs: frozenset[str] = frozenset()) -> int:
    """Bytes held by `value` and everything it reaches, each object once, none whose id is in `skip`
    (which gains the ids walked, so one `skip` across several calls counts shared objects once), and not
    through objects' attributes named in `refs` (references into values another entry pays for: the parsed
    JSON a segment's blocks point at)."""
    seen = skip if skip is not None else set()
    total = 0
    stack = [value]
    pop, push, add = stack.pop, stack.append, seen.add
    while stack:
        obj = pop()
        ident = id(obj)
        if ident in seen:
            continue
        kind = type(obj)
        if kind in _ATOMS:
            if obj is None or kind is bool or (kind is int and -5 <= obj <= 256):
                continue            # shared singletons: no one entry holds them
            add(ident)
            total += _getsizeof(obj) + OVERHEAD
            continue
        add(ident)
        total += _getsizeof(obj) + OVERHEAD
        if kind is dict:
            for k, v in obj.items():
                push(k)
                push(v)
        elif kind in _CONTAINERS:
            stack.extend(obj)
        elif hasattr(obj, "__dict__"):
            attrs = obj.__dict__
            add(id(attrs))
            total += _getsizeof(attrs) + OVERHEAD
            for k, v in attrs.items():
                if k not in refs:
                    push(v)
        elif hasattr(obj, "__slots__"):
            stack.extend(getattr(obj, s) for s in obj.__slots__ if hasattr(obj, s))
        else:
            total += OPAQUE
    return total


SAMPLE = 32


def estimate(value: Any, refs: frozenset[str] = frozenset()) -> int:
    """`weigh(value)` for a long list (or a tuple of them) by a sample of its items: at most `SAMPLE` of them,
    evenly spaced, their weight scaled to the list's length. A walk over every object of a 25k-message body
    costs more than parsing it; the sample's error is that of the items' spread in size (a test checks it
    against `weigh`). Objects shared between items are counted once per item that reaches them."""
    if type(value) is tuple:
        return _getsizeof(value) + OVERHEAD + sum(estimate(v, refs) for v in value)
    if type(value) is not list or len(value) <= SAMPLE:
        return weigh(value, refs=refs)
    step = len(value) / SAMPLE
    sample = [value[int(i * step)] for i in range(SAMPLE)]
    return _getsizeof(value) + OVERHEAD + weigh(sample, refs=refs) * len(value) // SAMPLE
