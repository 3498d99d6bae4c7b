"""The copy to the fleet's Postgres survives the connection going away mid-copy, at any point of a batch's
transaction (before, during, after its commit reached the server), without losing or double-counting a
record: a TCP relay between the ledger and a real Postgres cuts every connection after some tens or hundreds of kilobytes (a batch is about that)."""

from __future__ import annotations

import random
import socket
import threading
import time
from decimal import Decimal

import psycopg
import pytest

from prefixgate.ledger import Ledger, LedgerRecord, read_records
from prefixgate.ledger_postgres import PostgresSync
from tests.support_services import empty_postgres_ledger

RECORDS = 3000


class CuttingRelay:
    """Forwards 127.0.0.1:port to Postgres and cuts every open connection once `budget` bytes have gone
    either way since the last cut; a new budget is drawn after each cut."""

    def __init__(self, target: tuple[str, int], rng: random.Random) -> None:
        self.target, self.rng = target, rng
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.open: list[socket.socket] = []
        self.moved, self.budget, self.cuts = 0, rng.randrange(20_000, 600_000), 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self.lock:
                self.open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(4096):
                dst.sendall(data)
                with self.lock:
                    self.moved += len(data)
                    cut = self.moved >= self.budget
                    if cut:
                        self.moved, self.budget, self.cuts = 0, self.rng.randrange(20_000, 600_000), self.cuts + 1
                        doomed, self.open = self.open, []
                if cut:
                    for s in doomed:
                        _hang_up(s)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                _hang_up(s)

    def close(self) -> None:
        self.listener.close()


def _hang_up(s: socket.socket) -> None:
    # shutdown, not close alone: it sends the FIN at once and wakes the relay's other thread blocked in recv.
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()


@pytest.mark.timeout(300)
def test_cuts_mid_copy_neither_lose_nor_double_count(tmp_path, postgres_url):
    shared = empty_postgres_ledger(postgres_url)
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(path)
    now = time.time()      # recent: the ledger's retention prunes old records (as it should)
    for i in range(RECORDS):
        ledger.append(LedgerRecord(id=f"r{i}", ts=now - 3600 + i, route=f"route{i % 3}", uncached_input=i % 50,
                                   cost_usd=str(Decimal(i % 97 + 1) * Decimal("0.000001234567"))))
    ledger.close()
    host, port = psycopg.conninfo.conninfo_to_dict(shared)["host"], int(psycopg.conninfo.conninfo_to_dict(shared)["port"])
    relay = CuttingRelay((host, port), random.Random(7))
    via_relay = shared.replace(f":{port}/", f":{relay.port}/")
    sync = PostgresSync(via_relay, path)
    try:
        for _ in range(2000):
            sync.push(final=True)
            if sync.position >= RECORDS:
                break
    finally:
        sync.close()
        relay.close()
    assert relay.cuts >= 5 and sync.failures >= 1        # the connection really went away, several times
    local = read_records(path)
    with psycopg.connect(shared) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM prefixgate_requests").fetchall()]
        requests, spend = conn.execute("SELECT sum(requests), sum(spend_pico) FROM prefixgate_rollups "
                                       "WHERE res = 3600 AND dim = ''").fetchone()
    assert sorted(ids) == sorted(r["id"] for r in local) and len(ids) == RECORDS
    assert requests == RECORDS
    assert spend == sum(int(Decimal(r["cost_usd"]) * 10**12) for r in local)
