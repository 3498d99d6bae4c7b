"""Policies: validated at the edge, routing by name and pattern, prefix affinity with a load guard,
jittered backoff, and per-key budgets and rate limits on shared counters (in memory and in real Redis)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from decimal import Decimal

import pytest

from prefixgate.config import Settings
from prefixgate.errors import RequestError
from prefixgate.gateway.state import MemoryCounters, RedisCounters
from prefixgate.policies import (
    Limits,
    Policy,
    PolicyError,
    RetryPolicy,
    Router,
    backoff_delay,
    builtin_upstreams,
    hash_key,
    load_policy,
    pick_replica,
    ranking,
    retry_condition,
)

SETTINGS = Settings(ledger_path=":memory:")
BUILTINS = builtin_upstreams(SETTINGS)


def policy(data: dict) -> Policy:
    return Policy.from_dict(data, BUILTINS)


@pytest.mark.parametrize("data,message", [
    ({"routes": []}, "routes: at least one route"),
    ({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "nowhere"}]}]}, "unknown upstream 'nowhere'"),
    ({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}], "planner": "yolo"}]}, "routes.0.planner"),
    ({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}], "retry": {"attempts": 0}}]},
     "routes.0.retry.attempts"),
    ({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}], "retry": {"on": ["4xx"]}}]},
     "routes.0.retry.on"),
    ({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}], "retry": {"backoff_s": 5}}]},
     "routes.0.retry.backoff_s: 5 is more than max_backoff_s"),
    ({"routes": [{"name": "a", "models": ["m"], "targets": [{"replicas": ["openai", "anthropic"]}]}]}, "one dialect"),
    ({"upstreams": {"v": {"kind": "openai_compatible"}}, "routes": []}, "upstreams.v.url"),
    ({"upstreams": {"v": {"kind": "openai", "provider": "deepseek", "url": "https://x"}}, "routes": []},
     "upstreams.v.provider: only an openai_compatible"),
    ({"upstreams": {"v": {"kind": "openai_compatible", "provider": "cohere"}}, "routes": []}, "upstreams.v.provider: must be one of"),
    ({"upstreams": {"v": {"kind": "openai_compatible", "provider": "azure", "url": "https://r.openai.azure.com"}},
      "routes": []}, "upstreams.v.api_version"),
    ({"upstreams": {"v": {"kind": "openai_compatible", "provider": "azure", "api_version": "2024-10-21"}}, "routes": []},
     "upstreams.v.url"),
    ({"upstreams": {"v": {"kind": "openai_compatible", "provider": "deepseek", "deployments": {"a": "b"}}}, "routes": []},
     "upstreams.v: api_version and deployments are for provider: azure only"),
    ({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}]}], "keys": [{"name": "k"}]},
     "keys.0: give exactly one"),
    ({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}]}], "rutes": []}, "rutes: unknown key"),
    ({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}], "volatile": ["Lead: (\\w+"]}]},
     "routes.0.volatile: .* is not a valid regular expression"),
    ({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}], "never_move": [3]}]},
     "routes.0.never_move: a list of regular expressions"),
    # Budgets and rate limits count by key name: two keys of one name would share one counter (twice the budget).
    ({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}]}],
      "keys": [{"name": "team", "key_sha256": "a" * 64}, {"name": "team", "key_sha256": "b" * 64}]},
     "keys: key names must be unique"),
    ({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}], "price": {"input": 1}}]},
     "routes.0.price: give input and output"),
    ({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}], "max_request_usd": -1}]},
     "routes.0.max_request_usd: expected a non-negative number"),
    ({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}]}],
      "keys": [{"name": "k", "key_sha256": "c" * 64, "provider_ids": ["vs_ok", 7]}]},
     "keys.0.provider_ids: each entry is a provider-side id"),
    ({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}]}],
      "keys": [{"name": "k", "key_sha256": "c" * 64, "provider_ids": "vs_one"}]}, "keys.0.provider_ids: expected a list"),
])
def test_invalid_policies_name_the_key(data, message):
    with pytest.raises(PolicyError, match=message.replace("(", r"\(")):
        policy(data)


def test_policy_file_and_default(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("upstreams:\n  vllm: {kind: openai_compatible, url: 'http://10.0.0.5:8000/v1'}\n"
                    "routes:\n  - {name: llama, models: [llama-3], targets: [{upstream: vllm, model: meta/llama}]}\n")
    loaded = load_policy(Settings(policy_file=str(path)))
    assert loaded.routes[0].targets[0].model == "meta/llama"
    assert loaded.upstreams["vllm"].dialect == "openai"
    default = Router(load_policy(Settings(local_model="smollm2-135m")))
    assert default.route_for("smollm2-135m").name == "local"
    assert default.route_for("claude-opus-5").name == "anthropic"
    assert default.route_for("gemini-3.5-flash").name == "gemini"
    assert default.route_for("llama-3") is None


def test_router_exact_names_beat_patterns_and_keys_restrict_routes():
    router = Router(policy({"routes": [
        {"name": "all-gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
        {"name": "special", "models": ["gpt-5.4"], "targets": [{"upstream": "anthropic", "model": "claude-opus-5"}],
         "planner": "checkpoints"}]}))
    assert router.decide("gpt-5.4", None).route.name == "special"
    assert router.decide("gpt-5.4", None).mode == "checkpoints"
    assert router.decide("gpt-5.4-mini", None).route.name == "all-gpt"
    with pytest.raises(RequestError) as e:
        router.decide("mistral", None)
    assert e.value.status == 404
    keyed = policy({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}]},
                               {"name": "b", "models": ["n"], "targets": [{"upstream": "openai"}]}],
                    "keys": [{"name": "k", "key_sha256": hash_key("s"), "routes": ["a"], "planner": "off"}]})
    key = keyed.keys[0]
    assert Router(keyed).decide("m", key).mode == "off"
    with pytest.raises(RequestError) as e:
        Router(keyed).decide("n", key)
    assert e.value.status == 403


def test_affinity_is_stable_and_moves_little_when_a_replica_is_added():
    replicas = ["a", "b", "c", "d"]
    prefixes = [f"prefix-{i}" for i in range(2000)]
    before = {p: ranking(p, replicas)[0] for p in prefixes}
    assert before == {p: ranking(p, list(reversed(replicas)))[0] for p in prefixes}
    spread = Counter(before.values())
    assert min(spread.values()) > 400        # roughly even: 500 each
    after = {p: ranking(p, replicas + ["e"])[0] for p in prefixes}
    moved = [p for p in prefixes if before[p] != after[p]]
    assert all(after[p] == "e" for p in moved)
    assert 300 < len(moved) < 500            # about 1/5 move, all of them to the new replica


def test_load_guard_spills_a_hot_prefix_to_its_second_choice():
    replicas = ["a", "b", "c"]
    first, second = ranking("hot", replicas)[:2]
    assert pick_replica("hot", replicas, {}, 1.25) == first
    load = {first: 5, second: 0}
    assert pick_replica("hot", replicas, load, 1.25) == second
    # Everyone full: the least loaded takes it.
    assert pick_replica("hot", replicas, {"a": 9, "b": 9, "c": 3}, 1.0) == "c"


def test_backoff_is_jittered_capped_and_respects_retry_after():
    p = RetryPolicy(attempts=5, backoff_s=0.1, max_backoff_s=0.5)
    rng = random.Random(7)
    delays = [backoff_delay(p, n, rng=rng) for n in (1, 2, 3, 4, 5) for _ in range(50)]
    assert all(0 <= d <= 0.5 for d in delays) and len(set(delays)) > 200
    assert backoff_delay(p, 1, retry_after=0.3, rng=rng) >= 0.3
    assert backoff_delay(p, 1, retry_after=60, rng=rng) == 0.5
    assert retry_condition(429) == "429" and retry_condition(529) == "5xx" and retry_condition(400) is None
    assert retry_condition(None, timed_out=True) == "timeout"


def _limited_key():
    return policy({"routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "openai"}]}],
                   "keys": [{"name": "team", "key_sha256": hash_key("s"), "budget": {"usd": 1.0, "period": "day"},
                             "rate_limit": {"requests_per_minute": 3, "tokens_per_minute": 1000}}]}).keys[0]


async def _exercise(limits: Limits) -> None:
    key = _limited_key()
    for _ in range(3):
        await limits.admit(key)
    with pytest.raises(RequestError) as e:
        await limits.admit(key)
    assert e.value.status == 429 and "requests per minute" in e.value.message and e.value.retry_after <= 60


async def _budget(limits: Limits) -> None:
    key = _limited_key()
    held = await limits.admit(key)
    await limits.settle(key, held, tokens=10, cost_usd=Decimal("0.6"))
    held = await limits.admit(key)
    await limits.settle(key, held, tokens=10, cost_usd=Decimal("0.6"))
    with pytest.raises(RequestError) as e:
        await limits.admit(key)
    assert "budget of $1 per day" in e.value.message


async def _exact_budget(limits: Limits) -> None:
    # A key that has spent exactly its budget is refused; one nanodollar short, it is admitted.
    key = _limited_key()
    await limits.settle(key, await limits.admit(key), tokens=0, cost_usd=Decimal("0.999999999"))
    await limits.settle(key, await limits.admit(key), tokens=0, cost_usd=Decimal("0.000000001"))
    with pytest.raises(RequestError) as e:
        await limits.admit(key)
    assert "budget of $1 per day" in e.value.message


async def _reservations(limits: Limits) -> None:
    # Twenty requests in flight at once, each estimated at $0.6 against $1: the first two are admitted
    # (nothing was spent before either), the rest refused until one settles.
    key = _limited_key()
    admitted, refused = [], 0
    for _ in range(20):
        try:
            admitted.append(await limits.admit(key, Decimal("0.6")))
        except RequestError:
            refused += 1
    assert (len(admitted), refused) == (2, 18)
    for held in admitted:         # both cost less than estimated: room again
        await limits.settle(key, held, tokens=0, cost_usd=Decimal("0.1"))
    await limits.admit(key, Decimal("0.6"))


def test_limits_in_memory():
    clock = iter(range(10_000, 20_000, 1))
    asyncio.run(_exercise(Limits(MemoryCounters(), clock=lambda: 60 * 1000 + 1)))
    asyncio.run(_budget(Limits(MemoryCounters(), clock=lambda: 60 * next(clock))))
    asyncio.run(_exact_budget(Limits(MemoryCounters(), clock=lambda: 60 * 1000 + 1)))
    asyncio.run(_reservations(Limits(MemoryCounters(), clock=lambda: 60 * 1000 + 1)))


def test_limits_are_shared_through_redis(redis_url):
    async def two_replicas() -> None:
        a, b = RedisCounters(redis_url), RedisCounters(redis_url)
        now = 7 * 60 * 1000 + 5.0
        key = _limited_key()
        ra, rb = Limits(a, clock=lambda: now), Limits(b, clock=lambda: now)
        # Two gateway replicas share one rate limit: 2 + 1 admissions use up 3 per minute.
        await ra.admit(key)
        await rb.admit(key)
        await ra.admit(key)
        with pytest.raises(RequestError):
            await rb.admit(key)
        # A new minute starts a new window on both replicas.
        next_a = Limits(a, clock=lambda: now + 60)
        await next_a.admit(key)
        # Spend recorded by one replica counts against the budget on the other.
        replica_b = Limits(b, clock=lambda: now + 60)
        await replica_b.settle(key, await replica_b.admit(key), tokens=10, cost_usd=Decimal("1.5"))
        with pytest.raises(RequestError) as e:
            await next_a.admit(key)
        assert "budget" in e.value.message
        assert await a.get(f"spend:team:{int((now + 60) // 86400)}") == 1_500_000_000     # nanodollars
        await a.close()
        await b.close()

    asyncio.run(two_replicas())


def test_a_provider_profile_makes_an_upstream_hosted_with_its_own_url_and_key():
    loaded = policy({"upstreams": {
        "ds": {"kind": "openai_compatible", "provider": "deepseek"},
        "az": {"kind": "openai_compatible", "provider": "azure", "url": "https://r.openai.azure.com",
               "api_version": "2024-10-21", "deployments": {"prod": "gpt-5.4"}},
        "vllm": {"kind": "openai_compatible", "url": "http://10.0.0.5:8000/v1"}},
        "routes": [{"name": "a", "models": ["m"], "targets": [{"upstream": "ds"}]}]})
    ds, az, vllm = loaded.upstreams["ds"], loaded.upstreams["az"], loaded.upstreams["vllm"]
    assert ds.url == "https://api.deepseek.com" and ds.api_key_env == ("DEEPSEEK_API_KEY",) and not ds.self_hosted
    assert az.base_model("prod") == "gpt-5.4" and az.base_model("other") == "other" and not az.self_hosted
    assert vllm.self_hosted and vllm.api_key_env == ()


def test_the_policy_example_in_the_gateway_docs_loads_as_written(monkeypatch):
    """Read with PyYAML as the gateway reads a policy file (YAML 1.1: a bare `on:` key is true)."""
    import re
    from pathlib import Path

    import yaml

    text = (Path(__file__).parents[2] / "docs" / "gateway.md").read_text()
    data = yaml.safe_load(re.search(r"```yaml\n(upstreams:.*?)```", text, re.S).group(1))
    monkeypatch.setenv("PREFIXGATE_KEY_TEAM_A", "pg-team-a-caller-key-5c1d9e2f7a")
    for key in data["keys"]:        # the docs show where a digest goes, not one
        if "key_sha256" in key:
            key["key_sha256"] = hash_key("pg-analyst-caller-key-8b0e3a6d4f")
    policy = Policy.from_dict(data, builtin_upstreams(Settings()))
    chat = next(r for r in policy.routes if r.name == "chat")
    assert chat.retry.on == ("429", "5xx", "timeout", "connect")
    assert next(r for r in policy.routes if r.name == "claude-pool").balance == "cost"


def test_requests_estimated_at_nothing_leave_no_reservation_behind():
    # A budget counter is named per window: one left at zero would stay for good, one more each window.
    async def run() -> dict[str, int]:
        day = [1000]
        limits = Limits(MemoryCounters(), clock=lambda: 86_400 * day[0])
        key = _limited_key()
        for _ in range(5):
            day[0] += 1
            await limits.settle(key, await limits.admit(key), tokens=0, cost_usd=Decimal("0.01"))
        held = await limits.admit(key, Decimal("0.2"))
        assert limits.reserved == {held.counter: 200_000_000}
        limits.release(held)
        return limits.reserved

    assert asyncio.run(run()) == {}


def test_an_admission_cancelled_while_its_rate_is_counted_leaves_no_reservation_behind():
    """Admission reserves the estimate, then counts the request's rate (a Redis round trip). A caller who hangs
    up meanwhile cancels admission there: the reservation was never handed back to be settled, so it must be
    released then, or it holds the key's budget for the rest of its window (for good, with `period: total`)."""
    class SlowRateStore(MemoryCounters):
        async def add(self, key: str, amount: float, ttl_s: int) -> float:
            if key.startswith("rpm:"):
                await asyncio.Event().wait()        # the round trip the caller hangs up during
            return await super().add(key, amount, ttl_s)

    async def run() -> dict[str, int]:
        limits = Limits(SlowRateStore(), clock=lambda: 60 * 1000 + 1)
        admission = asyncio.ensure_future(limits.admit(_limited_key(), Decimal("0.6")))
        for _ in range(100):            # until admission has reserved and is suspended counting the rate
            if limits.reserved:
                break
            await asyncio.sleep(0)
        assert limits.reserved
        admission.cancel()
        with pytest.raises(asyncio.CancelledError):
            await admission
        return limits.reserved

    assert asyncio.run(run()) == {}
