"""An attempt the SDK gave up on at its read timeout (it retries, or raises APITimeoutError) had been sent whole: the
provider may have run it and billed the prompt, though its answer never came. It was recorded with no usage and no
cost, so the wrapper's ledger under-counted spend by a prompt per timeout. It is now priced at its prompt alone
(the documented estimate: the body's size at 4 bytes a token, at the input price) and noted as an estimate; an
attempt that never connected ran nothing and is still billed nothing."""

from __future__ import annotations

import math
from decimal import Decimal

import httpx
import openai

import prefixgate
from prefixgate.sdk import Ledger
from prefixgate.simulation.mock.faults import FaultPlan
from prefixgate.simulation.mock.server import MockContext, create_app
from tests.sdk.support_sdk import OPENAI_MODEL, fresh_key
from tests.support_services import ServerThread, refusing_port

GPT_54_INPUT_PER_MTOK = Decimal("2.50")     # https://developers.openai.com/api/docs/models/gpt-5.4
MESSAGES = [{"role": "user", "content": "Which of our plans covers a cracked screen?"}]


def wrapped(url: str, sent: list[bytes]) -> tuple[openai.OpenAI, Ledger]:
    """A wrapped client that gives up on an answer after 1 s and retries once; `sent` gets each body it sends."""
    ledger = Ledger()
    http = httpx.Client(event_hooks={"request": [lambda request: sent.append(request.read())]})
    raw = openai.OpenAI(api_key=fresh_key(), base_url=url + "/v1", max_retries=1, http_client=http,
                        timeout=httpx.Timeout(10, read=1))
    return prefixgate.wrap(raw, ledger=ledger, route="support", tenant="acme"), ledger


def test_an_attempt_given_up_on_at_the_read_timeout_is_priced_at_its_prompt():
    # The mock answers the first request after 3 s (the client has given up at 1 s), the retry at once.
    faults = FaultPlan.from_config({"faults": [{"fault": "latency=3", "provider": "openai", "times": 1}]})
    with ServerThread(create_app(MockContext(faults=faults)), log_level="critical") as mock:
        sent: list[bytes] = []
        client, ledger = wrapped(mock.url, sent)
        assert client.chat.completions.create(model=OPENAI_MODEL, messages=MESSAGES, max_tokens=16).choices
    timed_out, answered = ledger.records
    assert answered.status == 200 and timed_out.status == 0 and "Timeout" in timed_out.error
    tokens = math.ceil(len(sent[0]) / 4)
    assert (timed_out.uncached_input, timed_out.cache_read, timed_out.output) == (tokens, 0, 0)
    assert Decimal(timed_out.cost_usd) == tokens * GPT_54_INPUT_PER_MTOK / 1_000_000
    assert any("estimated" in line for line in timed_out.explanation)


def test_an_attempt_that_never_connected_is_not_priced():
    with refusing_port() as port:
        client, ledger = wrapped(f"http://127.0.0.1:{port}", [])
        try:
            client.chat.completions.create(model=OPENAI_MODEL, messages=MESSAGES, max_tokens=16)
        except openai.APIConnectionError:
            pass
    assert len(ledger.records) == 2     # the attempt and its retry
    assert all(r.status == 0 and r.cost_usd is None and r.uncached_input == 0 for r in ledger.records)
