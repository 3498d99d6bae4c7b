"""Shared fixtures: real services the tests drive (redis-server), started here and stopped after."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.support_services import free_port, wait_until

# CI (`.ci/run`) draws the same property-test examples every run, so a red CI is always a reproducible
# regression, never a new draw; `make test` elsewhere keeps drawing fresh examples, which is how the
# fuzzers find new bugs.
settings.register_profile("ci", derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server on a free port (installed by `make test`), empty, gone after the session."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed; `make test` installs it (apt-get install redis-server)")
    port = free_port()
    workdir = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def accepting() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"redis-server exited with code {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return False

    wait_until(accepting, 10, "redis-server accepting connections")
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(10)
