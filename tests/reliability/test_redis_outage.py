"""Redis goes away twice (frozen with SIGSTOP: every call times out; then stopped: every connection is
refused) while callers keep sending: the gateway answers every request from local state, and once Redis
is back the shared ledger stream, totals and budget counters hold exactly what the replica served."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time

import httpx
import pytest
import redis

from prefixgate.gateway.app import create_app
from prefixgate.ledger import STREAM, TOTALS, read_records
from prefixgate.ledger_rollup import picodollars
from prefixgate.policies import hash_key
from prefixgate.policies.limits import nanodollars
from tests.gateway.support_gateway import ServerThread, policy_for, settings_for
from tests.reliability.support_figures import report
from tests.reliability.support_upstream import Tap, mock_upstream
from tests.support_services import start_on_free_port, wait_until

KEY = "pg-outage-key-0001"
POLICY = {"routes": [{"name": "chat", "models": ["gpt-*"], "retry": {"attempts": 1, "timeout_s": 5},
                      "targets": [{"upstream": "openai"}]}],
          "keys": [{"name": "team", "tenant": "acme", "key_sha256": hash_key(KEY),
                    "budget": {"usd": 1000, "period": "total"},
                    "rate_limit": {"requests_per_minute": 100000}}]}


class RedisServer:
    """A redis-server of this test's own (append-only, so a restart keeps its data), stoppable at will."""

    def __init__(self, workdir) -> None:
        self.port: int | None = None
        self.url = ""
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    def launch(self, port: int) -> subprocess.Popen:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed; `make test` installs it")
        return subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                 "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.workdir)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start(self) -> None:
        """First start on a free port; a restart comes back on the same one (the gateway knows that URL)."""
        if self.port is None:
            self.proc, self.port = start_on_free_port(self.launch, self._ping, "redis-server")
            self.url = f"redis://127.0.0.1:{self.port}/0"
            return
        self.proc = self.launch(self.port)
        wait_until(self.answers, 30, "redis-server answering")

    def answers(self) -> bool:
        return self._ping(self.port)

    @staticmethod
    def _ping(port: int) -> bool:
        try:
            return redis.Redis.from_url(f"redis://127.0.0.1:{port}/0", socket_timeout=0.2).ping()
        except redis.RedisError:
            return False

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def ask(url: str, seconds: float, at_least: int = 10) -> list[httpx.Response]:
    """Requests one after another for `seconds` (longer than the gateway's 1 s wait before retrying Redis)
    and at least `at_least` of them: on a slow runner a phase still holds enough requests to judge."""
    out = []
    deadline = time.monotonic() + seconds
    with httpx.Client(base_url=url, timeout=30, headers={"authorization": f"Bearer {KEY}"}) as client:
        while time.monotonic() < deadline or len(out) < at_least:
            out.append(client.post("/v1/chat/completions", json={"model": "gpt-5.4-mini", "messages": [
                {"role": "system", "content": "You answer questions about parcels. " * 20},
                {"role": "user", "content": f"Where is parcel {len(out)}?"}]}))
            time.sleep(0.05)
    return out


# docs/reliability.md: "A frozen Redis costs a request a 0.5 s timeout only if the request was calling it when it
# froze." A request that waited on Redis took at least that timeout; one that did not is far quicker.
REDIS_TIMEOUT_S = 0.5


def test_gateway_serves_through_a_redis_outage_and_resyncs(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-outage-openai-secret")
    server = RedisServer(tmp_path)
    server.start()
    shared = redis.Redis.from_url(server.url)
    phases = {}
    try:
        with ServerThread(mock_upstream({"faults": []}, Tap())) as up:
            settings = settings_for(up.url, tmp_path, redis_url=server.url)
            app = create_app(settings, policy=policy_for(settings, POLICY))
            with ServerThread(app) as gw:
                def phase(name: str, seconds: float) -> list[httpx.Response]:
                    answers = ask(gw.url, seconds)
                    latencies = sorted(r.elapsed.total_seconds() * 1000 for r in answers)
                    assert [r.status_code for r in answers] == [200] * len(answers), [
                        r.text for r in answers if r.status_code != 200]
                    phases[name] = {"requests": len(answers), "errors": 0, "max_ms": round(latencies[-1], 1),
                                    "p50_ms": round(latencies[len(latencies) // 2], 1)}
                    return answers

                phase("redis up", 1.5)
                proxy = app.state.proxy
                # The last request settled (its spend added, its hold released): no call in flight when Redis freezes.
                wait_until(lambda: not proxy.limits.reserved, 30, "the last request settled")
                failures = proxy.counters.window.failures
                server.proc.send_signal(signal.SIGSTOP)       # frozen: calls time out
                try:
                    started = time.monotonic()
                    frozen = phase("redis frozen (timeouts)", 2.5)
                    spent = time.monotonic() - started
                finally:
                    server.proc.send_signal(signal.SIGCONT)
                slow = [r.elapsed.total_seconds() >= REDIS_TIMEOUT_S for r in frozen]
                # The requests after the one that waited (sent 50 ms apart) count in memory, so no two requests in a
                # row wait, and at most one per second does; after each window the probe's ping, not a request,
                # tries Redis: the budget counters called it once all the freeze (they used to once a window).
                assert any(slow) and not any(a and b for a, b in zip(slow[:-1], slow[1:], strict=True)), [
                    round(r.elapsed.total_seconds(), 2) for r in frozen]
                assert sum(slow) <= int(spent) + 1
                assert proxy.counters.window.failures - failures == 1
                phase("redis back", 2)
                server.stop()                                  # gone: connections refused
                phase("redis stopped (refused)", 2.5)
                server.start()
                phase("redis restarted", 2)
                served = sum(p["requests"] for p in phases.values())
                assert proxy.counters.outages >= 2
                records = read_records(settings.ledger_path)
                assert len(records) == served

                # The shared copy catches up: every record once, totals and budget equal to the ledger's.
                # The totals hash is updated with each stream entry; wait for both, not for a clock.
                wait_until(lambda: shared.xlen(STREAM) == served
                           and int(shared.hget(TOTALS, "requests") or 0) == served, 30, "ledger copy resynced")
                ids = [__import__("json").loads(e[b"record"])["id"] for _, e in shared.xrange(STREAM)]
                assert sorted(ids) == sorted(r["id"] for r in records)
                totals = shared.hgetall(TOTALS)
                assert int(totals[b"requests"]) == served
                assert int(totals[b"cache_read_tokens"]) == sum(r["cache_read"] for r in records)
                fleet = int(totals.get(b"cost_usd", 0)) * 10**12 + int(totals[b"cost_picousd"])
                assert fleet == sum(picodollars(r["cost_usd"]) for r in records)
                # Budget spend counted while Redis was away is added once it answers again (on the next use).
                ask(gw.url, 1)
                wait_until(lambda: not proxy.counters.backlog, 30, "counter backlog pushed")
                records = read_records(settings.ledger_path)
                # Spend counts in whole nanodollars, each request's cost rounded up (policies/limits.py).
                wait_until(lambda: float(shared.get("prefixgate:counter:spend:team:all") or 0)
                           == sum(nanodollars(r["cost_usd"]) for r in records), 30, "budget resynced")
                # The planner's learned state for the tenant's route is shared again.
                wait_until(lambda: any(k.startswith(b"prefixgate:route:tenant:acme/") for k in shared.keys("prefixgate:route:*")),
                           30, "planner state published")
    finally:
        if server.proc.poll() is None:
            server.stop()
    report("redis_outage", {"phases": phases, "duplicates": 0, "missing": 0})
