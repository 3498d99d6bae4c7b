"""A budgeted request that fails over to a dearer target holds what it may cost there before it is sent there.

Admission prices a request's hold at the route's first target. A fallback to a dearer model went out on that hold:
N concurrent requests failing over each spent up to what the dearer model costs while holding the cheaper's, and
overran the key's budget by N requests. Now the hold grows before the failover, as admission grants a hold (while
the key's spend and other holds leave any room: a budget overshot by at most one request); where they leave none,
that target is skipped (the caller gets the first target's failure, or a 429 at admission)."""

from __future__ import annotations

import asyncio
import threading
from decimal import Decimal

import openai
import pytest

from prefixgate.errors import RequestError
from prefixgate.gateway.state import RedisCounters
from prefixgate.policies.limits import Limits
from prefixgate.policies.schema import Budget, CallerKey, hash_key
from tests.gateway.support_gateway import policy_stack

# OpenAI's published prices, USD per million tokens (input, output): gpt-5.4-mini $0.75 / $4.50, gpt-5.5 $5 / $30.
# Neither bills cache writes. A request of a few dozen prompt tokens and `max_completion_tokens` 1,000 holds about
# $0.0045 at gpt-5.4-mini and $0.030 at gpt-5.5 (its prompt adds under $0.0002 to either).
CHEAP, DEAR = "gpt-5.4-mini", "gpt-5.5"
MAX_TOKENS = 1000
SECRET = "pg-failover-pair-0001"
OPEN_ENDED = "pg-failover-open-ended-0001"
DEAR_OUTPUT = Decimal(30)    # gpt-5.5, USD per million output tokens
BUDGET = 0.03       # two requests' gpt-5.4-mini holds; one gpt-5.5 hold takes all of it
POLICY = {
    # The cheap target is down (nothing listens on port 9): every request fails over to the dear one.
    "upstreams": {"openai-down": {"kind": "openai", "url": "http://127.0.0.1:9", "api_key_env": "OPENAI_API_KEY"}},
    "routes": [{"name": "fallback", "models": ["fallback"], "retry": {"attempts": 1},
                "targets": [{"upstream": "openai-down", "model": CHEAP}, {"upstream": "openai", "model": DEAR}]},
               # A house model the price table lacks, declared free (a self-hosted one), then gpt-5.5.
               {"name": "house-first", "models": ["house-first"], "retry": {"attempts": 1},
                "price": {"input": 0, "output": 0},
                "targets": [{"upstream": "openai-down", "model": "house-7b"}, {"upstream": "openai", "model": DEAR}]}],
    "keys": [{"name": "pair", "key_sha256": hash_key(SECRET), "budget": {"usd": BUDGET, "period": "total"},
              "routes": ["fallback"]},
             {"name": "open-ended", "key_sha256": hash_key(OPEN_ENDED), "budget": {"usd": 0.5, "period": "total"},
              "routes": ["house-first"]}],
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with policy_stack(tmp_path_factory.mktemp("failover-holds"), POLICY) as parts:
        yield parts


def ask(url: str, secret: str = SECRET, model: str = "fallback", **limit):
    caller = openai.OpenAI(api_key=secret, base_url=url + "/v1", max_retries=0)
    try:
        return caller.chat.completions.create(model=model, **limit or {"max_completion_tokens": MAX_TOKENS},
                                              messages=[{"role": "user", "content": "Which dock first?"}])
    except openai.APIError as e:
        return e


def at_once(up, n: int, *args, **limit) -> list:
    """`n` concurrent `ask(*args, **limit)`, each sent upstream kept running (3 s) while the others are decided."""
    up.reset()
    up.delay_s = 3.0
    try:
        answers: list = []
        callers = [threading.Thread(target=lambda: answers.append(ask(*args, **limit))) for _ in range(n)]
        for t in callers:
            t.start()
        for t in callers:
            t.join(60)
    finally:
        up.delay_s = 0.0
    return answers


def test_concurrent_failovers_to_a_dearer_model_hold_its_cost(stack):
    up, gw, _ = stack
    answers = at_once(up, 2, gw.url)
    # Held at gpt-5.4-mini's price, both fitted and both went to gpt-5.5: $0.060 of a $0.03 budget.
    assert [r.body["model"] for r in up.received] == [DEAR], answers
    [refused] = [a for a in answers if isinstance(a, openai.APIError)]
    # Refused at admission (the other's grown hold takes the budget), or its failover was (the first target's 502).
    assert isinstance(refused, openai.RateLimitError | openai.InternalServerError), refused
    if isinstance(refused, openai.InternalServerError):
        assert refused.status_code == 502 and "openai-down" in refused.message


def test_a_failover_from_a_free_model_is_bounded_by_what_the_budget_has_left(stack):
    """A request with no output limit that admission priced at a free model (no answer's length to bound there)
    fails over to gpt-5.5, where it may run to the model's own output limit. Held at 4,096 output tokens ($0.12), 3
    concurrent ones fitted $0.50 and all went, each free to spend up to $3.84 (128,000 tokens at $30/MTok); held
    at that whole limit and sent unbounded, one went, free to spend $3.84 of $0.50. Now it holds what the budget has
    left, as admission holds one at a paid model, and goes with the output limit that pays for; the others find no
    room for a minimal answer and are skipped there."""
    up, gw, _ = stack
    answers = at_once(up, 3, gw.url, OPEN_ENDED, "house-first", max_completion_tokens=openai.NOT_GIVEN)
    [sent] = up.received
    assert sent.body["model"] == DEAR, answers
    # $0.50 less a prompt of a few dozen tokens at $5/MTok, at gpt-5.5's $30/MTok output (OpenAI's price).
    most = int(Decimal("0.50") / DEAR_OUTPUT * 10**6)
    assert most - 100 < sent.body["max_completion_tokens"] <= most, sent.body
    assert sum(isinstance(a, openai.APIError) for a in answers) == 2, answers


NOW = 1_000 * 60 + 1.0


def on_two_replicas(redis_url: str, check) -> None:
    """Run `check(here, there, held_in_redis)`: two replicas' budgets over one Redis, closed after."""
    async def run() -> None:
        a, b = RedisCounters(redis_url), RedisCounters(redis_url)
        here, there = Limits(a, clock=lambda: NOW), Limits(b, clock=lambda: NOW)

        async def held_in_redis(counter: str) -> list[bytes]:
            return await a._redis.zrange(RedisCounters.HOLDS + counter, 0, -1)
        try:
            await check(here, there, held_in_redis)
        finally:
            for limits, counters in ((here, a), (there, b)):
                await limits.aclose()
                await counters.close()
    asyncio.run(run())


def key_of(name: str) -> CallerKey:
    return CallerKey(name, name[0] * 64, budget=Budget(usd=0.03, period="total"))


def test_a_grown_hold_replaces_the_old_one_for_every_replica(redis_url):
    async def check(here: Limits, there: Limits, held_in_redis) -> None:
        key = key_of("grown")
        held = await here.admit(key, Decimal("0.0045"))
        grown = await here.rehold(key, held, Decimal("0.0301"))
        assert (grown.nano, here.reserved) == (30_100_000, {"spend:grown:all": 30_100_000})
        # The old hold is gone, not counted twice.
        assert await held_in_redis("spend:grown:all") == [f"{grown.hold}:30100000".encode()]
        with pytest.raises(RequestError) as e:      # the other replica sees the whole grown hold
            await there.admit(key, Decimal("0.0045"))
        assert e.value.status == 429 and "running requests hold it" in e.value.message
        here.release(grown)
        await here.aclose()     # its release has reached Redis
        await there.admit(key, Decimal("0.0045"))   # released: room again
    on_two_replicas(redis_url, check)


def test_a_dearer_hold_the_other_replicas_leave_no_room_for_keeps_the_old_one(redis_url):
    async def check(here: Limits, there: Limits, held_in_redis) -> None:
        key = key_of("crew")
        held = await here.admit(key, Decimal("0.01"))
        await there.admit(key, Decimal("0.03"))     # the room left when it was admitted: then none
        with pytest.raises(RequestError) as e:
            await here.rehold(key, held, Decimal("0.02"))
        assert e.value.status == 429
        assert here.reserved == {"spend:crew:all": 10_000_000}
        holds = await held_in_redis("spend:crew:all")
        assert f"{held.hold}:10000000".encode() in holds and len(holds) == 2
    on_two_replicas(redis_url, check)


def test_a_cheaper_hold_is_never_refused_and_frees_the_difference(redis_url):
    """Once planned, a body whose marks ask for a cheaper write than admission assumed holds less."""
    async def check(here: Limits, there: Limits, held_in_redis) -> None:
        key = key_of("planned")
        held = await here.admit(key, Decimal("0.02"))
        await here.admit(key, Decimal("0.01"))       # the whole $0.03 held
        with pytest.raises(RequestError):
            await there.admit(key, Decimal("0.01"))
        cheaper = await here.rehold(key, held, Decimal("0.005"))
        assert cheaper.nano == 5_000_000
        holds = await held_in_redis("spend:planned:all")
        assert f"{cheaper.hold}:5000000".encode() in holds and len(holds) == 2
        await there.admit(key, Decimal("0.01"))      # $0.015 of $0.03 held: room again on every replica
    on_two_replicas(redis_url, check)


def test_an_up_to_hold_grows_to_what_every_replica_leaves_and_no_further(redis_url):
    """A request with no output limit failing over to a paid model holds its worst case there, or what the budget
    has left: here $0.03 less the other replica's $0.01 hold (its own $0.005 counted once, as replaced), and then
    at least a minimal answer's worth, else refused with the old hold kept."""
    async def check(here: Limits, there: Limits, held_in_redis) -> None:
        key = key_of("open")
        held = await here.admit(key, Decimal("0.005"))
        await there.admit(key, Decimal("0.01"))      # another replica's request, unseen here
        grown = await here.rehold(key, held, Decimal("3.84"), Decimal("0.001"))
        assert (grown.nano, here.reserved) == (20_000_000, {"spend:open:all": 20_000_000})
        holds = await held_in_redis("spend:open:all")
        assert f"{grown.hold}:20000000".encode() in holds and len(holds) == 2
        with pytest.raises(RequestError) as e:      # nothing left for the least it needs
            await here.rehold(key, grown, Decimal("3.84"), Decimal("0.021"))
        assert e.value.status == 429 and here.reserved == {"spend:open:all": 20_000_000}
    on_two_replicas(redis_url, check)
