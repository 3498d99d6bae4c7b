"""The ownership registry: who created each stored provider resource, kept across restarts and replicas."""

import asyncio

import redis

from prefixgate.gateway.ownership import principal
from prefixgate.gateway.stored_ids import StoredIds
from prefixgate.policies.schema import CallerKey


def run(coro):
    return asyncio.run(coro)


def test_a_key_without_a_tenant_is_its_own_party_not_a_tenant_of_its_name():
    named_acme = CallerKey("acme", "a" * 64)
    tenant_acme = CallerKey("ops", "b" * 64, tenant="acme")
    other_in_acme = CallerKey("batch", "c" * 64, tenant="acme")
    assert principal(named_acme) != principal(tenant_acme)
    assert principal(tenant_acme) == principal(other_in_acme)
    assert principal(None) is None


def test_owner_is_checked_filtered_and_survives_a_restart(tmp_path):
    path = str(tmp_path / "ledger.sqlite")

    async def first():
        owners = StoredIds(path)
        owners.record("cached_content", "cachedContents/a1", "tenant:a")
        owners.record("cached_content", "cachedContents/b1", "tenant:b")
        await owners.aclose()

    async def second():
        owners = StoredIds(path)
        assert await owners.allows("cached_content", "cachedContents/a1", "tenant:a")
        assert not await owners.allows("cached_content", "cachedContents/a1", "tenant:b")
        assert not await owners.allows("cached_content", "cachedContents/never-seen", "tenant:a")
        assert not await owners.allows("response", "cachedContents/a1", "tenant:a")     # kinds are separate
        assert await owners.allows("cached_content", "cachedContents/never-seen", None)  # open gateway
        listed = [{"name": "cachedContents/a1"}, {"name": "cachedContents/b1"}, {"name": "cachedContents/x"}]
        assert await owners.only_own("cached_content", listed, lambda c: c["name"], "tenant:b") == [listed[1]]
        await owners.forget("cached_content", "cachedContents/b1")
        assert not await owners.allows("cached_content", "cachedContents/b1", "tenant:b")
        await owners.aclose()

    run(first())
    run(second())


def test_an_expired_owner_refuses(tmp_path):
    now = [1000.0]
    owners = StoredIds(str(tmp_path / "l.sqlite"), clock=lambda: now[0])
    owners.record("response", "resp_1", "tenant:a", ttl_s=60)
    assert run(owners.allows("response", "resp_1", "tenant:a"))
    now[0] += 61
    assert not run(owners.allows("response", "resp_1", "tenant:a"))


def test_replicas_share_owners_through_redis(tmp_path, redis_url):
    async def both():
        one = StoredIds(str(tmp_path / "one.sqlite"), redis_url)
        two = StoredIds(str(tmp_path / "two.sqlite"), redis_url)
        one.record("response", "resp_9", "tenant:a")
        await one.aclose()      # closing waits for the write to Redis, which follows the local one
        assert await two.allows("response", "resp_9", "tenant:a")
        assert not await two.allows("response", "resp_9", "tenant:b")
        await two.aclose()

    run(both())


def test_an_owner_recorded_while_redis_blipped_reaches_the_other_replicas_once_it_answers(tmp_path, redis_url):
    """A replica that could not share an owner (Redis not answering) used to keep it to itself for the id's
    lifetime (31 days): the other replicas refused the tenant its own stored response."""
    r = redis.Redis.from_url(redis_url)

    async def both():
        one = StoredIds(str(tmp_path / "one.sqlite"), redis_url)
        two = StoredIds(str(tmp_path / "two.sqlite"), redis_url)
        r.execute_command("CLIENT", "PAUSE", 3000, "WRITE")     # writes wait past the 0.5 s timeout
        one.record("response", "resp_blip", "tenant:a")
        await asyncio.sleep(1.0)
        r.execute_command("CLIENT", "UNPAUSE")
        one.record("response", "resp_after", "tenant:a")
        await one.aclose()
        assert await two.allows("response", "resp_after", "tenant:a")
        assert await two.allows("response", "resp_blip", "tenant:a")
        assert not await two.allows("response", "resp_blip", "tenant:b")
        await two.aclose()

    run(both())
