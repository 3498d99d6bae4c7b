"""Small helpers shared by the test suites."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(ready: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `ready` until it is true; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(0.05)
