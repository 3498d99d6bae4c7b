"""A request translated into Claude's format holds its prompt at the rate the translated body lets Claude bill it
at: the real openai client (Chat Completions) through `prefixgate serve` over `prefixgate mock-providers`, on a
route to claude-sonnet-5-5 whose planner sends requests as written (planner: off).

Claude writes the cache only at a marked breakpoint or the top-level automatic marker, and a Chat Completions body
translated into Messages carries neither unless the caller asked for caching (a `prompt_cache_key` becomes the
automatic marker, with Claude's default 5-minute TTL). Unmarked, the prompt can be billed at the input price alone.
It was held at the hour-long write (twice the input price), since admission could not read the translated body's
marks: six concurrent capped requests against $0.24 admitted three where five fit what they can cost."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import openai
import pytest

from prefixgate.policies.schema import hash_key
from tests.gateway.test_budget_capped_writes import (
    BYTES_PER_TOKEN,
    INPUT,
    MAX_TOKENS,
    MTOK,
    SONNET,
    WRITE_1H,
    admitted,
    manual,
    settled_spend,
)
from tests.support_stack import policy_env, running_stack, slowed

pytestmark = pytest.mark.slow

# Anthropic's published 5-minute cache write for Claude Sonnet 5.5: $2.50 per million tokens, 1.25 times its $2 input
# (the other prices, typed in test_budget_capped_writes.py: input $2, 1-hour write $4, output $10).
WRITE_5M = Decimal("2.5")
PLAIN, KEYED = "pg-translated-plain-0001", "pg-translated-keyed-0002"
BUDGETS = {"plain": Decimal("0.24"), "keyed": Decimal("0.24")}


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """(gateway URL, ledger path)."""
    tmp = tmp_path_factory.mktemp("translated-holds")
    keys = [{"name": name, "key_sha256": hash_key(secret), "budget": {"usd": float(BUDGETS[name]), "period": "total"}}
            for name, secret in (("plain", PLAIN), ("keyed", KEYED))]
    policy = {"routes": [{"name": "as-sent", "models": ["claude-*"], "planner": "off",
                          "targets": [{"upstream": "anthropic", "model": SONNET}]}], "keys": keys}
    env = policy_env(tmp, policy, ANTHROPIC_API_KEY="sk-ant-gateway-own-0000")
    with running_stack(tmp, env, slowed(tmp, (SONNET,))) as (url, _):
        yield url, tmp / "ledger.sqlite"


def burst(url: str, key: str, n: int, cache_key: bool = False) -> tuple[list, list[int]]:
    """`n` concurrent Chat Completions requests with `max_tokens` set, each with its own manual as its system
    message (and its own `prompt_cache_key`, where asked): their answers (or 429s) and the sizes of their bodies."""
    sizes: list[int] = []

    async def sized(request: httpx.Request) -> None:
        sizes.append(len(request.content))

    async def run() -> list:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0,
                                    http_client=openai.DefaultAsyncHttpxClient(event_hooks={"request": [sized]}))

        async def one(i: int):
            extra = {"prompt_cache_key": f"manual-{i}"} if cache_key else {}
            try:
                return await client.chat.completions.create(
                    model=SONNET, max_tokens=MAX_TOKENS, **extra,
                    messages=[{"role": "system", "content": manual(i)}, {"role": "user", "content": "Which dock first?"}])
            except openai.RateLimitError as e:
                return e
        return await asyncio.gather(*(one(i) for i in range(n)))
    return asyncio.run(run()), sizes


def written(answer: openai.types.chat.ChatCompletion) -> int:
    """The prompt tokens Claude wrote to its cache, as the gateway reports them to a Chat Completions caller."""
    return getattr(answer.usage.prompt_tokens_details, "cache_write_tokens", 0) or 0


def test_a_translated_unmarked_prompt_is_held_at_claudes_input_price(stack):
    url, ledger = stack
    answers, sizes = burst(url, PLAIN, 6)
    answered = [a for a in answers if not isinstance(a, Exception)]
    assert admitted(BUDGETS["plain"], sizes, WRITE_1H) == 3
    assert len(answered) == admitted(BUDGETS["plain"], sizes, INPUT) == 5, answers
    assert not any(map(written, answered))     # Claude wrote none of it: nothing marked it
    spent = settled_spend(ledger, "plain", len(answered))
    assert spent <= BUDGETS["plain"] + Decimal(max(sizes)) / BYTES_PER_TOKEN * INPUT / MTOK, spent


def test_a_translated_prompt_cache_key_is_held_at_the_five_minute_write(stack):
    url, ledger = stack
    answers, sizes = burst(url, KEYED, 6, cache_key=True)
    answered = [a for a in answers if not isinstance(a, Exception)]
    assert len(answered) == admitted(BUDGETS["keyed"], sizes, WRITE_5M) == 4, answers
    assert all(map(written, answered))         # the automatic marker wrote each prompt
    spent = settled_spend(ledger, "keyed", len(answered))
    assert spent <= BUDGETS["keyed"] + Decimal(max(sizes)) / BYTES_PER_TOKEN * WRITE_5M / MTOK, spent
