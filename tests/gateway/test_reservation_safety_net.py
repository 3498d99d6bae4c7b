"""A budget reservation is given back whatever ends a request before an answer takes it over: a refusal
after admission or an unexpected error (the caller gets the gateway's 500). Before, the reserved estimate
stayed on the key until restart, and a key with a small budget was refused for money it never spent."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import openai
import pytest
from starlette.responses import JSONResponse

from prefixgate.gateway.state import MemoryCounters
from prefixgate.policies.limits import Limits
from prefixgate.policies.schema import Budget, CallerKey, hash_key
from tests.gateway.support_gateway import chat_stub_stack
from tests.support_services import wait_until

CALLER = "pg-safety-net-caller-0001"
HELLO = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-5.4",
         "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}}


async def answer(request) -> JSONResponse:
    return JSONResponse(HELLO)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with chat_stub_stack(tmp_path_factory.mktemp("safety-net"), answer, {
            "routes": [{"name": "gpt", "models": ["gpt-5.4"], "targets": [{"upstream": "openai"}]}],
            "keys": [{"name": "app", "key_sha256": hash_key(CALLER), "budget": {"usd": 100, "period": "day"}}]}) as (gw, _, app):
        yield gw, app.state.proxy


def test_an_unexpected_error_after_admission_gives_the_reservation_back(stack):
    gw, proxy = stack
    client = openai.OpenAI(api_key=CALLER, base_url=gw.url + "/v1", max_retries=0)
    real = proxy.prepare

    def broken(*args, **kwargs):
        raise RuntimeError("a bug between admission and the upstream call")

    proxy.prepare = broken
    try:
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="gpt-5.4", messages=[{"role": "user", "content": "Hi"}])
    finally:
        proxy.prepare = real
    assert proxy.limits.reserved == {}
    # The next request is admitted and settled as usual.
    assert client.chat.completions.create(model="gpt-5.4", messages=[{"role": "user", "content": "Hi"}]).choices
    # Settled after the answer is sent (its cost added to the budget as a task of its own, then the hold released).
    wait_until(lambda: proxy.limits.reserved == {}, 10, "the settled request's hold released")


def test_releasing_twice_leaves_other_requests_reservations_alone():
    async def run() -> dict[str, int]:
        limits = Limits(MemoryCounters())
        key = CallerKey(name="k", key_sha256=hash_key("x"), budget=Budget(usd=10.0, period="day"))
        first = await limits.admit(key, Decimal("1"))
        second = await limits.admit(key, Decimal("2"))
        limits.release(first)
        limits.release(first)           # the safety net after a settled record
        assert list(limits.reserved.values()) == [2_000_000_000]     # nanodollars: the second's $2 still held
        limits.release(second)
        return limits.reserved

    assert asyncio.run(run()) == {}
