"""`prefixgate backend` as a separate process, started the way a user starts it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support_services import http_ok, start_on_free_port


@contextmanager
def running_backend(*args: str, log: Path | None = None) -> Iterator[str]:
    """The backend's URL, serving smollm2-135m with `args` added; a start that fails fails the test with the
    tail of its log (`log`, else a temporary one)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}  # see conftest.one_cpu_thread
    log = log or Path(tempfile.mkdtemp(prefix="prefixgate-backend-")) / "backend.log"

    def launch(port: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "prefixgate.cli", "backend", "--model", "smollm2-135m",
                                 "--port", str(port), *args], env=env, stdout=subprocess.DEVNULL,
                                stderr=log.open("w"))
    try:
        proc, port = start_on_free_port(launch, lambda port: http_ok(f"http://127.0.0.1:{port}/health"),
                                        "prefixgate backend", timeout=180)
    except (TimeoutError, RuntimeError):
        pytest.fail(f"prefixgate backend did not start: {log.read_text()[-2000:]}")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(20)
