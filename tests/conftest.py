"""Shared fixtures: real services the tests drive (redis-server), started here and stopped after."""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.support_services import start_on_free_port

# CI (`.ci/run`) draws the same property-test examples every run, so a red CI is always a reproducible
# regression, never a new draw; `make test` elsewhere keeps drawing fresh examples, which is how the
# fuzzers find new bugs.
# No example database there either (a fresh clone has none and writes it nowhere useful), and no deadline:
# the slow paths (real tokenizers, a loaded machine) are not what the properties are about.
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server (installed by `make test`) on a free port, gone after the session: its base URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed; `make test` installs it (apt-get install redis-server)")
    workdir = tmp_path_factory.mktemp("redis")

    def launch(port: int) -> subprocess.Popen:
        return subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                                 "no", "--databases", str(DATABASES), "--dir", str(workdir)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def accepting(port: int) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return False

    proc, port = start_on_free_port(launch, accepting, "redis-server accepting connections")
    yield f"redis://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


DATABASES = 1000
_next_database = itertools.count()


@pytest.fixture
def redis_url(redis_server: str) -> str:
    """A Redis database of this test's own, empty: tests share the server, never each other's keys."""
    number = next(_next_database)
    assert number < DATABASES, "more Redis tests than databases: raise DATABASES"
    return f"{redis_server}/{number}"
