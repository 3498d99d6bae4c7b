"""An upstream (a compatible server, a provider's bug) reporting usage no answer can have: 10**18 tokens, a negative
count, a cost of a quadrillion dollars. The caller's answer passes as sent, streamed or not; its record says the usage
was unreadable and prices nothing; and the ledger goes on rolling up later records. Before, 10**18 tokens were priced
at $5 trillion, which no roll-up could hold (the dashboard's totals stopped for every later request and /api/summary
answered 500), and a negative output count answered the caller 500 (a stream: cut)."""

from __future__ import annotations

import json
from decimal import Decimal

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from prefixgate.ledger import read_records
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

PLAUSIBLE = {"prompt_tokens": 1200, "completion_tokens": 20, "total_tokens": 1220}
IMPOSSIBLE = {
    "10**18 tokens": {"prompt_tokens": 10**18, "completion_tokens": 5, "total_tokens": 10**18 + 5},
    "negative output": {"prompt_tokens": 7, "completion_tokens": -5, "total_tokens": 2},
    "negative cached": {"prompt_tokens": 7, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": -100}},
    "a quadrillion dollars": {**PLAUSIBLE, "cost": 10**15},
}


class Upstream:
    """An OpenAI-compatible server answering `usage` as told."""

    def __init__(self) -> None:
        self.usage: dict = PLAUSIBLE

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        base = {"id": "chatcmpl-1", "created": 1, "model": body["model"]}
        if body.get("stream"):
            chunk = {**base, "object": "chat.completion.chunk",
                     "choices": [{"index": 0, "delta": {"content": "On its way."}, "finish_reason": "stop"}]}
            events = [chunk, {**chunk, "choices": [], "usage": self.usage}]

            async def sse():
                for event in events:
                    yield f"data: {json.dumps(event)}\n\n"
                yield "data: [DONE]\n\n"
            return StreamingResponse(sse(), media_type="text/event-stream")
        return JSONResponse({**base, "object": "chat.completion", "usage": self.usage, "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "On its way."}, "finish_reason": "stop"}]})


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    upstream = Upstream()
    app = Starlette(routes=[Route("/v1/chat/completions", upstream.chat, methods=["POST"])])
    tmp = tmp_path_factory.mktemp("impossible")
    with ServerThread(app) as up:
        settings = settings_for(up.url + "/v1", tmp)
        policy = policy_for(settings, {"routes": [{"name": "compat", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}]})
        with running_gateway(settings, policy=policy) as gw:
            yield upstream, gw.url, settings.ledger_path


def ask(url: str, stream: bool) -> tuple[str, str]:
    """The answer's text and its request id, through the real openai SDK."""
    client = openai.OpenAI(api_key="sk-compat-0123456789", base_url=url + "/v1", max_retries=0)
    messages = [{"role": "user", "content": "Where is my parcel?"}]
    if stream:
        events = client.chat.completions.create(model="gpt-5.4", messages=messages, stream=True,
                                                stream_options={"include_usage": True})
        text = "".join(c.choices[0].delta.content or "" for c in events if c.choices)
        return text, events.response.headers["x-prefixgate-request-id"]
    raw = client.chat.completions.with_raw_response.create(model="gpt-5.4", messages=messages)
    return raw.parse().choices[0].message.content, raw.headers["x-prefixgate-request-id"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("case", list(IMPOSSIBLE))
def test_impossible_usage_is_recorded_unreadable_and_the_answer_passes(stack, case, stream):
    upstream, url, ledger = stack
    upstream.usage = IMPOSSIBLE[case]
    text, impossible_id = ask(url, stream)
    assert text == "On its way."
    upstream.usage = PLAUSIBLE
    _, plausible_id = ask(url, stream)

    def recorded() -> dict:
        return {rec["id"]: rec for rec in read_records(ledger)}
    wait_until(lambda: plausible_id in recorded(), 10, "both records written")
    rec = recorded()[impossible_id]
    assert rec["status"] == 200 and rec["cost_usd"] is None
    assert (rec["uncached_input"], rec["cache_read"], rec["output"]) == (0, 0, 0)
    assert any(line.startswith("usage: unreadable") for line in rec["explanation"]), rec["explanation"]
    assert recorded()[plausible_id]["output"] == 20

    # The rollups take every record in (the dashboard's totals equal the ledger's own records).
    def summary() -> dict:
        return httpx.get(url + "/api/summary", params={"range": "1h"}).json()["totals"]
    wait_until(lambda: summary()["requests"] == len(recorded()), 10, "the rollups to take every record")
    assert Decimal(summary()["spend_usd"]) == sum(Decimal(r["cost_usd"] or 0) for r in recorded().values())


def test_large_numbers_that_are_not_counts_are_read(stack):
    """xAI reports its cost in ticks, 10**10 to the dollar (docs.x.ai/developers/cost-tracking: an image at $0.04 is
    400,000,000 ticks): past any token count an answer can have, and still a true answer."""
    upstream, url, ledger = stack
    upstream.usage = {**PLAUSIBLE, "cost_in_usd_ticks": 400_000_000}
    _, request_id = ask(url, False)
    wait_until(lambda: any(r["id"] == request_id for r in read_records(ledger)), 10, "the record written")
    rec = next(r for r in read_records(ledger) if r["id"] == request_id)
    assert (rec["uncached_input"], rec["output"]) == (1200, 20) and rec["cost_usd"] is not None
    upstream.usage = PLAUSIBLE
