"""Where the dashboard reads ledger records: the replica's SQLite file, or the Redis stream that every
replica writes when Redis is configured (so the page shows the whole fleet, whichever replica serves it)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import fields
from typing import Protocol

from prefixgate.ledger import _JSON, COLUMNS, STREAM, LedgerRecord

_KNOWN = {f.name for f in fields(LedgerRecord)}
# Stream ids are Redis's clock at write time; a replica's clock may differ from Redis's by this much.
CLOCK_SLACK_MS = 60_000
PAGE = 5000


class LedgerSource(Protocol):
    def records(self, since: float, until: float) -> list[LedgerRecord]:
        """Records with `since <= ts < until`, oldest first."""
        ...


def _record(data: dict) -> LedgerRecord:
    # Records written by a newer or older gateway version: unknown fields dropped, missing ones defaulted.
    return LedgerRecord(**{k: v for k, v in data.items() if k in _KNOWN})


class SqliteSource:
    def __init__(self, path: str) -> None:
        self.path = path

    def records(self, since: float, until: float) -> list[LedgerRecord]:
        try:
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        except sqlite3.OperationalError:
            return []   # no request has been recorded yet
        try:
            have = {row[1] for row in db.execute("PRAGMA table_info(requests)")}
            cols = [c for c in COLUMNS if c in have]
            rows = db.execute(f"SELECT {', '.join(cols)} FROM requests WHERE ts >= ? AND ts < ? ORDER BY ts",
                              (since, until)).fetchall()
        except sqlite3.OperationalError:
            return []
        finally:
            db.close()
        out = []
        for row in rows:
            data = dict(zip(cols, row, strict=True))
            for key in _JSON:
                if key in data:
                    data[key] = json.loads(data[key]) if data[key] is not None else ({} if key == "cache_writes" else [])
            data["stream"] = bool(data.get("stream"))
            out.append(_record(data))
        return out


class RedisSource:
    def __init__(self, url: str) -> None:
        import redis

        self._redis = redis.Redis.from_url(url)

    def records(self, since: float, until: float) -> list[LedgerRecord]:
        out: list[LedgerRecord] = []
        start = f"{max(0, int(since * 1000) - CLOCK_SLACK_MS)}"
        end = f"{int(until * 1000) + CLOCK_SLACK_MS}"
        while True:
            entries = self._redis.xrange(STREAM, min=start, max=end, count=PAGE)
            for _, fields_ in entries:
                rec = _record(json.loads(fields_[b"record"]))
                if since <= rec.ts < until:
                    out.append(rec)
            if len(entries) < PAGE:
                break
            start = "(" + entries[-1][0].decode()
        out.sort(key=lambda r: r.ts)
        return out

    def close(self) -> None:
        self._redis.close()


def source_for(ledger_path: str, redis_url: str) -> SqliteSource | RedisSource:
    return RedisSource(redis_url) if redis_url else SqliteSource(ledger_path)
