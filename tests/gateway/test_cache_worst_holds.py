"""What an explicit cache may cost is held against the key's budget until it is booked, where its tokens are not in
the body: a create naming an uploaded file, and an extension (PATCH) of a cache already made.

Google's own caching guide uploads a file and caches it (`contents=[file]`): the cache's tokens are the file's
(`usageMetadata`), the body a few hundred bytes. Held at the body's size, six concurrent day-long creates of a 190 kB
file (~47,000 tokens, $1.20 each at Gemini 3.5 Flash's $1.50 input + $1.00/MTok-h storage) on a key with $0.05 were
all admitted. An extension was held at nothing: six concurrent ones, each buying 23 hours of a 47,000-token cache
($1.08), passed a $0.05 budget not yet spent. Through a real gateway in front of the mock providers, whose creates
and extensions take a second."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator

import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from prefixgate.ledger import read_records
from prefixgate.simulation.mock.faults import FaultPlan
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

FLASH = "gemini-3.5-flash"
MANUAL = " ".join(f"Section {i}: the Lisbon warehouse receives pallets at dock {i % 7}." for i in range(3000))
BUILDER, READER = "pg-cacheworst-builder-0001", "pg-cacheworst-reader-0001"
SLOW = [{"fault": "latency=1.0", "model": FLASH}, {"fault": "latency=1.0", "path": "/v1beta/cachedContents/"}]


@pytest.fixture
def gateway(tmp_path, monkeypatch) -> Iterator[tuple[genai.Client, genai.Client, str]]:
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaSecretGeminiKey000000000000444")
    monkeypatch.setenv("BUILDER_KEY", BUILDER)
    monkeypatch.setenv("READER_KEY", READER)
    with ServerThread(mock_app(MockContext(faults=FaultPlan.from_config({"faults": SLOW}))), log_level="critical") as mock:
        settings = settings_for(mock.url, tmp_path)
        policy = policy_for(settings, {
            "routes": [{"name": "flash", "models": [FLASH], "targets": [{"upstream": "gemini"}]}],
            "keys": [{"name": "builder", "key_env": "BUILDER_KEY", "tenant": "acme"},
                     {"name": "reader", "key_env": "READER_KEY", "tenant": "acme",
                      "budget": {"usd": 0.05, "period": "total"}}]})
        with running_gateway(settings, policy=policy) as gw:
            builder, reader = (genai.Client(api_key=key, http_options=types.HttpOptions(base_url=gw.url))
                               for key in (BUILDER, READER))
            yield builder, reader, settings.ledger_path


def _at_once(calls) -> list:
    async def one(call):
        try:
            return await call()
        except genai_errors.ClientError as e:
            return e

    async def all_of_them() -> list:
        return await asyncio.gather(*(one(call) for call in calls))

    return asyncio.run(all_of_them())


def _one_admitted(answers: list, ledger: str) -> None:
    """One of `answers` went through and was booked at more than the key's budget; the others were 429s."""
    refused = [a for a in answers if isinstance(a, genai_errors.ClientError)]
    # The first one's hold is more than the key has, so the others wait for it (a key overshoots by one at most).
    assert len(refused) == len(answers) - 1 and all(e.code == 429 for e in refused), answers
    booked = lambda: [r for r in read_records(ledger) if r["key"] == "reader"]  # noqa: E731
    wait_until(lambda: len(booked()) == 1, 10, "the admitted call booked")
    assert float(booked()[0]["cost_usd"]) > 0.5


def test_concurrent_creates_of_a_cached_file_keep_the_budget(gateway):
    builder, reader, ledger = gateway
    made = builder.files.upload(file=io.BytesIO(MANUAL.encode()), config={"mime_type": "text/plain"})
    config = types.CreateCachedContentConfig(contents=[made], ttl="86400s")
    answers = _at_once([lambda: reader.aio.caches.create(model=FLASH, config=config)] * 6)
    created = next(a for a in answers if not isinstance(a, genai_errors.ClientError))
    assert created.usage_metadata.total_token_count > 30_000      # Google counts the file in the cache
    _one_admitted(answers, ledger)


def test_concurrent_extensions_keep_the_budget(gateway):
    builder, reader, ledger = gateway
    config = types.CreateCachedContentConfig(contents=[MANUAL], ttl="3600s")
    caches = _at_once([lambda: builder.aio.caches.create(model=FLASH, config=config)] * 6)
    assert all(c.usage_metadata.total_token_count > 30_000 for c in caches), caches
    longer = types.UpdateCachedContentConfig(ttl="86400s")
    answers = _at_once([lambda name=c.name: reader.aio.caches.update(name=name, config=longer) for c in caches])
    _one_admitted(answers, ledger)
