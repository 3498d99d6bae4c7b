"""Answers the application stopped reading before the provider reported their usage, through the real openai
SDK against `prefixgate mock-providers`: the provider ran (and billed) them, so the record prices the prompt
from the sent body's size (4 bytes a token, docs/sdk.md) and an output token per event read, as the gateway
prices a stream cut short, and never records them as unpriced nothing."""

from __future__ import annotations

from decimal import Decimal

import httpx
import openai

import prefixgate
from prefixgate.sdk import Ledger
from tests.sdk.support_sdk import OPENAI_MODEL, dated_system, fresh_key

ASK = dict(model=OPENAI_MODEL, max_tokens=16,
           messages=[{"role": "system", "content": dated_system(3)}, {"role": "user", "content": "Where is my parcel?"}])


def wrapped(url: str, ledger: Ledger, sent: list[bytes]) -> openai.OpenAI:
    hooks = {"request": [lambda request: sent.append(request.content)]}
    raw = openai.OpenAI(api_key=fresh_key(), base_url=url + "/v1", max_retries=0,
                        http_client=httpx.Client(event_hooks=hooks))
    return prefixgate.wrap(raw, ledger=ledger, route="parcels")


def test_a_stream_broken_off_before_its_usage_is_priced_at_its_prompt(mock_url):
    ledger, sent = Ledger(), []
    stream = wrapped(mock_url, ledger, sent).chat.completions.create(**ASK, stream=True)
    for _ in stream:
        break
    stream.close()
    (rec,) = ledger.records
    assert rec.status == 200 and "closed before it ended" in rec.error
    # The inner client's hook sees the body the wrapper sent: 4 bytes a token, rounded up.
    assert rec.uncached_input == -(-len(sent[0]) // 4) > 300
    assert rec.output >= 1
    assert rec.cost_usd is not None and Decimal(rec.cost_usd) > 0
    assert any(line.startswith("usage estimated: the answer was cut") for line in rec.explanation)
    assert ledger.summary()["unpriced_requests"] == 0


def test_an_answer_whose_body_was_never_read_is_priced_at_its_prompt(mock_url):
    ledger, sent = Ledger(), []
    with wrapped(mock_url, ledger, sent).chat.completions.with_streaming_response.create(**ASK):
        pass
    (rec,) = ledger.records
    assert rec.uncached_input == -(-len(sent[0]) // 4) > 300 and rec.output == 0
    assert rec.cost_usd is not None and Decimal(rec.cost_usd) > 0
