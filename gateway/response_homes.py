"""Where each Responses API response lives: the upstream that answered it.

A `resp_...` id belongs to the upstream organisation (and key) that created it, so a follow-up naming it
(`previous_response_id`, GET, DELETE, `input_items`, `cancel`) must go back there or it 404s. The gateway
remembers id -> upstream for the responses it relays, bounded (oldest out first); with several replicas
of one upstream, chained requests are pinned to the replica that holds the chain. In memory per gateway
process: behind a load balancer without Redis a follow-up that lands on another replica falls back to
the route's normal choice (which, for one upstream, is the same place).
"""

from __future__ import annotations

from collections import OrderedDict

MAX_REMEMBERED = 100_000


class ResponseHomes:
    def __init__(self, limit: int = MAX_REMEMBERED) -> None:
        self.limit = limit
        self._homes: OrderedDict[str, str] = OrderedDict()

    def remember(self, response_id: object, upstream: str) -> None:
        if not isinstance(response_id, str) or not response_id:
            return
        self._homes[response_id] = upstream
        self._homes.move_to_end(response_id)
        while len(self._homes) > self.limit:
            self._homes.popitem(last=False)

    def home_of(self, response_id: object) -> str | None:
        return self._homes.get(response_id) if isinstance(response_id, str) else None
