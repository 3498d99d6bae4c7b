"""Copying ledger rows from a replica's SQLite file to a store every replica shares (Redis, Postgres).

The copy is a cursor over SQLite rowids. How far it got is stored in the shared store and moved in the
same transaction that adds the rows, which first checks the cursor is where this replica thinks it is:
a copy that timed out on our side but ran on the store's (a frozen server catching up) is then not
applied twice, and a crash or outage can neither skip rows nor count them twice. While the store is
down the rows wait in SQLite (bounded by disk, not memory; retention never prunes rows not copied yet)
and go over when it is back.
"""

from __future__ import annotations

import logging
import sqlite3
import time
import uuid

from prefixgate.ledger import COLUMNS, decode_row

BATCH = 512
MAX_BATCHES_PER_TICK = 20
RETRY_S = (0.2, 5.0)            # back-off after a failed copy: first wait, longest wait

log = logging.getLogger("prefixgate.ledger")


class RowCopier:
    """The cursor and back-off; a subclass names its store and applies a batch (`_apply`)."""

    store = ""
    errors: tuple[type[BaseException], ...] = (OSError,)

    def __init__(self, path: str) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10, uri=True)
        self._db.execute("CREATE TABLE IF NOT EXISTS ledger_meta (key TEXT PRIMARY KEY, value TEXT)")
        self._db.execute("INSERT OR IGNORE INTO ledger_meta VALUES ('ledger_id', ?)", (uuid.uuid4().hex,))
        self.ledger_id = self._db.execute("SELECT value FROM ledger_meta WHERE key = 'ledger_id'").fetchone()[0]
        self._opened_at = self._db.execute("SELECT coalesce(max(rowid), 0) FROM requests").fetchone()[0]
        self._position: int | None = None
        self._retry_at = 0.0
        self._wait = RETRY_S[0]
        self.failures = 0           # copies that failed (store down); the rows stayed in SQLite
        self._down_since: float | None = None

    def first_configured(self, key: str) -> int:
        """The last rowid when this store was first configured for this ledger file (kept in the file, so a run
        killed before its first copy does not move it): a store new to the ledger is copied from there."""
        self._db.execute("INSERT OR IGNORE INTO ledger_meta VALUES (?, ?)", (key, str(self._opened_at)))
        return int(self._db.execute("SELECT value FROM ledger_meta WHERE key = ?", (key,)).fetchone()[0])

    @property
    def position(self) -> int:
        """The last rowid copied (0 until the first copy: nothing may be pruned yet)."""
        return self._position or 0

    def push(self, final: bool = False) -> int:
        """Copy what SQLite holds beyond the cursor; returns the rows copied. Never raises."""
        now = time.monotonic()
        if not final and (now < self._retry_at or self.resting()):
            return 0
        copied = 0
        try:
            if self._position is None:
                self._position = self._stored_position()
            for _ in range(MAX_BATCHES_PER_TICK if not final else 1_000_000):
                n = self._copy_batch()
                copied += n
                if n < BATCH:
                    break
        except self.errors as e:
            self.failures += 1
            if self._down_since is None:
                self._down_since = now
                log.warning("%s ledger copy failed (%s); rows wait in SQLite and go over when it is back",
                            self.store, type(e).__name__)
            self._retry_at = now + self._wait
            self._wait = min(self._wait * 2, RETRY_S[1])
            return copied
        if self._down_since is not None:
            log.warning("%s ledger copy resumed after %.1f s", self.store, now - self._down_since)
            self._down_since = None
        self._wait = RETRY_S[0]
        return copied

    def _copy_batch(self) -> int:
        # SQL text: column names are LedgerRecord's fields, the batch size a constant; the position is bound.
        rows = self._db.execute(f"SELECT rowid, {', '.join(COLUMNS)} FROM requests WHERE rowid > ? ORDER BY rowid "  # nosec B608
                                f"LIMIT {BATCH}", (self._position,)).fetchall()
        if not rows:
            return 0
        stands = self._apply(self._position, rows[-1][0], [row[1:] for row in rows])
        self._position = stands
        # A cursor found elsewhere (a timed-out copy that did run, another worker on this file): go on from it.
        return len(rows) if stands == rows[-1][0] else BATCH

    @staticmethod
    def decode(rows: list[tuple]) -> list[dict]:
        return [decode_row(dict(zip(COLUMNS, row, strict=True))) for row in rows]

    def resting(self) -> bool:
        """The store is left alone for now (another client of it found it down): the rows wait, a final copy
        (the replica stopping) tries all the same."""
        return False

    def _stored_position(self) -> int:
        """The cursor as the store has it (a ledger new to the store: see the subclass)."""
        raise NotImplementedError

    def _apply(self, expected: int, new: int, rows: list[tuple]) -> int:
        """Add `rows` (SQLite column values) and move the cursor from `expected` to `new` in one
        transaction, unless the store's cursor is not at `expected`; returns where the cursor stands."""
        raise NotImplementedError

    def prune(self, records_before: float, rollups_before: float) -> None:
        """Retention on the shared store: records and minute rollups before `records_before`, hour
        rollups before `rollups_before`. Nothing by default (Redis's stream is capped by length)."""

    def close(self) -> None:
        self._db.close()
