"""An upgrade to the one stored-ids store loses nothing the older version kept: a ledger file with its `owners`
and `response_homes` tables, the Redis keys its replicas go on writing during a rolling upgrade, and the
`stored_tokens` table kept beside `stored_ids` before its tokens were a column of their ids' rows."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest
import redis

from prefixgate.gateway.stored_ids import StoredIds

NOW = 1_000_000.0
DAY = 86400.0


@pytest.fixture
def older_ledger(tmp_path) -> str:
    """A ledger file with the two tables as the older version created and filled them (its own SQL)."""
    path = str(tmp_path / "ledger.sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS owners (kind TEXT NOT NULL, id TEXT NOT NULL, owner TEXT NOT NULL, "
               "expires REAL NOT NULL, PRIMARY KEY (kind, id))")
    db.execute("CREATE INDEX IF NOT EXISTS owners_expires ON owners (expires)")
    db.execute("CREATE TABLE IF NOT EXISTS response_homes (id TEXT PRIMARY KEY, upstream TEXT NOT NULL, "
               "expires REAL NOT NULL)")
    db.execute("CREATE INDEX IF NOT EXISTS response_homes_expires ON response_homes (expires)")
    db.executemany("INSERT INTO owners VALUES (?, ?, ?, ?)", [
        ("response", "resp_acme", "tenant:acme", NOW + 30 * DAY),
        ("interaction", "v1_interaction_acme", "tenant:acme", NOW + 30 * DAY),
        ("cached_content", "cache_globex", "tenant:globex", NOW + 600),
        ("response", "resp_expired", "tenant:acme", NOW - 1),
    ])
    db.executemany("INSERT INTO response_homes VALUES (?, ?, ?)", [
        ("resp_acme", "second", NOW + 30 * DAY),
        ("v1_interaction_acme", "gemini-two", NOW + 30 * DAY),
        ("resp_open", "second", NOW + 30 * DAY),       # an open gateway's: a home, no owner
    ])
    db.close()
    return path


def test_a_ledger_file_the_older_version_wrote_keeps_its_owners_and_homes(older_ledger):
    path = older_ledger

    async def upgraded() -> None:
        store = StoredIds(path, clock=lambda: NOW)
        assert await store.allows("response", "resp_acme", "tenant:acme")
        assert not await store.allows("response", "resp_acme", "tenant:globex")
        assert await store.allows("interaction", "v1_interaction_acme", "tenant:acme")
        assert await store.allows("cached_content", "cache_globex", "tenant:globex")
        assert not await store.allows("response", "resp_expired", "tenant:acme")
        assert store.home_of("response", "resp_acme") == "second"
        assert store.home_of("interaction", "v1_interaction_acme") == "gemini-two"
        assert await store.find_home("response", "resp_open") == "second"
        assert not await store.allows("response", "resp_open", "tenant:acme")     # nobody's, as before
        await store.forget("response", "resp_acme")         # its owner deleted it
        await store.aclose()

    async def reopened() -> None:
        store = StoredIds(path, clock=lambda: NOW)
        assert not await store.allows("response", "resp_acme", "tenant:acme")     # not owned again from the old rows
        assert store.home_of("response", "resp_acme") == "second"
        assert await store.allows("cached_content", "cache_globex", "tenant:globex")
        await store.aclose()

    asyncio.run(upgraded())
    asyncio.run(reopened())
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM owners").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM response_homes").fetchone() == (0,)


def test_rows_an_older_process_writes_to_the_old_tables_after_the_upgrade_are_moved_at_the_next_open(older_ledger):
    path = older_ledger
    asyncio.run(StoredIds(path, clock=lambda: NOW).aclose())
    db = sqlite3.connect(path, isolation_level=None)        # the older version, still open on the file
    db.execute("INSERT OR REPLACE INTO owners VALUES (?, ?, ?, ?)", ("response", "resp_late", "tenant:acme", NOW + DAY))
    db.execute("INSERT OR REPLACE INTO response_homes VALUES (?, ?, ?)", ("resp_late", "second", NOW + DAY))
    db.close()

    async def reopened() -> tuple[bool, str | None]:
        store = StoredIds(path, clock=lambda: NOW)
        seen = await store.allows("response", "resp_late", "tenant:acme"), store.home_of("response", "resp_late")
        await store.aclose()
        return seen

    assert asyncio.run(reopened()) == (True, "second")


def test_redis_keys_an_older_replica_wrote_are_read_and_its_owner_key_is_deleted_with_the_id(tmp_path, redis_url):
    r = redis.Redis.from_url(redis_url)
    # What a replica of the older version wrote for a response it relayed (its key names, typed here).
    r.set("prefixgate:owner:response:resp_rolling", "tenant:acme", ex=3600)
    r.set("prefixgate:home:resp_rolling", "second", ex=3600)

    async def upgraded() -> None:
        one = StoredIds(str(tmp_path / "one.sqlite"), redis_url)
        assert await one.allows("response", "resp_rolling", "tenant:acme")
        assert not await one.allows("response", "resp_rolling", "tenant:globex")
        assert await one.find_home("response", "resp_rolling") == "second"
        await one.forget("response", "resp_rolling")
        await one.aclose()
        two = StoredIds(str(tmp_path / "two.sqlite"), redis_url)
        assert not await two.allows("response", "resp_rolling", "tenant:acme")     # deleted for every replica
        await two.aclose()

    asyncio.run(upgraded())


def test_new_writes_go_to_one_hash_per_id_and_not_to_the_older_key_names(tmp_path, redis_url):
    r = redis.Redis.from_url(redis_url)

    async def stored() -> None:
        store = StoredIds(str(tmp_path / "one.sqlite"), redis_url)
        store.record("response", "resp_new", "tenant:acme", home="second")
        await store.aclose()

    asyncio.run(stored())
    assert r.hgetall("prefixgate:stored:response:resp_new") == {b"owner": b"tenant:acme", b"home": b"second"}
    assert 0 < r.ttl("prefixgate:stored:response:resp_new") <= 31 * 86400
    assert r.exists("prefixgate:owner:response:resp_new", "prefixgate:home:resp_new") == 0


@pytest.fixture
def tokens_table_ledger(tmp_path) -> str:
    """A ledger file with `stored_ids` as b0dfe8c created it, without a tokens column, and its second table
    `stored_tokens` (its SQL)."""
    path = str(tmp_path / "ledger.sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript("""
        CREATE TABLE stored_ids (kind TEXT NOT NULL, id TEXT NOT NULL, owner TEXT, home TEXT, expires REAL NOT NULL,
                                 PRIMARY KEY (kind, id));
        CREATE INDEX stored_ids_expires ON stored_ids (expires);
        CREATE TABLE stored_tokens (kind TEXT NOT NULL, id TEXT NOT NULL, tokens INTEGER NOT NULL,
                                    expires REAL NOT NULL, PRIMARY KEY (kind, id));
    """)
    db.executemany("INSERT INTO stored_ids VALUES (?, ?, ?, ?, ?)", [
        ("response", "resp_chain", "tenant:acme", "second", NOW + 30 * DAY),
        ("cached_content", "cache_manual", "tenant:acme", None, NOW + 600),
    ])
    db.executemany("INSERT INTO stored_tokens VALUES (?, ?, ?, ?)", [
        ("response", "resp_chain", 44_000, NOW + 30 * DAY),
        ("cached_content", "cache_manual", 48_000, NOW + 600),
        ("response", "resp_open", 1_200, NOW + DAY),            # an open gateway's: tokens, no owner
        ("response", "resp_old", 900, NOW - 1),                  # expired
    ])
    db.close()
    return path


def test_a_ledger_file_with_the_stored_tokens_table_keeps_its_tokens_in_their_ids_rows(tokens_table_ledger):
    path = tokens_table_ledger

    async def opened() -> list:
        store = StoredIds(path, clock=lambda: NOW)
        seen = [await store.tokens("response", "resp_chain"), await store.tokens("cached_content", "cache_manual"),
                await store.tokens("response", "resp_open"), await store.tokens("response", "resp_old"),
                await store.owner("response", "resp_chain"), store.home_of("response", "resp_chain"),
                await store.owner("cached_content", "cache_manual"), await store.owner("response", "resp_open")]
        await store.aclose()
        return seen

    kept = [44_000, 48_000, 1_200, None, "tenant:acme", "second", "tenant:acme", None]
    assert asyncio.run(opened()) == kept
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'stored_tokens'").fetchone() == (0,)
    rows = db.execute("SELECT * FROM stored_ids ORDER BY kind, id").fetchall()
    db.close()
    assert len(rows) == 4
    assert asyncio.run(opened()) == kept         # reopened: done once
    db = sqlite3.connect(path)
    assert db.execute("SELECT * FROM stored_ids ORDER BY kind, id").fetchall() == rows
    db.close()


def test_two_replicas_opening_one_older_file_at_once_both_open_it(tokens_table_ledger):
    path = tokens_table_ledger
    start = threading.Barrier(2)
    opened: list[StoredIds] = []

    def replica() -> None:
        start.wait()
        opened.append(StoredIds(path, clock=lambda: NOW))

    threads = [threading.Thread(target=replica) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(opened) == 2      # neither failed on the column or table the other had moved

    async def read() -> list[int | None]:
        seen = [await store.tokens("response", "resp_chain") for store in opened]
        for store in opened:
            await store.aclose()
        return seen

    assert asyncio.run(read()) == [44_000, 44_000]
