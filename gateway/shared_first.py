"""An answer starts (and a stream ends) only once the Redis writes its request started are made: a caller behind
a load balancer may send its follow-up (a `previous_response_id`, a file or cache it just made) at once, to
another replica, which knows the new id's owner and home only from Redis and would refuse it as nobody's.

Only requests that shared something wait, one round trip; a write Redis misses (it rests, it is slow) is left to
`SharedLater`'s own retries after at most `WAIT_S`, so an answer is never held by an outage."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from starlette.types import Message, Send

WAIT_S = 1.0    # past the Redis clients' 0.5 s socket timeout: a write that answers at all is waited for


class Started:
    """The shared writes one request's handling started, until its answer is sent."""

    def __init__(self) -> None:
        self.writes: list[asyncio.Task] = []
        self.open = True

    async def made(self) -> None:
        pending, self.writes = self.writes, []
        if pending:
            await asyncio.wait(pending, timeout=WAIT_S)


_STARTED: ContextVar[Started | None] = ContextVar("prefixgate_shared_writes", default=None)


def started(write: asyncio.Task) -> None:
    """`write` shares what the request being handled created (`SharedLater.set`): its answer waits for it. A task
    outliving its request (a worker it spawned) adds nothing to a request already answered."""
    request = _STARTED.get()
    if request is not None and request.open:
        request.writes.append(write)


@contextmanager
def waiting_for_shared_writes(send: Send) -> Iterator[Send]:
    """`send`, for the request handled inside the block, holding its answer's start and its last body part until
    the shared writes its handling started are made; the request is no longer the context's once the block ends."""
    request = Started()
    token = _STARTED.set(request)

    async def sending(message: Message) -> None:
        kind = message["type"]
        last = kind == "http.response.body" and not message.get("more_body", False)
        if request.writes and (kind == "http.response.start" or last):
            await request.made()
        if last:
            request.open = False
        await send(message)
    try:
        yield sending
    finally:
        request.open = False
        _STARTED.reset(token)
