"""A budget's reservation counts a Gemini file a request names by the URI the Files API gave it (what google-genai
sends for a `File` in `contents`: `fileData.fileUri` = `https://generativelanguage.googleapis.com/v1beta/files/x`),
as it counts one named `files/x`: the file's bytes / 4, as the file quota counts it. Reserved at the body's few
tokens, four concurrent reads of a 190 kB file (~47,500 tokens, $0.07 each at Gemini 3.5 Flash's $1.50 per million
input tokens) on a key with a $0.05 hard budget were all admitted and spent $0.28."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Iterator
from decimal import Decimal

import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from prefixgate.ledger import read_records
from prefixgate.simulation.mock.faults import FaultPlan
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread

FLASH = "gemini-3.5-flash"
INPUT = Decimal("1.50")         # Gemini 3.5 Flash's published input price, USD per million tokens
BUDGET = Decimal("0.05")
MANUAL = " ".join(f"Section {i}: the Lisbon warehouse receives pallets at dock {i % 7}." for i in range(3000))
BUILDER, READER = "pg-gemfile-builder-0001", "pg-gemfile-reader-0001"


@pytest.fixture
def gateway(tmp_path, monkeypatch) -> Iterator[tuple[str, str]]:
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaSecretGeminiKey000000000000333")
    monkeypatch.setenv("BUILDER_KEY", BUILDER)
    monkeypatch.setenv("READER_KEY", READER)
    # Each answer takes a second: every request of the burst is admitted before the first one ends.
    slow = MockContext(faults=FaultPlan.from_config({"faults": [{"fault": "latency=1.0", "model": FLASH}]}))
    with ServerThread(mock_app(slow), log_level="critical") as mock:
        settings = settings_for(mock.url, tmp_path)
        policy = policy_for(settings, {
            "routes": [{"name": "flash", "models": [FLASH], "targets": [{"upstream": "gemini"}]}],
            "keys": [{"name": "builder", "key_env": "BUILDER_KEY", "tenant": "acme"},
                     {"name": "reader", "key_env": "READER_KEY", "tenant": "acme",
                      "budget": {"usd": float(BUDGET), "period": "total"}}]})
        with running_gateway(settings, policy=policy) as gw:
            yield gw.url, settings.ledger_path


def test_concurrent_reads_of_a_file_named_by_its_uri_keep_the_budget(gateway):
    url, ledger = gateway
    builder, reader = (genai.Client(api_key=key, http_options=types.HttpOptions(base_url=url)) for key in (BUILDER, READER))
    made = builder.files.upload(file=io.BytesIO(MANUAL.encode()), config={"mime_type": "text/plain"})
    assert made.uri and made.uri.startswith("https://generativelanguage.googleapis.com/") and made.size_bytes > 180_000
    assert made.size_bytes // 4 * INPUT / 10**6 > BUDGET      # one read costs more than the key has

    async def one():
        try:
            return await reader.aio.models.generate_content(model=FLASH, contents=[made, "Which docks take cold goods?"],
                                                            config=types.GenerateContentConfig(max_output_tokens=16))
        except genai_errors.ClientError as e:
            return e

    async def all_at_once() -> list:
        return await asyncio.gather(*(one() for _ in range(4)))

    answers = asyncio.run(all_at_once())
    refused = [a for a in answers if isinstance(a, genai_errors.ClientError)]
    assert len(refused) == 3 and all(e.code == 429 for e in refused), answers     # the first one's hold is the budget
    deadline = time.monotonic() + 10
    while not (found := [r for r in read_records(ledger) if r["key"] == "reader" and r["status"] == 200]):
        assert time.monotonic() < deadline, "the answered read's ledger record"
        time.sleep(0.1)
    assert len(found) == 1 and found[0]["uncached_input"] > 40_000
