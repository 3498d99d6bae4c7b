"""A caller that leaves just as its stream's headers go out, before the body begins: the upstream answered 200 and
took the prompt, so the request still has its one ledger record (a 499, usage estimated) and its budget reservation
is settled, not held until the gateway restarts."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from prefixgate.gateway.app import create_app
from prefixgate.ledger import read_records
from prefixgate.policies.schema import hash_key
from tests.gateway.support_gateway import policy_for, running_upstream, settings_for
from tests.support_services import ServerThread, wait_until

CALLER = "pg-leaves-at-start-0001"


def leaves_as_headers_go(app):
    """`app` behind a client that hangs up the moment the response's headers are sent (its disconnect is the next
    thing the app receives), before the body's first byte."""
    async def wrapped(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        started, body_done = asyncio.Event(), False

        async def hang_up_after_headers():
            nonlocal body_done
            if body_done:
                await started.wait()
                return {"type": "http.disconnect"}
            message = await receive()
            body_done = message["type"] == "http.request" and not message.get("more_body")
            return message

        async def send_headers_then_wait(message):
            await send(message)
            if message["type"] == "http.response.start":
                started.set()
                await asyncio.sleep(0.2)    # the disconnect is read while the body has yet to begin
        await app(scope, hang_up_after_headers, send_headers_then_wait)
    return wrapped


def test_a_caller_leaving_before_the_stream_body_is_recorded_and_settled(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leaves-at-start-000111")
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path)
        policy = policy_for(settings, {
            "routes": [{"name": "gpt", "models": ["gpt-5.4"], "targets": [{"upstream": "openai"}]}],
            "keys": [{"name": "app", "key_sha256": hash_key(CALLER), "budget": {"usd": 100, "period": "day"}}]})
        app = create_app(settings, policy=policy)
        with ServerThread(leaves_as_headers_go(app)) as gw:
            with pytest.raises(httpx.HTTPError):
                with httpx.stream("POST", gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {CALLER}"},
                                  json={"model": "gpt-5.4", "stream": True, "messages": [{"role": "user", "content": "Hi"}]},
                                  timeout=10) as resp:
                    resp.read()
            wait_until(lambda: read_records(settings.ledger_path), 10, "the request's record")
            wait_until(lambda: not app.state.proxy.limits.reserved, 10, "the budget reservation settled")
            assert len(up.received) == 1
    [rec] = read_records(settings.ledger_path)
    assert rec["status"] == 499 and rec["error"] == "client disconnected"
    assert rec["uncached_input"] > 0 and rec["output"] == 0 and rec["cost_usd"] is not None
    assert any(line.startswith("usage estimated") for line in rec["explanation"])
