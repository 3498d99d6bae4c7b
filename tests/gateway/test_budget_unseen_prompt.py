"""A budget's reservation counts the prompt a request names but does not carry: a real openai client continuing a
stored Responses chain (`previous_response_id`) through `prefixgate serve` to `prefixgate mock-providers`, which
prepends the whole chain upstream as OpenAI does.

Admission used to reserve the body's bytes / 4 only: a continuation a few dozen bytes long was reserved at a few
dozen tokens while the upstream billed the ~40,000-token chain, so concurrent continuations spent their key's hard
budget several times over."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from prefixgate.ledger import read_records
from prefixgate.policies.schema import hash_key
from tests.support_stack import policy_env, running_stack, slowed

pytestmark = pytest.mark.slow

GPT = "gpt-5.4"
# GPT-5.4's published prices, USD per million tokens: input $2.50, cached input $0.25, output $15.
INPUT, CACHED, OUTPUT = Decimal("2.50"), Decimal("0.25"), Decimal(15)
BUDGET = Decimal("0.30")        # the tight key's hard budget
BURST = 24                      # concurrent continuations of one chain
OUT = 32                        # each answer's max_output_tokens
FLASH = "gemini-3.5-flash"
# Gemini 3.5 Flash's published prices, USD per million tokens: cached input $0.15 (input $1.50, output $9).
FLASH_CACHED = Decimal("0.15")
READER_BUDGET = Decimal("0.01")     # the key reading a cache of 48,000 tokens ($0.0072 a read)
SHIPPING = "You answer from the shipping manual below.\n" + "Rule: parcels leave within two days. " * 6000
MANUAL = " ".join(f"Section {i}: the Lisbon warehouse receives pallets at dock {i % 7}." for i in range(3000))


def key(name: str) -> str:
    return f"pg-unseen-{name}-0001"


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """(gateway URL, ledger path); two keys of one tenant: `builder` makes the chain, `tight` continues it."""
    tmp = tmp_path_factory.mktemp("unseen")
    policy = {"routes": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
                         {"name": "flash", "models": [FLASH], "targets": [{"upstream": "gemini"}]}],
              "keys": [{"name": name, "key_sha256": hash_key(key(name)), "tenant": "acme",
                        "budget": {"usd": float(usd), "period": "total"}} for name, usd in (
                  ("builder", 100), ("tight", BUDGET), ("files", BUDGET), ("reader", READER_BUDGET))]}
    with running_stack(tmp, policy_env(tmp, policy), slowed(tmp, (GPT, FLASH))) as (url, _):
        yield url, tmp / "ledger.sqlite"


def rows(ledger: Path, name: str, answered: int) -> list[dict]:
    """The key's ledger rows, once `answered` of them are answers (the gateway settles after it answers)."""
    deadline = time.monotonic() + 15
    while True:
        found = [r for r in read_records(str(ledger)) if r["key"] == name]
        if sum(r["status"] == 200 for r in found) >= answered or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def burst(stack: tuple[str, Path], name: str, **ask) -> tuple[list, list[openai.RateLimitError], Decimal]:
    """BURST concurrent Responses requests `ask`ing the same on key `name`: (answers, refusals, what the key's
    ledger rows say it spent in all)."""
    url, ledger = stack

    async def all_at_once() -> list:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=key(name), max_retries=0)

        async def one():
            try:
                return await client.responses.create(model=GPT, max_output_tokens=OUT, **ask)
            except openai.RateLimitError as e:
                return e
        return await asyncio.gather(*(one() for _ in range(BURST)))

    answers = asyncio.run(all_at_once())
    refused = [a for a in answers if isinstance(a, openai.RateLimitError)]
    answered = [a for a in answers if not isinstance(a, openai.RateLimitError)]
    found = rows(ledger, name, len(answered))
    return answered, refused, sum((Decimal(r["cost_usd"] or 0) for r in found), Decimal(0))


def kept_within_the_budget(answered: list, refused: list[openai.RateLimitError], spent: Decimal) -> None:
    assert spent <= BUDGET, (spent, BUDGET)
    # Each request is reserved at what it names billed uncached (the dearest it can be, over $0.10 here): $0.30
    # holds two at once, and one more each time a running one settles at what it cost.
    assert answered and refused, (answered, refused)
    for e in refused:       # held by the running ones, not spent: a rate limit the SDKs retry (OpenAI's type `tokens`)
        assert e.type == "tokens" and e.response.headers["retry-after"] == "5", e


