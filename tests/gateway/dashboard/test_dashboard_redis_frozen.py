"""A dashboard reading the fleet's Redis stream while Redis is frozen (SIGSTOP: connected, never answering) gets
the 503 path's error after a bounded wait. Its client set no socket timeout: redis-py 8 defaults to 5 s, but
`redis>=5` admits versions whose default is none, where the call waited for ever (red with `socket_timeout=None`)."""

from __future__ import annotations

import signal
import threading

from prefixgate.gateway.dashboard.source import UNAVAILABLE, RedisSource
from tests.gateway.test_counters_outage_memory import stoppable_redis  # noqa: F401

# Far past the source's read timeout: only a call that never returns runs into it.
GIVE_UP_S = 30


def test_a_frozen_redis_is_an_unavailable_ledger_not_a_call_that_never_returns(stoppable_redis) -> None:  # noqa: F811
    proc, url = stoppable_redis
    source = RedisSource(url)
    assert source.records(0, 1) == []          # connected: the stream is empty
    raised: list[BaseException] = []

    def read() -> None:
        try:
            source.records(0, 2e9)
        except BaseException as e:  # noqa: BLE001 - recorded for the assert
            raised.append(e)

    proc.send_signal(signal.SIGSTOP)
    try:
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(GIVE_UP_S)
    finally:
        proc.send_signal(signal.SIGCONT)
    reader.join(GIVE_UP_S)
    source.close()
    assert len(raised) == 1 and isinstance(raised[0], UNAVAILABLE), raised
