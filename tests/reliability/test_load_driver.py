"""The load driver measures what the load test claims: a stream counts as open from its response
headers to its end, so refused connections are errors and never open streams."""

from __future__ import annotations

import asyncio

from tests.reliability.support_load_driver import run_load
from tests.reliability.support_upstream import Tap, mock_upstream
from tests.support_services import ServerThread, refusing_port


def test_refused_connections_are_errors_and_never_open():
    with refusing_port() as port:
        result = asyncio.run(run_load(f"http://127.0.0.1:{port}", 20, 1.0, max_requests=20))
    assert result.peak_open == 0
    assert result.completed == 0
    assert sum(result.errors.values()) == 20, result.errors


def test_slow_streams_are_all_open_at_once():
    # ~25 events 0.1 s apart keep each stream open ~2.5 s: all 20 get their headers before any ends.
    app = mock_upstream({"faults": [{"fault": "event_delay=0.1"}]}, Tap())
    with ServerThread(app) as server:
        result = asyncio.run(run_load(server.url, 20, 0.5, max_requests=20))
    assert result.errors == {}
    assert result.completed == 20
    assert result.peak_open == 20
