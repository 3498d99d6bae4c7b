"""How often the gateway process runs Python's cyclic garbage collector.

Every request builds and drops thousands of container objects (the parsed body, its segments and blocks,
the planner's copy, the encoded body), nearly all freed by reference counting the moment the answer goes.
With CPython's default first threshold (700 net allocations), a 100k-token agent request still triggers
many young collections while its objects are alive; they find no garbage, promote the objects, and so
bring on full collections that walk every long-lived object (the segment memo, the app): measured on
`bench/gateway.py`'s agent100k, about a sixth of the CPU per request and pauses past 100 ms at p99.
A first threshold above what one request keeps alive lets reference counting do its work; cycles are
still collected, once that many more containers have been made than freed.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000


def collect_less() -> None:
    """Raise the young generation's threshold (never lower one already set higher)."""
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)
