"""Usage of a relayed Chat Completions stream is read from the parsed events, whatever their bytes look like:
an OpenAI-compatible upstream that pretty-prints its JSON (Python's default separators, several self-hosted
servers) is billed exactly, the usage chunk the gateway asked for on the caller's behalf stays withheld, and a
stream that ends without usage is flagged in the ledger rather than recorded as zeros."""

from __future__ import annotations

import json
from decimal import Decimal

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from prefixgate.ledger import read_records
from tests.gateway.support_gateway import running_gateway, settings_for
from tests.support_services import ServerThread

# gpt-5.4 per million tokens (OpenAI's pricing page, /work/shared/reference/provider-caching.md):
# input $2.50, cached input $0.25, output $15. 952 uncached + 2,048 cached + 100 output:
# 952 x 2.50 + 2048 x 0.25 + 100 x 15 = 2380 + 512 + 1500 = 4392 micro-dollars.
EXPECTED_COST = Decimal("0.004392")


def _chunk(i: int, **fields) -> dict:
    return {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "gpt-5.4", **fields}


def pretty_events(include_usage: bool, *, with_usage: bool = True) -> list[bytes]:
    """An upstream that writes `"usage": {` with spaces and newlines, puts `usage` before `choices`, and
    cuts its events in the middle of a key."""
    chunks = [_chunk(0, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]),
              _chunk(1, choices=[{"index": 0, "delta": {"content": "Hello"}, "finish_reason": None}]),
              _chunk(2, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])]
    if include_usage and with_usage:
        chunks.append({"usage": {"prompt_tokens": 3000, "completion_tokens": 100, "total_tokens": 3100,
                                 "prompt_tokens_details": {"cached_tokens": 2048}}, **_chunk(3, choices=[])})
    # Pretty-printed JSON spans several `data:` lines, which SSE joins with newlines.
    text = "".join("".join(f"data: {line}\n" for line in json.dumps(c, indent=2).splitlines()) + "\n"
                   for c in chunks) + "data: [DONE]\n\n"
    raw = text.encode()
    return [raw[i:i + 37] for i in range(0, len(raw), 37)]    # 37-byte pieces: keys split across reads


def upstream_app(with_usage: bool) -> Starlette:
    async def chat(request: Request) -> StreamingResponse:
        body = await request.json()
        include = bool((body.get("stream_options") or {}).get("include_usage"))
        return StreamingResponse(iter(pretty_events(include, with_usage=with_usage)), media_type="text/event-stream")
    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def _stream(gw_url: str, include_usage: bool) -> list:
    client = openai.OpenAI(base_url=gw_url + "/v1", api_key="caller-key")
    kwargs = {"stream_options": {"include_usage": True}} if include_usage else {}
    return list(client.chat.completions.create(model="gpt-5.4", messages=[{"role": "user", "content": "hi"}],
                                               stream=True, **kwargs))


@pytest.mark.parametrize("caller_asked", [False, True])
def test_pretty_printed_stream_is_billed_exactly_and_the_caller_sees_what_it_asked(tmp_path, monkeypatch, caller_asked):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-upstream-key-0001112223")
    with ServerThread(upstream_app(with_usage=True)) as up:
        settings = settings_for(up.url, tmp_path)
        with running_gateway(settings) as gw:
            chunks = _stream(gw.url, caller_asked)
    usage_chunks = [c for c in chunks if c.usage is not None]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello"
    if caller_asked:
        assert len(usage_chunks) == 1 and usage_chunks[0].usage.prompt_tokens == 3000
    else:
        assert usage_chunks == []     # the chunk the gateway requested on the caller's behalf is withheld
    [rec] = read_records(settings.ledger_path)
    assert (rec["uncached_input"], rec["cache_read"], rec["output"]) == (952, 2048, 100)
    assert Decimal(rec["cost_usd"]) == EXPECTED_COST
    assert rec["miss_reason"] == ""


def test_a_stream_without_usage_is_flagged_not_zero(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-upstream-key-0001112223")
    with ServerThread(upstream_app(with_usage=False)) as up:
        settings = settings_for(up.url, tmp_path)
        with running_gateway(settings) as gw:
            with httpx.stream("POST", gw.url + "/v1/chat/completions", headers={"authorization": "Bearer k"},
                              json={"model": "gpt-5.4", "stream": True,
                                    "messages": [{"role": "user", "content": "hi"}]}) as resp:
                body = resp.read()
    assert resp.status_code == 200 and body.endswith(b"data: [DONE]\n\n")
    [rec] = read_records(settings.ledger_path)
    assert rec["status"] == 200
    assert rec["cost_usd"] is None               # unknown, not $0
    assert rec["miss_reason"] == "usage not reported by the provider"
    assert any(line.startswith("usage: the stream ended without a usage report") for line in rec["explanation"])