def test_concurrent_continuations_of_a_long_chain_keep_the_budget(stack):
    url, _ = stack
    builder = openai.OpenAI(base_url=url + "/v1", api_key=key("builder"), max_retries=0)
    turn = builder.responses.create(model=GPT, input=MANUAL + "\nSummarise the receiving rules.", max_output_tokens=OUT)
    for question in ("Which docks take refrigerated goods?", "And on Sundays?", "List the exceptions."):
        turn = builder.responses.create(model=GPT, previous_response_id=turn.id, input=question, max_output_tokens=OUT)
    chain = turn.usage.input_tokens + turn.usage.output_tokens
    assert chain > 30_000, turn.usage        # the chain the upstream prepends: far more than any body below
    answered, refused, spent = burst(stack, "tight", previous_response_id=turn.id, input="Thanks!")
    kept_within_the_budget(answered, refused, spent)
    for reply in answered:      # each billed the chain, read from cache at best
        assert reply.usage.input_tokens >= chain
    assert spent >= len(answered) * chain * CACHED / 10**6


def test_concurrent_requests_naming_a_big_file_keep_the_budget(stack):
    url, _ = stack
    builder = openai.OpenAI(base_url=url + "/v1", api_key=key("builder"), max_retries=0)
    made = builder.files.create(file=("manual.txt", MANUAL.encode()), purpose="user_data")
    assert made.bytes == len(MANUAL.encode())
    asked = [{"role": "user", "content": [{"type": "input_file", "file_id": made.id},
                                          {"type": "input_text", "text": "Which docks take refrigerated goods?"}]}]
    answered, refused, spent = burst(stack, "files", input=asked)
    kept_within_the_budget(answered, refused, spent)
    for reply in answered:      # the upstream read the file's text into the prompt
        assert reply.usage.input_tokens > 30_000


def test_a_chain_the_gateway_has_no_count_for_is_noted(stack):
    url, ledger = stack
    builder = openai.OpenAI(base_url=url + "/v1", api_key=key("builder"), max_retries=0)
    first = builder.responses.create(model=GPT, input="Hello.", max_output_tokens=OUT)
    assert first.usage.input_tokens > 0
    # A chain it never counted (recorded before this version, say) keeps the body's estimate, and says so.
    db = sqlite3.connect(str(ledger))
    deadline = time.monotonic() + 15
    while not db.execute("SELECT 1 FROM stored_ids WHERE id = ? AND tokens IS NOT NULL", (first.id,)).fetchone():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    db.execute("UPDATE stored_ids SET tokens = NULL WHERE id = ?", (first.id,))
    db.commit()
    db.close()
    second = builder.responses.create(model=GPT, previous_response_id=first.id, input="Again.", max_output_tokens=OUT)
    deadline = time.monotonic() + 15
    while not (row := next((r for r in read_records(str(ledger)) if r["id"] and r["status"] == 200
                            and any(first.id in line for line in r["explanation"])), None)):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert any("could not see the stored chain before response " + first.id in line for line in row["explanation"])
    assert second.usage.input_tokens > first.usage.input_tokens


def test_concurrent_requests_reading_a_big_explicit_cache_keep_the_budget(stack):
    # Each read of the cache costs $0.0072, the reader's budget is $0.01: reserved at its read, two run at once and
    # the rest are told to wait; reserved at the body's few tokens, all six ran and spent $0.045.
    url, ledger = stack
    builder, reader = (genai.Client(api_key=key(name), http_options=types.HttpOptions(
        base_url=url, api_version="v1beta")) for name in ("builder", "reader"))
    cache = builder.caches.create(model=FLASH, config=types.CreateCachedContentConfig(
        system_instruction=SHIPPING, ttl="600s"))
    read = cache.usage_metadata.total_token_count * FLASH_CACHED / 10**6
    assert read > READER_BUDGET / 2, read

    async def one():
        try:
            return await reader.aio.models.generate_content(model=FLASH, contents="When does my parcel leave?", config=(
                types.GenerateContentConfig(cached_content=cache.name, max_output_tokens=OUT)))
        except genai_errors.ClientError as e:
            return e

    async def all_at_once() -> list:
        return await asyncio.gather(*(one() for _ in range(6)))

    answers = asyncio.run(all_at_once())
    answered = [a for a in answers if not isinstance(a, genai_errors.ClientError)]
    assert all(a.code == 429 for a in answers if isinstance(a, genai_errors.ClientError)), answers
    found = rows(ledger, "reader", len(answered))
    spent = sum((Decimal(r["cost_usd"] or 0) for r in found), Decimal(0))
    assert spent <= READER_BUDGET + max(Decimal(r["cost_usd"] or 0) for r in found), (len(answered), spent)
    assert 0 < len(answered) <= 2, answers
