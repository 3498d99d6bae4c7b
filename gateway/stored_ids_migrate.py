"""What versions before `stored_ids` kept, still read: the ledger file's `owners` ((kind, id) -> owner) and
`response_homes` (id -> upstream) tables, moved into `stored_ids` when the store opens; and their Redis keys
(`prefixgate:owner:{kind}:{id}`, `prefixgate:home:{id}`), which replicas of the older version go on writing
during a rolling upgrade, read where the new hash says nothing. And the `stored_tokens` table kept beside
`stored_ids` (b0dfe8c): its rows become the `tokens` column of their ids' rows, and it is dropped, unlike the
older tables, since the version writing it lasted hours, unreleased (a process of it still open on the file
would fail its writes there).

An old home row names no kind (a home was kept by id alone, whatever stored it): it is moved in under every
kind a wire format stores, so a follow-up of either kind finds it, as before; ids of different kinds are
apart, so the copy under the other kind is never asked for.
"""

from __future__ import annotations

import logging
import sqlite3

from prefixgate.dialects import WIRE_FORMATS

log = logging.getLogger("prefixgate.gateway")
OWNERS, HOMES, TOKENS = "owners", "response_homes", "stored_tokens"
OWNER_PREFIX, HOME_PREFIX = "prefixgate:owner:", "prefixgate:home:"


def owner_key(kind: str, ident: str) -> str:
    return f"{OWNER_PREFIX}{kind}:{ident}"


def home_key(ident: str) -> str:
    return f"{HOME_PREFIX}{ident}"


def stored_kinds() -> list[str]:
    """The kinds a stored answer is recorded under (`WireFormat.stored_kind`)."""
    return sorted({wire.stored_kind for wire in WIRE_FORMATS.values()})


def migrate(db: sqlite3.Connection) -> int:
    """Move the rows of the older tables into `stored_ids` (`db` in autocommit mode). Returns the rows read.

    The owners and homes tables are emptied, not dropped: a process of the older version still open on the same file
    keeps writing to them without an error, and what it writes is moved at the next open. A row already in
    `stored_ids` is the newer: its owner stands (one forgotten since is not owned again)."""
    present = tables_of(db)
    if TOKENS in present or "tokens" not in columns_of(db):
        tokens_into_their_rows(db)
    tables = [t for t in (OWNERS, HOMES) if t in present]
    if not tables or not any(db.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() for t in tables):  # nosec B608
        return 0
    db.execute("BEGIN IMMEDIATE")
    try:
        moved = 0
        if OWNERS in tables:
            # `WHERE true`: SQLite's INSERT ... SELECT needs it before an ON CONFLICT clause.
            db.execute("INSERT INTO stored_ids (kind, id, owner, expires) SELECT kind, id, owner, expires FROM owners "
                       "WHERE true ON CONFLICT (kind, id) DO NOTHING")
            moved += db.execute("DELETE FROM owners").rowcount
        if HOMES in tables:
            for kind in stored_kinds():
                db.execute("INSERT INTO stored_ids (kind, id, home, expires) SELECT ?, id, upstream, expires "
                           "FROM response_homes WHERE true ON CONFLICT (kind, id) DO UPDATE SET "
                           "home = coalesce(home, excluded.home), expires = max(expires, excluded.expires)", (kind,))
            moved += db.execute("DELETE FROM response_homes").rowcount
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    log.info("stored ids: %d row(s) of the older owners and response_homes tables moved into stored_ids", moved)
    return moved


def tokens_into_their_rows(db: sqlite3.Connection) -> None:
    """Give `stored_ids` its `tokens` column and move the `stored_tokens` table's rows into it, dropping that
    table: one transaction, so two replicas opening one file at once do it once (the second finds it done)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        if "tokens" not in columns_of(db):
            db.execute("ALTER TABLE stored_ids ADD COLUMN tokens INTEGER")
        moved = 0
        if TOKENS in tables_of(db):
            # One row, one expiry: the later of the two, so neither the owner nor the tokens end sooner.
            moved = db.execute("INSERT INTO stored_ids (kind, id, tokens, expires) SELECT kind, id, tokens, expires "
                               "FROM stored_tokens WHERE true ON CONFLICT (kind, id) DO UPDATE SET "
                               "tokens = excluded.tokens, expires = max(expires, excluded.expires)").rowcount
            db.execute("DROP TABLE IF EXISTS stored_tokens")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    log.info("stored ids: a tokens column; %d row(s) of the stored_tokens table moved into it", moved)


def tables_of(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def columns_of(db: sqlite3.Connection) -> set[str]:
    return {row[1] for row in db.execute("PRAGMA table_info(stored_ids)")}
