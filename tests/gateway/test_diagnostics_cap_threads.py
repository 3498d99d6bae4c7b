"""A route's `diagnostics_per_minute` holds when requests are attached on several worker threads at once (big
bodies are planned off the event loop): however many threads take the route's allowance in the same minute,
no more than the cap carry the diagnostics field."""

from __future__ import annotations

import sys
import threading
import time
from types import SimpleNamespace

import pytest

from prefixgate.config import Settings
from prefixgate.dialects import WIRE_FORMATS
from prefixgate.gateway.diagnostics import ProviderDiagnostics
from prefixgate.ir import Conversation
from prefixgate.policies import Policy
from prefixgate.policies.load import builtin_upstreams
from prefixgate.providers.rules import load_catalog

CAP = 50                # diagnostics_per_minute, typed into the route below
THREADS, TURNS = 8, 100
MODEL = "claude-sonnet-5-5"


def frozen_clock() -> float:
    """One minute's allowance, never refilled; reading it lets other threads run, as any call may."""
    time.sleep(0)
    return 1000.0


@pytest.fixture
def tiny_switch_interval():
    # The interpreter switches threads every 5 ms by default; every microsecond makes any unlocked
    # read-modify-write show within a few hundred calls.
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_threads_taking_one_routes_allowance_never_pass_its_cap(tiny_switch_interval):
    upstreams = builtin_upstreams(Settings(ledger_path=":memory:"))
    route = Policy.from_dict({"routes": [{"name": "capped", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}],
                                          "diagnostics_per_minute": CAP}]}, upstreams).routes[0]
    catalog = load_catalog()
    for trial in range(5):
        diagnostics = ProviderDiagnostics(catalog, clock=frozen_clock)
        carried: list[int] = []
        start = threading.Barrier(THREADS)

        def hammer(diagnostics: ProviderDiagnostics = diagnostics, carried: list[int] = carried,
                   start: threading.Barrier = start) -> None:
            start.wait()
            n = 0
            for _ in range(TURNS):
                conv = Conversation(dialect="anthropic", model=MODEL, segments=[])
                call = SimpleNamespace(caller=SimpleNamespace(key=None), route=route, mode="auto", conv=conv)
                ask = diagnostics.attach(call, upstreams["anthropic"], WIRE_FORMATS["anthropic"], MODEL, conv, "sk-ant-k")  # type: ignore[arg-type]
                n += bool(ask.fields)
            carried.append(n)

        threads = [threading.Thread(target=hammer) for _ in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(carried) == CAP, f"trial {trial}: {sum(carried)} requests carried diagnostics, cap {CAP}"
