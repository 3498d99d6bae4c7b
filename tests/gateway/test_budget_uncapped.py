"""An answer that sets no output limit keeps its key's budget: real openai and anthropic clients through `prefixgate
serve` over `prefixgate mock-providers`, whose models here are long-winded (`answer_words`: an answer runs 20,000
words unless its request's limit cuts it, as a real one without a limit may run to the model's own).

Admission used to hold 4,096 output tokens for such a request whatever it could run to, so a key with $0.06 left
admitted two concurrent requests to Claude Sonnet 5.5 and was billed $0.40 for them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import anthropic
import openai
import pytest

from prefixgate.dialects.output_limit import with_output_limit
from prefixgate.ledger import read_records
from prefixgate.policies.schema import hash_key
from tests.support_stack import policy_env, running_stack, slowed

pytestmark = pytest.mark.slow

SONNET, GPT = "claude-sonnet-5-5", "gpt-5.4"
# Published prices, USD per million output tokens: Sonnet 5.5 $10 (input $2), GPT-5.4 $15 (input $2.50).
SONNET_OUTPUT, GPT_OUTPUT = Decimal(10), Decimal(15)
SONNET_LIMIT = 128_000      # Sonnet 5.5's documented output limit: what an OpenAI caller without one is given
WORDS = 20_000              # what the mock's models write when nothing cuts them
BUDGETS = {"tight": 0.06, "several": 4.0, "ample": 100.0}
HEADER = "x-prefixgate-budget-bound"
QUESTION = [{"role": "user", "content": "Write the full operations manual for the Lisbon warehouse."}]


def key(name: str) -> str:
    return f"pg-uncapped-{name}-0001"


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """(gateway URL, ledger path)."""
    tmp = tmp_path_factory.mktemp("uncapped")
    policy = {"routes": [{"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
                         {"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}],
              "keys": [{"name": name, "key_sha256": hash_key(key(name)), "budget": {"usd": usd, "period": "total"}}
                       for name, usd in BUDGETS.items()]}
    env = policy_env(tmp, policy, ANTHROPIC_API_KEY="sk-ant-gateway-own-0000")
    with running_stack(tmp, env, slowed(tmp, (SONNET, GPT), f"latency=1.0;answer_words={WORDS}")) as (url, _):
        yield url, tmp / "ledger.sqlite"


def spent(ledger: Path, name: str, answered: int) -> Decimal:
    """What the key's ledger rows (once `answered` of them are answers) cost in all (its refusals cost nothing)."""
    deadline = time.monotonic() + 15
    while True:
        rows = [r for r in read_records(str(ledger)) if r["key"] == name]
        if sum(r["status"] == 200 for r in rows) >= answered or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert sum(r["status"] == 200 for r in rows) == answered, rows
    return sum((Decimal(r["cost_usd"] or 0) for r in rows), Decimal(0))


def test_concurrent_uncapped_answers_never_spend_past_the_budget(stack):
    url, ledger = stack

    async def burst() -> list:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=key("tight"), max_retries=0)
        async def one():
            try:
                return await client.chat.completions.with_raw_response.create(model=SONNET, messages=QUESTION)
            except openai.RateLimitError as e:
                return e
        return await asyncio.gather(*(one() for _ in range(6)))

    answers = asyncio.run(burst())
    refused = [a for a in answers if isinstance(a, openai.RateLimitError)]
    answered = [a for a in answers if not isinstance(a, openai.RateLimitError)]
    # While the admitted answer runs it holds what the budget has left. The others are told to retry later (a rate
    # limit's 429 with Retry-After, which SDKs retry), not that the budget is spent: none of it is spent yet. Its
    # OpenAI type is `tokens`: OpenAI's rate-limit guide counts max_tokens against a minute's tokens on admission.
    assert answered and refused, answers
    for e in refused:
        assert e.code == "rate_limit_exceeded" and e.type == "tokens" and "hold" in e.message, e
        assert e.response.headers["retry-after"] == "5" and "x-should-retry" not in e.response.headers
    for raw in answered:        # cut at what the budget pays for, and told so
        reply = raw.parse()
        assert reply.choices[0].finish_reason == "length"
        bound = int(raw.headers[HEADER])
        assert reply.usage.completion_tokens <= bound < Decimal("0.06") / SONNET_OUTPUT * 10**6
    assert spent(ledger, "tight", len(answered)) <= Decimal("0.06")
    with pytest.raises(openai.RateLimitError) as after:     # and once it is spent, nothing is left to start another
        openai.OpenAI(base_url=url + "/v1", api_key=key("tight"), max_retries=0).chat.completions.create(
            model=SONNET, messages=QUESTION)
    assert after.value.code == "insufficient_quota" and after.value.response.headers["x-should-retry"] == "false"


