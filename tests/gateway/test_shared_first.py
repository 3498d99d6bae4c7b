"""The request whose answer waits for its shared writes is the context's only while it is handled."""

from __future__ import annotations

import asyncio

from prefixgate.gateway import shared_first
from prefixgate.gateway.shared_first import started, waiting_for_shared_writes


def test_a_request_is_no_longer_the_contexts_once_its_handling_ends():
    async def run() -> None:
        sent: list[dict] = []

        async def send(message: dict) -> None:
            sent.append(message)
        with waiting_for_shared_writes(send) as sending:
            handled = shared_first._STARTED.get()
            write = asyncio.get_running_loop().create_task(asyncio.sleep(0))
            started(write)
            await sending({"type": "http.response.start", "status": 200, "headers": []})
        assert handled is not None and not handled.writes and write.done()    # the answer waited for it
        assert shared_first._STARTED.get() is None
        started(asyncio.get_running_loop().create_task(asyncio.sleep(0)))      # after it: nobody's
        assert not handled.writes
    asyncio.run(run())
