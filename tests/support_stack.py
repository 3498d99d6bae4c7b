"""`prefixgate mock-providers` and `prefixgate serve` as separate processes, the way a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support import free_port, wait_until


def healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def running_stack(tmp: Path, env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """(gateway URL, mock-providers URL), the gateway's hosted upstreams pointed at the mock; `env` is
    added to the gateway's environment. Logs go to `tmp`; a server that does not start fails the test
    with its log's tail."""
    mock_port, gw_port = free_port(), free_port()
    mock_url, gw_url = f"http://127.0.0.1:{mock_port}", f"http://127.0.0.1:{gw_port}"
    upstreams = {f"PREFIXGATE_{p}_BASE_URL": mock_url for p in ("OPENAI", "ANTHROPIC", "GEMINI")}
    procs = []
    for args, extra, log in ((["mock-providers", "--port", str(mock_port)], {}, "mock.log"),
                             (["serve", "--port", str(gw_port)], {**upstreams, **env}, "gateway.log")):
        procs.append(subprocess.Popen([sys.executable, "-m", "prefixgate.cli", *args], env={**os.environ, **extra},
                                      stdout=(tmp / log).open("w"), stderr=subprocess.STDOUT))
    try:
        for url, log in ((mock_url, "mock.log"), (gw_url, "gateway.log")):
            try:
                wait_until(lambda u=url: healthy(u), 60, f"{url}/health")
            except TimeoutError:
                pytest.fail((tmp / log).read_text()[-3000:])
        yield gw_url, mock_url
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(20)
