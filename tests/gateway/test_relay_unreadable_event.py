"""A stream event the gateway cannot read or translate (a shape its provider never documented) ends the caller's
stream with an error event in the caller's own format, and the ledger records a failed stream: never a connection
cut mid-body, nor a record that blames the caller for hanging up."""

from __future__ import annotations

import anthropic
import pytest
from starlette.applications import Starlette
from starlette.responses import StreamingResponse
from starlette.routing import Route

from prefixgate.gateway.app import create_app
from prefixgate.ledger import read_records
from tests.gateway.support_gateway import policy_for, settings_for
from tests.support_services import ServerThread, wait_until

HEAD = b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5.4","choices":'


async def odd_stream(request) -> StreamingResponse:
    async def events():
        yield HEAD + b'[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}\n\n'
        yield HEAD + b'[null]}\n\n'        # a choice that is no object
        yield b"data: [DONE]\n\n"
    return StreamingResponse(events(), media_type="text/event-stream")


def test_an_unreadable_event_ends_a_translated_stream_with_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unreadable-event-000111")
    with ServerThread(Starlette(routes=[Route("/v1/chat/completions", odd_stream, methods=["POST"])])) as up:
        settings = settings_for(up.url, tmp_path)
        policy = policy_for(settings, {"routes": [
            {"name": "to-gpt", "models": ["claude-via-gpt"], "targets": [{"upstream": "openai", "model": "gpt-5.4"}]}]})
        with ServerThread(create_app(settings, policy=policy)) as gw:
            client = anthropic.Anthropic(api_key="caller", base_url=gw.url, max_retries=0)
            with pytest.raises(anthropic.APIStatusError) as exc:
                with client.messages.stream(model="claude-via-gpt", max_tokens=20,
                                            messages=[{"role": "user", "content": "Hi"}]) as stream:
                    stream.get_final_message()
            assert "could not relay" in str(exc.value)
            wait_until(lambda: read_records(settings.ledger_path), 10, "the stream's record")
    [rec] = read_records(settings.ledger_path)
    assert rec["status"] == 502 and "could not relay" in rec["error"]
