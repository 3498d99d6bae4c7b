"""A request with its own output limit holds its prompt at the rate its body lets the provider bill it at: the real
anthropic client through `prefixgate serve` over `prefixgate mock-providers`, on a route whose planner sends requests
as written.

Where the caller's own `cache_control: {"ttl": "1h"}` marks reach Claude, each distinct prompt is written for an
hour, billed at twice the input price, and held so. Admission used to hold such a request's prompt at the plain input
price: four concurrent ones against a $0.06 budget (which one plain hold, $0.053, fits) admitted two, and the key
spent $0.175, past the documented bound of its budget and one request.

Where nothing marks the prompt, Claude writes nothing (it caches only at a marked breakpoint or the top-level
automatic marker), so the prompt is held at the input price. It was held at the hour-long write price all the same:
six concurrent ones against $0.24 admitted three where five fit, on Anthropic's API and on Vertex alike."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import anthropic
import httpx
import openai
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
MAX_TOKENS = 16
# docs/gateway.md, "Budgets bind": admission counts a body's size / 4 as its prompt tokens.
BYTES_PER_TOKEN = 4
# On Vertex's regional endpoints (us-east5 here) Claude from Sonnet 4.5 on costs 10% more: $2.20, $4.40, $11
# (https://cloud.google.com/vertex-ai/generative-ai/pricing).
VERTEX_INPUT, VERTEX_WRITE_1H, VERTEX_OUTPUT = Decimal("2.20"), Decimal("4.40"), Decimal(11)
# GPT-6.2 Sol's, from its model page (https://developers.openai.com/api/docs/models/gpt-6.2-sol): input $2, a
# 12-hour cache write $5, output $10. OpenAI writes a prompt's prefix with no marker asking.
GPT, GPT_WRITE_12H, GPT_OUTPUT = "gpt-6.2-sol", Decimal(5), Decimal(10)
ON_VERTEX = "sonnet-on-vertex"      # the name the Vertex route answers to
WRITER, PLAIN, VERTEXED, GPT_KEY = ("pg-capped-writes-0001", "pg-capped-plain-0002", "pg-capped-vertex-0003",
                                    "pg-capped-gpt-0004")
BUDGETS = {"writer": Decimal("0.06"), "plain": Decimal("0.24"), "vertexed": Decimal("0.24"), "gpt": Decimal("0.24")}


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """(gateway URL, ledger path)."""
    tmp = tmp_path_factory.mktemp("capped-writes")
    keys = [{"name": name, "key_sha256": hash_key(secret), "budget": {"usd": float(BUDGETS[name]), "period": "total"},
             "routes": [route]}
            for name, secret, route in (("writer", WRITER, "as-sent"), ("plain", PLAIN, "as-sent"),
                                        ("vertexed", VERTEXED, "via-vertex"), ("gpt", GPT_KEY, "gpt-as-sent"))]
    policy = {"routes": [{"name": name, "models": [model], "planner": "off",
                          "targets": [{"upstream": upstream, "model": target}]}
                         for name, model, upstream, target in (("as-sent", "claude-*", "anthropic", SONNET),
                                                               ("via-vertex", ON_VERTEX, "vertex", SONNET),
                                                               ("gpt-as-sent", GPT, "openai", GPT))], "keys": keys}
    env = policy_env(tmp, policy, ANTHROPIC_API_KEY="sk-ant-gateway-own-0000")
    with running_stack(tmp, env, slowed(tmp, (SONNET, GPT))) as (url, _):
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


def burst(url: str, key: str, n: int, marked: bool, model: str = SONNET) -> tuple[list, list[int]]:
    """`n` concurrent requests with `max_tokens` set, each with its own manual as its system prompt (marked for an
    hour-long write, or not): their answers (or 429s) and the sizes of the bodies the client sent."""
    sizes: list[int] = []

    async def sized(request: httpx.Request) -> None:
        sizes.append(len(request.content))

    async def run() -> list:
        client = anthropic.AsyncAnthropic(base_url=url, api_key=key, max_retries=0, http_client=(
            anthropic.DefaultAsyncHttpxClient(event_hooks={"request": [sized]})))
        mark = {"cache_control": {"type": "ephemeral", "ttl": "1h"}} if marked else {}

        async def one(i: int):
            try:
                return await client.messages.create(
                    model=model, max_tokens=MAX_TOKENS, messages=[{"role": "user", "content": "Which dock first?"}],
                    system=[{"type": "text", "text": manual(i), **mark}])
            except anthropic.RateLimitError as e:
                return e
        return await asyncio.gather(*(one(i) for i in range(n)))
    return asyncio.run(run()), sizes


def admitted(budget: Decimal, sizes: list[int], prompt_price: Decimal, output_price: Decimal = OUTPUT) -> int:
    """How many of these requests a budget admits when each holds its prompt (by size) at `prompt_price` and its
    `max_tokens` at the output price: holds are placed while any of the budget is left (docs/security.md)."""
    hold = max(math.ceil(s / BYTES_PER_TOKEN) for s in sizes) * prompt_price / MTOK + MAX_TOKENS * output_price / MTOK
    assert max(sizes) - min(sizes) < 8, sizes   # one hold for all
    return math.ceil(budget / hold)


def settled_spend(ledger: Path, key: str, answered: int) -> Decimal:
    def rows() -> list[dict]:
        return [r for r in read_records(str(ledger)) if r["key"] == key and r["status"] == 200]
    wait_until(lambda: len(rows()) == answered, 15, "the answers' ledger rows")
    return sum((Decimal(r["cost_usd"]) for r in rows()), Decimal(0))


def test_capped_requests_writing_hour_long_caches_keep_the_budget(stack):
    url, ledger = stack
    answers, sizes = burst(url, WRITER, 4, marked=True)
    answered = [a for a in answers if not isinstance(a, anthropic.RateLimitError)]
    assert len(answered) == admitted(BUDGETS["writer"], sizes, WRITE_1H) == 1, answers
    costs = [cost(a.usage) for a in answered]
    # Each answer wrote its prompt for an hour: twice the input price, more than the whole budget.
    assert all(a.usage.cache_creation.ephemeral_1h_input_tokens > 20_000 for a in answered), answers
    assert all(c > BUDGETS["writer"] for c in costs), costs
    spent = settled_spend(ledger, "writer", len(answered))
    assert spent == sum(costs)
    # Concurrent requests overshoot a key's budget by at most one request (docs/security.md, "Budgets bind").
    assert spent <= BUDGETS["writer"] + max(costs), (spent, costs)


def test_capped_requests_claude_writes_nothing_for_hold_their_prompt_at_the_input_price(stack):
    url, ledger = stack
    answers, sizes = burst(url, PLAIN, 6, marked=False)
    answered = [a for a in answers if not isinstance(a, anthropic.RateLimitError)]
    # Five fit at the input price; held at the hour-long write price, three did.
    assert admitted(BUDGETS["plain"], sizes, WRITE_1H) == 3
    assert len(answered) == admitted(BUDGETS["plain"], sizes, INPUT) == 5, answers
    costs = [cost(a.usage) for a in answered]
    assert all(a.usage.cache_creation.ephemeral_1h_input_tokens == 0 and a.usage.input_tokens > 20_000
               for a in answered), answers
    spent = settled_spend(ledger, "plain", len(answered))
    assert spent == sum(costs)
    assert spent <= BUDGETS["plain"] + max(costs), (spent, costs)


def test_claude_on_vertex_holds_an_unmarked_prompt_at_its_input_price_too(stack):
    """An Anthropic client's request routed to Claude on Vertex goes with the same body, marks as written."""
    url, ledger = stack
    answers, sizes = burst(url, VERTEXED, 6, marked=False, model=ON_VERTEX)
    answered = [a for a in answers if not isinstance(a, anthropic.RateLimitError)]
    assert admitted(BUDGETS["vertexed"], sizes, VERTEX_WRITE_1H, VERTEX_OUTPUT) == 3
    assert len(answered) == admitted(BUDGETS["vertexed"], sizes, VERTEX_INPUT, VERTEX_OUTPUT) == 5, answers
    costs = [(a.usage.input_tokens * VERTEX_INPUT + a.usage.output_tokens * VERTEX_OUTPUT) / MTOK for a in answered]
    assert all(not a.usage.cache_creation_input_tokens for a in answered), answers
    spent = settled_spend(ledger, "vertexed", len(answered))
    assert spent == sum(costs)


def test_a_prompt_openai_writes_unmarked_stays_held_at_its_write_price(stack):
    """OpenAI writes prompts nobody marks, and from GPT-5.6 bills the write: held at its dearest write, as before."""
    url, ledger = stack
    sizes: list[int] = []

    async def sized(request: httpx.Request) -> None:
        sizes.append(len(request.content))

    async def run() -> list:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=GPT_KEY, max_retries=0,
                                    http_client=openai.DefaultAsyncHttpxClient(event_hooks={"request": [sized]}))

        async def one(i: int):
            try:
                return await client.chat.completions.create(
                    model=GPT, max_completion_tokens=MAX_TOKENS,
                    messages=[{"role": "system", "content": manual(i)}, {"role": "user", "content": "Which dock first?"}])
            except openai.RateLimitError as e:
                return e
        return await asyncio.gather(*(one(i) for i in range(6)))

    answers = asyncio.run(run())
    answered = [a for a in answers if not isinstance(a, openai.RateLimitError)]
    assert len(answered) == admitted(BUDGETS["gpt"], sizes, GPT_WRITE_12H, GPT_OUTPUT) == 2, answers
    settled_spend(ledger, "gpt", len(answered))
