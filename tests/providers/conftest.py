"""A real mock-providers server on a free port, shared by the SDK tests of this folder."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from prefixgate.providers.mock.faults import FaultPlan
from prefixgate.providers.mock.server import MockContext, create_app


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def mock_server() -> Iterator[tuple[str, MockContext]]:
    """(base URL, context) of a running server; tests use distinct API keys to get fresh caches."""
    ctx = MockContext(faults=FaultPlan.from_config({"faults": [
        {"fault": "status=503", "path": "/v1/chat/completions", "model": "gpt-4o-mini", "every": 2, "times": 1},
    ]}))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(ctx), host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("mock-providers server did not start")
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}", ctx
    server.should_exit = True
    thread.join(timeout=10)