def test_several_fit_at_full_length_and_the_last_is_bounded(stack):
    # $4 holds two GPT-5.4 answers at their worst (128,000 tokens at $15/MTok: $1.92 each) and a third bounded to
    # what is left; a fourth concurrent one finds nothing left.
    url, ledger = stack

    async def streamed() -> tuple[str, int, str | None]:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=key("several"), max_retries=0)
        try:
            raw = await client.chat.completions.with_raw_response.create(
                model=GPT, messages=QUESTION, stream=True, stream_options={"include_usage": True})
        except openai.RateLimitError:
            return "refused", 0, None
        finish, tokens = "", 0
        async for chunk in raw.parse():
            finish = next((c.finish_reason for c in chunk.choices if c.finish_reason), finish)
            tokens = chunk.usage.completion_tokens if chunk.usage else tokens
        return finish, tokens, raw.headers.get(HEADER)

    async def crowd() -> list:
        return await asyncio.gather(*(streamed() for _ in range(4)))

    answers = asyncio.run(crowd())
    assert sorted(finish for finish, *_ in answers) == ["length", "refused", "stop", "stop"], answers
    assert all(header is None for finish, _, header in answers if finish == "stop")
    [(_, cut_tokens, bound)] = [a for a in answers if a[0] == "length"]
    assert cut_tokens <= int(bound) < (Decimal(4) - 2 * 128_000 * GPT_OUTPUT / 10**6) / GPT_OUTPUT * 10**6
    assert spent(ledger, "several", 3) <= Decimal(4)


def test_an_ample_budget_leaves_the_answer_uncapped_and_a_callers_limit_unchanged(stack):
    url, _ = stack
    raw = openai.OpenAI(base_url=url + "/v1", api_key=key("ample"), max_retries=0).chat.completions.with_raw_response\
        .create(model=SONNET, messages=QUESTION)
    reply = raw.parse()
    # The whole 20,000-word answer: Claude was asked for its own limit, not a budget's.
    assert reply.choices[0].finish_reason == "stop" and reply.usage.completion_tokens > 4096 and HEADER not in raw.headers
    assert reply.usage.completion_tokens < SONNET_LIMIT
    native = anthropic.Anthropic(base_url=url, api_key=key("ample"), max_retries=0).messages.with_raw_response.create(
        model=SONNET, max_tokens=300, messages=QUESTION)
    message = native.parse()
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens <= 300 and HEADER not in native.headers


# Each format's own output-limit field, as its API reference names it.
LIMIT_FIELDS = {"openai": ("max_completion_tokens",), "responses": ("max_output_tokens",),
                "anthropic": ("max_tokens",), "bedrock_invoke": ("max_tokens",), "vertex_anthropic": ("max_tokens",),
                "gemini": ("generationConfig", "maxOutputTokens"), "vertex_gemini": ("generationConfig", "maxOutputTokens"),
                "bedrock_converse": ("inferenceConfig", "maxTokens"),
                "interactions": ("generation_config", "max_output_tokens")}


@pytest.mark.parametrize("fmt", sorted(LIMIT_FIELDS))
def test_the_bound_goes_in_each_formats_own_field(fmt):
    params = {"generationConfig": {"temperature": 0.2}} if "gemini" in fmt else {"temperature": 0.2}
    value = with_output_limit(fmt, params, 5986)
    for part in LIMIT_FIELDS[fmt]:
        value = value[part]
    assert value == 5986
    # A Gemini body written in snake_case keeps its spelling (the API takes either; the gateway adds no second one).
    assert with_output_limit("gemini", {"generation_config": {}}, 7) == {"generation_config": {"max_output_tokens": 7}}
