"""What a replica writes to Redis for the others while Redis does not answer is written once it does: a stored
response's home (the account that holds it) as well as its owner, and never an owner deleted meanwhile."""

from __future__ import annotations

import asyncio

import redis

from prefixgate.gateway.ownership import Owners
from prefixgate.gateway.response_homes import ResponseHomes


def _blip(redis_url: str) -> None:
    redis.Redis.from_url(redis_url).execute_command("CLIENT", "PAUSE", 3000, "WRITE")   # writes wait past 0.5 s


def _back(redis_url: str) -> None:
    redis.Redis.from_url(redis_url).execute_command("CLIENT", "UNPAUSE")


def test_a_home_recorded_while_redis_blipped_reaches_the_other_replicas(redis_url):
    async def run() -> str | None:
        one, two = ResponseHomes(redis_url=redis_url), ResponseHomes(redis_url=redis_url)
        _blip(redis_url)
        one.remember("resp_blip", "second-account")
        await asyncio.sleep(1.0)
        _back(redis_url)
        one.remember("resp_after", "openai")
        await one.aclose()
        found = await two.find("resp_blip")
        await two.aclose()
        return found

    assert asyncio.run(run()) == "second-account"


def test_an_owner_deleted_while_redis_blipped_is_not_shared_later(tmp_path, redis_url):
    async def run() -> tuple[bool, bool]:
        one = Owners(str(tmp_path / "one.sqlite"), redis_url)
        two = Owners(str(tmp_path / "two.sqlite"), redis_url)
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
