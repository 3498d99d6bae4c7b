"""The prompt tokens a stored response or explicit cache puts before a request naming it (what a budget reserves
for them, gateway/unseen_prompt.py) are a field of the id's one record: kept beside its owner and home, gone
when it expires, shared with the other replicas, and answered from this replica's file while Redis does not."""

from __future__ import annotations

import asyncio
import socket

from prefixgate.gateway.stored_ids import StoredIds

NOW = 1_000_000.0


def test_tokens_and_owner_are_one_record_that_expires_whole(tmp_path):
    now = [NOW]

    async def run() -> list:
        store = StoredIds(str(tmp_path / "ledger.sqlite"), clock=lambda: now[0])
        store.record("response", "resp_chain", None, ttl_s=3600, tokens=44_000)
        store.record("response", "resp_chain", "tenant:acme", ttl_s=3600, home="second")   # a field not given stays
        seen = [await store.tokens("response", "resp_chain")]
        store.record("response", "resp_chain", None, ttl_s=3600, tokens=45_000)
        seen += [await store.tokens("response", "resp_chain"), await store.owner("response", "resp_chain"),
                 store.home_of("response", "resp_chain"), await store.tokens("response", "resp_never")]
        now[0] += 3601
        seen += [await store.tokens("response", "resp_chain"), await store.owner("response", "resp_chain")]
        await store.aclose()
        return seen

    assert asyncio.run(run()) == [44_000, 45_000, "tenant:acme", "second", None, None, None]


def test_another_replica_reads_the_tokens_from_redis(tmp_path, redis_url):
    async def run() -> int | None:
        one = StoredIds(str(tmp_path / "one.sqlite"), redis_url)
        one.record("cached_content", "cache_manual", "tenant:acme", ttl_s=600, tokens=48_000)
        await one.aclose()
        two = StoredIds(str(tmp_path / "two.sqlite"), redis_url)
        found = await two.tokens("cached_content", "cache_manual")
        await two.aclose()
        return found

    assert asyncio.run(run()) == 48_000


def test_while_redis_does_not_answer_this_replicas_file_does(tmp_path):
    with socket.socket() as unused:     # a port nothing listens on: every call to it fails
        unused.bind(("127.0.0.1", 0))
        url = f"redis://127.0.0.1:{unused.getsockname()[1]}/0"

    async def run() -> int | None:
        store = StoredIds(str(tmp_path / "ledger.sqlite"), url)
        store.record("response", "resp_chain", "tenant:acme", tokens=44_000)
        found = await store.tokens("response", "resp_chain")
        await store.aclose()
        return found

    assert asyncio.run(run()) == 44_000
