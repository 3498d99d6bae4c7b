"""The SDK wrapper prices a call Google ran as a shut-down model's replacement as the gateway does: from 2026-12-01
gemini-2.5-pro calls run as gemini-3.8-flash and are billed at its $0.75 input / $3.75 output per MTok until
2026-12-31 (https://ai.google.dev/gemini-api/docs/deprecations; shared/reference/cost-truth-2026-11.md item 9 and
line 111), the answer's modelVersion naming it. The wrapped google-genai client against mock-providers on
2026-12-02, the wrapper's clock on that day too."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from decimal import Decimal
from types import SimpleNamespace

from google import genai
from google.genai import types

import prefixgate
from prefixgate.sdk import Ledger, exchange
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.support_services import ServerThread

DAY = datetime(2026, 12, 2, 12, tzinfo=UTC)
FLASH_38 = (Decimal("0.75"), Decimal("3.75"))      # USD per million tokens, input and output (thinking included)


def golden(usage: types.GenerateContentResponseUsageMetadata) -> Decimal:
    assert not usage.cached_content_token_count          # a short prompt: nothing cached
    output = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
    return (usage.prompt_token_count * FLASH_38[0] + output * FLASH_38[1]) / 1_000_000


def test_a_routed_call_is_priced_as_the_model_that_ran(monkeypatch):
    monkeypatch.setattr(exchange, "time", SimpleNamespace(time=DAY.timestamp, perf_counter=time.perf_counter))
    ledger = Ledger()
    with ServerThread(mock_app(MockContext(today=DAY.date())), log_level="critical") as mock:
        options = types.HttpOptions(base_url=mock.url, retry_options=types.HttpRetryOptions(attempts=1))
        client = prefixgate.wrap(genai.Client(api_key="AIza-retired-0123456789abcdef", http_options=options),
                                 ledger=ledger)
        whole = client.models.generate_content(model="gemini-2.5-pro", contents="Where is order 7?")
        streamed = list(client.models.generate_content_stream(model="gemini-2.5-pro", contents="And order 8?"))
    assert whole.model_version == streamed[-1].model_version == "gemini-3.8-flash"
    assert [r.model for r in ledger.records] == ["gemini-3.8-flash"] * 2
    assert [Decimal(r.cost_usd) for r in ledger.records] == [golden(whole.usage_metadata),
                                                              golden(streamed[-1].usage_metadata)]
    assert all(any("gemini-2.5-pro retired on 2026-12-01" in line for line in r.explanation) for r in ledger.records)
