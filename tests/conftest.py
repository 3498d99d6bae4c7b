"""Shared fixtures: real services the tests drive (redis-server, a PostgreSQL cluster), started here and
stopped after."""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support_memory import give_memory_back
from tests.support_services import free_port, start_on_free_port, wait_until

# Parsed values that requests share are frozen under test (`ir.guard_shared`), here and in the servers tests start.
os.environ.setdefault("PREFIXGATE_GUARD_SHARED", "1")
from prefixgate.ir import guard_shared  # noqa: E402 -- after the variable, for the servers it starts

guard_shared()

# The mock providers refuse a model from its retirement date (mock/retired.py) by their own calendar, pinned here
# (and in the mocks tests start as processes) so that the suite answers the same after a model's shutdown day.
os.environ.setdefault("PREFIXGATE_MOCK_TODAY", "2026-11-27")

# CI (`.ci/run`) draws the same property-test examples every run, so a red CI is always a reproducible
# regression, never a new draw; `make test` elsewhere keeps drawing fresh examples, which is how the
# fuzzers find new bugs.
# No example database there either (a fresh clone has none and writes it nowhere useful), and no deadline:
# the slow paths (real tokenizers, a loaded machine) are not what the properties are about.
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="module", autouse=True)
def memory_given_back() -> Iterator[None]:
    """After each module (and its own fixtures: models, engines, servers), the freed memory goes back to the
    system, so one process running every module peaks at the largest module, not at their sum."""
    yield
    give_memory_back()


@pytest.fixture(autouse=True)
def fresh_boto3_default_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """boto3's default session resolves AWS credentials once and keeps them for the process, so a
    `boto3.client(...)` in one test signed with whatever keys the first such test had set (a session token
    left from another test made Bedrock's mock answer "the security token is invalid"): each test starts
    with none, so a client reads the environment the test set."""
    boto3 = sys.modules.get("boto3")
    if boto3 is not None:
        monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)


@pytest.fixture(autouse=True)
def fresh_redis_outages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every client of one Redis server in a process rests together after a failure (`prefixgate.redis_outage`):
    a test that made the shared test server's clients fail must not leave the next test's resting."""
    from prefixgate import redis_outage

    monkeypatch.setattr(redis_outage, "_OUTAGES", {})


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


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

    proc, port = start_on_free_port(launch, _listening, "redis-server accepting connections")
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


def _postgres_bin(name: str) -> str | None:
    """A PostgreSQL server program: on PATH, or where Debian's `postgresql` package puts it."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return versions[-1] if versions else None


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL cluster (initdb + pg_ctl in a temp dir, installed by `make test`) on a free
    port, trust auth on 127.0.0.1 only, gone after the session."""
    initdb, pg_ctl = _postgres_bin("initdb"), _postgres_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.fail("PostgreSQL is not installed; `make test` installs it (apt-get install postgresql)")
    # Not under pytest's temp dir: as root that is private to root, and initdb and the server refuse to
    # run as root, so they run as the package's `postgres` user in a directory of its own.
    workdir = Path(tempfile.mkdtemp(prefix="prefixgate-postgres-"))
    data = workdir / "data"
    as_user: list[str] = []
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(workdir, "postgres")
    port = free_port()
    subprocess.run([*as_user, initdb, "-D", str(data), "-U", "prefixgate", "--auth=trust", "-E", "UTF8", "--no-sync"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    options = f"-p {port} -c listen_addresses=127.0.0.1 -k {workdir} -c fsync=off"
    subprocess.run([*as_user, pg_ctl, "-D", str(data), "-o", options, "-l", str(workdir / "log"), "-w", "start"],
                   check=True, stdout=subprocess.DEVNULL)

    wait_until(lambda: _listening(port), 20, "postgres accepting connections")
    yield f"postgresql://prefixgate@127.0.0.1:{port}/postgres"
    subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], stdout=subprocess.DEVNULL)
    shutil.rmtree(workdir, ignore_errors=True)
