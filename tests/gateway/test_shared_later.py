"""What a replica writes to Redis for the others while Redis does not answer is written once it does: a stored
response's home (the account that holds it) as well as its owner, and never an owner deleted meanwhile."""

from __future__ import annotations

import asyncio

import redis

from prefixgate.gateway.stored_ids import StoredIds


def _blip(redis_url: str) -> None:
    redis.Redis.from_url(redis_url).execute_command("CLIENT", "PAUSE", 3000, "WRITE")   # writes wait past 0.5 s


def _back(redis_url: str) -> None:
    redis.Redis.from_url(redis_url).execute_command("CLIENT", "UNPAUSE")


def test_a_home_recorded_while_redis_blipped_reaches_the_other_replicas(tmp_path, redis_url):
    async def run() -> str | None:
        one = StoredIds(str(tmp_path / "one.sqlite"), redis_url)
        two = StoredIds(str(tmp_path / "two.sqlite"), redis_url)
        _blip(redis_url)
        one.record("response", "resp_blip", None, home="second-account")     # an open gateway's: no owner
        await asyncio.sleep(1.0)
        _back(redis_url)
        one.record("response", "resp_after", None, home="openai")
        await one.aclose()
        found = await two.find_home("response", "resp_blip")
        await two.aclose()
        return found

    assert asyncio.run(run()) == "second-account"


def test_an_owner_deleted_while_redis_blipped_is_not_shared_later(tmp_path, redis_url):
    async def run() -> tuple[bool, bool]:
        one = StoredIds(str(tmp_path / "one.sqlite"), redis_url)
        two = StoredIds(str(tmp_path / "two.sqlite"), redis_url)
        _blip(redis_url)
        one.record("response", "resp_gone", "tenant:a")
        await asyncio.sleep(1.0)
        _back(redis_url)
        await one.forget("response", "resp_gone")       # its owner deleted it
        one.record("response", "resp_after", "tenant:a")
        await one.aclose()
        seen = await two.allows("response", "resp_gone", "tenant:a"), await two.allows("response", "resp_after", "tenant:a")
        await two.aclose()
        return seen

    assert asyncio.run(run()) == (False, True)


def test_a_response_deleted_while_redis_blipped_shares_its_home_but_not_its_owner(tmp_path, redis_url):
    """Owner and home of one id are one write: forgetting the owner must not drop the home with it."""
    async def run() -> tuple[bool, str | None]:
        one = StoredIds(str(tmp_path / "one.sqlite"), redis_url)
        two = StoredIds(str(tmp_path / "two.sqlite"), redis_url)
        _blip(redis_url)
        one.record("response", "resp_gone", "tenant:a", home="second-account")
        await asyncio.sleep(1.0)
        _back(redis_url)
        await one.forget("response", "resp_gone")
        one.record("response", "resp_after", "tenant:a", home="openai")
        await one.aclose()
        seen = await two.allows("response", "resp_gone", "tenant:a"), await two.find_home("response", "resp_gone")
        await two.aclose()
        return seen

    assert asyncio.run(run()) == (False, "second-account")


def test_a_write_redis_missed_is_not_shared_later_over_a_newer_one(tmp_path, redis_url):
    """An explicit cache recorded for 60 s while Redis blipped, then extended to an hour (a PATCH) once it
    answered: the missed write, made after the newer one, put the 60 s back, and from then on the other
    replicas refused the tenant its own cache (they know its owner only from Redis)."""
    async def run() -> None:
        one = StoredIds(str(tmp_path / "one.sqlite"), redis_url)
        _blip(redis_url)
        one.record("cached_content", "cache_1", "tenant:a", ttl_s=60)
        await asyncio.sleep(1.0)
        _back(redis_url)
        one.record("cached_content", "cache_1", "tenant:a", ttl_s=3600)
        await one.aclose()

    asyncio.run(run())
    assert redis.Redis.from_url(redis_url).ttl("prefixgate:stored:cached_content:cache_1") > 3000
