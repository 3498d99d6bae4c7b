"""Helpers for the real services the suites start: servers in a thread, child processes on a free port,
and waiting on a condition (never on a clock)."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx
import uvicorn


def free_port() -> int:
    """A port free a moment ago, for a child that can only be told a number: start it with
    `start_on_free_port`, which tries another port if someone else took this one first."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def refusing_port() -> Iterator[int]:
    """A port bound but never listening: every connection to it is refused, and no other process can
    start listening on it while the test runs (unlike a port found free and let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


# The least a wait gives a condition before failing: the timeouts callers name were written for an idle
# machine, and a loaded 2-core CI runner can take many times longer to write a ledger record or start a
# server. A wait costs only as long as its condition takes, so a generous floor makes no test slower.
MIN_WAIT_S = 60.0


def wait_until(ready: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `ready` until it is true; fail with `what` after `timeout` seconds (at least MIN_WAIT_S)."""
    timeout = max(timeout, MIN_WAIT_S)
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(0.05)


def http_ok(url: str) -> bool:
    """True once `url` answers 200 (a health check)."""
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def start_on_free_port(start: Callable[[int], subprocess.Popen], ready: Callable[[int], bool], what: str,
                       timeout: float = 60, attempts: int = 5) -> tuple[subprocess.Popen, int]:
    """Start a child process on a free port and wait until `ready(port)`.

    The port is free when chosen but not held, so another process can bind it first; the child then
    exits (address in use) and this starts it again on another port, instead of failing the test."""
    for _ in range(attempts):
        port = free_port()
        proc = start(port)
        deadline = time.monotonic() + timeout
        while not ready(port):
            if proc.poll() is not None:
                break
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait(10)
                raise TimeoutError(f"{what} was not ready within {timeout:.0f} s")
            time.sleep(0.05)
        else:
            return proc, port
    raise RuntimeError(f"{what} exited before it was ready, {attempts} times (exit code {proc.returncode})")


class ServerThread:
    """An ASGI app under a real uvicorn server in a background thread, on a socket bound before the
    server starts (port 0 unless given), so no other process can take its port."""

    def __init__(self, app, port: int | None = None, log_level: str = "warning") -> None:
        self.socket = socket.socket()
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(("127.0.0.1", port or 0))
        self.port = self.socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level=log_level, lifespan="on",
                                access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        # An app whose start loads a model (the bundled local backend) takes minutes on a loaded 2-core runner.
        wait_until(lambda: self.server.started or not self.thread.is_alive(), 300, f"server on {self.port} started")
        if not self.server.started:
            raise RuntimeError(f"server on {self.port} did not start")
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        self.socket.close()


def empty_postgres_ledger(url: str) -> str:
    """`url` with the shared ledger's tables of an earlier test dropped; returns `url`."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for table in ("prefixgate_requests", "prefixgate_rollups", "prefixgate_rollup_hist", "prefixgate_cursors",
                      "prefixgate_tenant_rows_pending"):
            conn.execute(f"DROP TABLE IF EXISTS {table}")
    return url
