"""A list's ownership check asks the shared store about a whole page at once: an OpenAI files page holds up to
10,000 files, and one Redis round trip each made a list call take as long as 10,000 round trips (real
redis-server)."""

from __future__ import annotations

import asyncio

from prefixgate.gateway.provider_ids import FILE
from prefixgate.gateway.stored_ids import StoredIds


def test_a_pages_owners_are_one_round_trip(tmp_path, redis_url):
    async def run() -> tuple[list[str], int]:
        writer = StoredIds(str(tmp_path / "a.sqlite"), redis_url)
        for i in range(200):
            writer.record(FILE, f"file-{i:04d}", "tenant:acme" if i % 3 == 0 else "tenant:beta")
        await writer.aclose()       # shared with Redis before it closes
        # Another replica, whose own file is empty: only Redis knows the owners.
        reader = StoredIds(str(tmp_path / "b.sqlite"), redis_url)
        trips = 0
        pipeline = reader._redis.pipeline

        def counted(*args, **kwargs):
            nonlocal trips
            trips += 1
            return pipeline(*args, **kwargs)

        reader._redis.pipeline = counted
        page = [{"id": f"file-{i:04d}"} for i in range(200)]
        kept = await reader.only_own(FILE, page, lambda f: f["id"], "tenant:acme")
        await reader.aclose()
        return [f["id"] for f in kept], trips

    kept, trips = asyncio.run(run())
    assert kept == [f"file-{i:04d}" for i in range(0, 200, 3)]
    assert trips == 1
