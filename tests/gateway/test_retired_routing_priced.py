"""From 2026-12-01 Google routes calls to gemini-2.5-pro to gemini-3.8-flash and bills them at gemini-3.8-flash's
rates (https://ai.google.dev/gemini-api/docs/deprecations; shared/reference/cost-truth-2026-11.md item 9); the
answer's modelVersion names the model that ran. Through the gateway with the real google-genai client, to
mock-providers on the same day as the gateway's clock: before the date the ledger prices the call as gemini-2.5-pro,
after it as gemini-3.8-flash and names that model, whole and streamed."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from google import genai
from google.genai import types

from prefixgate.ledger import read_records
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

# USD per million tokens (input, output), a prompt of <= 200K tokens. gemini-2.5-pro: $1.25 / $10
# (https://ai.google.dev/gemini-api/docs/pricing; shared/reference/provider-caching.md line 233). gemini-3.8-flash:
# $0.75 / $3.75 until 2026-12-31 (cost-truth-2026-11.md line 111).
PRO = (Decimal("1.25"), Decimal("10"))
FLASH_38 = (Decimal("0.75"), Decimal("3.75"))


def stack(folder, day: datetime):
    """The gateway's clock and the mock's calendar both on `day`."""
    clock = folder / "clock"
    clock.write_text(str(day.timestamp() - datetime.now(UTC).timestamp()))
    mock = ServerThread(mock_app(MockContext(today=day.date())), log_level="critical")
    return mock, clock


def calls(tmp_path, day: datetime) -> tuple[list, list[dict]]:
    """A whole and a streamed call for gemini-2.5-pro through the gateway on `day`: (usage metadata, records)."""
    mock, clock = stack(tmp_path, day)
    with pytest.MonkeyPatch.context() as mp, mock:
        mp.setenv("GEMINI_API_KEY", "gk-retired-0123456789abcdef")
        settings = settings_for(mock.url, tmp_path, clock_offset_file=str(clock))
        with running_gateway(settings) as gw:
            client = genai.Client(api_key="caller", http_options=types.HttpOptions(base_url=gw.url,
                                                                                  api_version="v1beta"))
            whole = client.models.generate_content(model="gemini-2.5-pro", contents="Where is order 7?")
            streamed = list(client.models.generate_content_stream(model="gemini-2.5-pro", contents="And order 8?"))
            wait_until(lambda: len(read_records(settings.ledger_path)) >= 2, 10, "two ledger records")
    records = sorted(read_records(settings.ledger_path), key=lambda r: r["ts"])
    return [(whole.model_version, whole.usage_metadata), (streamed[-1].model_version, streamed[-1].usage_metadata)], records


def golden(usage, price: tuple[Decimal, Decimal]) -> Decimal:
    assert not usage.cached_content_token_count          # a short prompt: nothing cached, every token at list price
    output = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
    return (usage.prompt_token_count * price[0] + output * price[1]) / 1_000_000


def test_after_the_shutdown_a_call_is_priced_as_the_model_google_ran(tmp_path):
    answers, records = calls(tmp_path, datetime(2026, 12, 2, 12, tzinfo=UTC))
    assert [version for version, _ in answers] == ["gemini-3.8-flash"] * 2
    assert [r["model"] for r in records] == ["gemini-3.8-flash"] * 2
    assert [Decimal(r["cost_usd"]) for r in records] == [golden(usage, FLASH_38) for _, usage in answers]
    assert all(any("gemini-2.5-pro retired on 2026-12-01" in line and "gemini-3.8-flash" in line
                   for line in r["explanation"]) for r in records)


def test_before_the_shutdown_it_is_priced_as_asked(tmp_path):
    answers, records = calls(tmp_path, datetime(2026, 11, 30, 12, tzinfo=UTC))
    assert [version for version, _ in answers] == ["gemini-2.5-pro"] * 2
    assert [r["model"] for r in records] == ["gemini-2.5-pro"] * 2
    assert [Decimal(r["cost_usd"]) for r in records] == [golden(usage, PRO) for _, usage in answers]
