"""A request with its own output limit holds its prompt at the dearest rate it may be billed at, as one without does:
the real anthropic client through `prefixgate serve` over `prefixgate mock-providers`, on a route whose planner
sends requests as written, so the caller's own `cache_control: {"ttl": "1h"}` marks reach Claude and each distinct
prompt is written for an hour, billed at twice the input price.

Admission used to hold such a request's prompt at the plain input price: four concurrent ones against a $0.06 budget
(which one plain hold, $0.053, fits) admitted two, and the key spent $0.175, past the documented bound of its budget
and one request."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import anthropic
import pytest

from prefixgate.ledger import read_records
from prefixgate.policies.schema import hash_key
from tests.support_services import wait_until
from tests.support_stack import policy_env, running_stack, slowed

pytestmark = pytest.mark.slow

SONNET = "claude-sonnet-5-5"
# Anthropic's published prices for Claude Sonnet 5.5, USD per million tokens: input $2, a 1-hour cache write $4
# (twice the input price), output $10.
INPUT, WRITE_1H, OUTPUT = Decimal(2), Decimal(4), Decimal(10)
MTOK = Decimal(10**6)
BUDGET = Decimal("0.06")
KEY = "pg-capped-writes-0001"


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """(gateway URL, ledger path)."""
    tmp = tmp_path_factory.mktemp("capped-writes")
    policy = {"routes": [{"name": "as-sent", "models": ["claude-*"], "planner": "off",
                          "targets": [{"upstream": "anthropic"}]}],
              "keys": [{"name": "writer", "key_sha256": hash_key(KEY), "budget": {"usd": float(BUDGET), "period": "total"}}]}
    env = policy_env(tmp, policy, ANTHROPIC_API_KEY="sk-ant-gateway-own-0000")
    with running_stack(tmp, env, slowed(tmp, (SONNET,))) as (url, _):
        yield url, tmp / "ledger.sqlite"


def manual(n: int) -> str:
    """A prompt of about 21,800 tokens (26,500 by the body's size / 4), none of it shared with another's."""
    return " ".join(f"Manual {n}, clause {j}: every outbound pallet leaves the Lisbon warehouse after weighing."
                    for j in range(1200))


def cost(usage: anthropic.types.Usage) -> Decimal:
    """A Messages answer's usage at the published prices."""
    assert not usage.cache_creation.ephemeral_5m_input_tokens and not usage.cache_read_input_tokens
    return (usage.input_tokens * INPUT + usage.cache_creation.ephemeral_1h_input_tokens * WRITE_1H
            + usage.output_tokens * OUTPUT) / MTOK


def test_capped_requests_writing_hour_long_caches_keep_the_budget(stack):
    url, ledger = stack

    async def burst() -> list:
        client = anthropic.AsyncAnthropic(base_url=url, api_key=KEY, max_retries=0)

        async def one(n: int):
            try:
                return await client.messages.create(
                    model=SONNET, max_tokens=16, messages=[{"role": "user", "content": "Which dock first?"}],
                    system=[{"type": "text", "text": manual(n), "cache_control": {"type": "ephemeral", "ttl": "1h"}}])
            except anthropic.RateLimitError as e:
                return e
        return await asyncio.gather(*(one(n) for n in range(4)))

    answers = asyncio.run(burst())
    answered = [a for a in answers if not isinstance(a, anthropic.RateLimitError)]
    assert answered and len(answered) < len(answers), answers
    costs = [cost(a.usage) for a in answered]
    # Each answer wrote its prompt for an hour: twice the input price, more than the whole budget.
    assert all(a.usage.cache_creation.ephemeral_1h_input_tokens > 20_000 for a in answered), answers
    assert all(c > BUDGET for c in costs), costs

    def rows() -> list[dict]:
        return [r for r in read_records(str(ledger)) if r["key"] == "writer" and r["status"] == 200]
    wait_until(lambda: len(rows()) == len(answered), 15, "the answers' ledger rows")
    spent = sum((Decimal(r["cost_usd"]) for r in rows()), Decimal(0))
    assert spent == sum(costs)
    # Concurrent requests overshoot a key's budget by at most one request (docs/security.md, "Budgets bind").
    assert spent <= BUDGET + max(costs), (spent, costs)
