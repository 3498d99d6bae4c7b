"""Fees for provider-side tools are part of what a request costs (issue 29): Anthropic bills its web search
tool at $10 per 1,000 searches on top of tokens (https://docs.claude.com/en/docs/agents-and-tools/tool-use/
web-search-tool, "Usage and pricing"), reported as `usage.server_tool_use.web_search_requests`, whole and in
a stream's cumulative `message_delta`."""

from __future__ import annotations

import json
from decimal import Decimal

import anthropic
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from prefixgate.dialects.anthropic import parse_usage
from prefixgate.ledger import read_records
from prefixgate.providers.pricing import cost_of
from tests.gateway.support_gateway import running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

MODEL = "claude-sonnet-4-6"
# Claude Sonnet 4.6 list prices, USD per million tokens: $3 input, $15 output; web search $10 per 1,000.
INPUT, OUTPUT, PER_SEARCH = Decimal("3"), Decimal("15"), Decimal("0.01")
USAGE = {"input_tokens": 1200, "output_tokens": 80, "server_tool_use": {"web_search_requests": 3}}


def _expected() -> Decimal:
    return (1200 * INPUT + 80 * OUTPUT) / 1_000_000 + 3 * PER_SEARCH


def test_web_searches_are_read_and_priced_per_search() -> None:
    usage = parse_usage(USAGE)
    assert usage.web_searches == 3
    cost = cost_of("anthropic", MODEL, usage)
    assert cost.total == _expected()
    assert cost.tools == 3 * PER_SEARCH
    # The searches are paid with or without caching: they are no saving.
    assert cost.savings == 0


def _message(stream: bool) -> Response:
    if not stream:
        return JSONResponse({"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
                             "content": [{"type": "text", "text": "Found it."}], "stop_reason": "end_turn",
                             "stop_sequence": None, "usage": USAGE})
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": MODEL, "content": [], "stop_reason": None,
            "stop_sequence": None, "usage": {"input_tokens": 1200, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Found it."}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 80, "server_tool_use": {"web_search_requests": 3}}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    body = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    return Response(body, media_type="text/event-stream")


async def _messages(request: Request) -> Response:
    return _message(bool((await request.json()).get("stream")))


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    upstream = Starlette(routes=[Route("/v1/messages", _messages, methods=["POST"])])
    with ServerThread(upstream) as up:
        settings = settings_for(up.url, tmp_path_factory.mktemp("fees"))
        with running_gateway(settings) as gw:
            yield gw.url, settings.ledger_path


@pytest.mark.parametrize("stream", [False, True])
def test_the_ledger_bills_the_searches_through_the_gateway(gateway, stream: bool) -> None:
    url, ledger = gateway
    client = anthropic.Anthropic(base_url=url, api_key="sk-ant-caller-key", max_retries=0)
    request = {"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": f"Search the news {stream}"}],
               "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}]}
    if stream:
        with client.messages.stream(**request) as s:
            s.until_done()
    else:
        client.messages.create(**request)
    wait_until(lambda: len(read_records(ledger)) >= 1 + stream, 60, "the ledger record")
    record = read_records(ledger)[-1]
    assert Decimal(record["cost_usd"]) == _expected()
