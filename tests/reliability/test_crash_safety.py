"""kill -9 during a burst: the SQLite ledger opens cleanly afterwards and holds every request whose
answer a client received in full (the record is committed before the answer's last byte leaves), and
the restarted gateway serves on the same file."""

from __future__ import annotations

import asyncio
import os
import sqlite3

import httpx
import pytest

from prefixgate.ledger import read_records
from tests.gateway.support_gateway import ServerThread
from tests.reliability.support_figures import report
from tests.reliability.support_gateway_process import GatewayProcess
from tests.reliability.support_upstream import Tap, ask, mock_upstream
from tests.support_services import wait_until

# Slow streams keep requests in flight at the moment of the kill.
FAULTS = {"faults": [{"fault": "event_delay=0.01", "model": "gpt-5.4"}]}
WORKERS = 32
# Kill once this many answers have completed (the soak run raises it), after a warm-up request.
KILL_AFTER = int(os.environ.get("PREFIXGATE_CRASH_KILL_AFTER", "150"))
KILLS = int(os.environ.get("PREFIXGATE_CRASH_KILLS", "2"))


async def burst(url: str, completed: set[str], stop: asyncio.Event, sent: list[int]) -> None:
    """Requests from WORKERS clients until `stop`; ids of answers received in full go into `completed`."""
    specs = [("openai", "gpt-5.4", True), ("openai", "gpt-5.4-mini", False), ("anthropic", "claude-haiku-4-5", True),
             ("anthropic", "claude-haiku-4-5", False)]
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(10)) as client:
        async def worker(i: int) -> None:
            n = i
            while not stop.is_set():
                n += 1
                sent[0] += 1
                try:
                    seen = await ask(client, *specs[n % len(specs)])
                except httpx.HTTPError:
                    continue        # the gateway died under this request
                if seen.completed:
                    completed.add(seen.request_id)
        await asyncio.gather(*(worker(i) for i in range(WORKERS)))


def kill_during_burst(gw: GatewayProcess) -> tuple[set[str], int]:
    """Ids of the answers completed before the kill, and how many requests had been sent by then."""
    completed: set[str] = set()
    sent = [0]

    async def run() -> int:
        async with httpx.AsyncClient(base_url=gw.url, timeout=10) as client:
            await ask(client, "openai", "gpt-5.4-mini", False)
        stop = asyncio.Event()
        task = asyncio.ensure_future(burst(gw.url, completed, stop, sent))
        # No clock here: the kill waits for the completions however slow the machine (pytest's timeout
        # bounds a hung gateway); the assertion below says if the burst ended short of them.
        while len(completed) < KILL_AFTER and not task.done():
            await asyncio.sleep(0.01)
        gw.kill9()                       # mid-burst: requests are in flight
        sent_at_kill, done_at_kill = sent[0], set(completed)
        await asyncio.sleep(0.3)
        stop.set()
        await asyncio.wait_for(task, 30)
        # An answer that completed in the instant of the kill was sent in full before it: it counts too.
        assert completed >= done_at_kill
        return sent_at_kill

    return completed, asyncio.run(run())


@pytest.mark.slow
def test_kill_9_loses_no_completed_request(tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    tap = Tap()
    figures = []
    with ServerThread(mock_upstream(FAULTS, tap)) as up:
        for round_ in range(KILLS):
            before = {r["id"] for r in read_records(str(ledger))} if ledger.exists() else set()
            gw = GatewayProcess(up.url, ledger).start()
            try:
                completed, sent = kill_during_burst(gw)
            finally:
                gw.stop()
            assert gw.proc.returncode == -9
            db = sqlite3.connect(ledger)
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            db.close()
            ids = {r["id"] for r in read_records(str(ledger))} - before
            missing = completed - ids
            assert len(completed) >= KILL_AFTER and not missing, f"{len(missing)} completed requests missing after kill -9"
            figures.append({"round": round_, "requests_sent_before_kill": sent, "completed_before_kill": len(completed),
                            "recorded": len(ids), "recorded_not_completed": len(ids - completed), "missing": 0})
        # The gateway comes back on the same file and keeps recording.
        with GatewayProcess(up.url, ledger) as gw:
            r = httpx.post(gw.url + "/v1/chat/completions", timeout=60,
                           json={"model": "gpt-5.4-mini", "messages": [{"role": "user", "content": "after the crash"}]})
            assert r.status_code == 200
            rid = r.headers["x-prefixgate-request-id"]
            wait_until(lambda: rid in {x["id"] for x in read_records(str(ledger))}, 30, "the new request recorded")
    report("crash", {"kills": figures})
