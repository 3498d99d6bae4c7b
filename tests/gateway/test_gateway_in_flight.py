"""The gateway's in-flight count per upstream (prefix affinity's load guard) goes back to where it was
however an attempt ends, including a streamed answer whose body never starts."""

from __future__ import annotations

import asyncio
import json

import pytest

from prefixgate.gateway.app import create_app
from prefixgate.gateway.in_flight import InFlight
from tests.gateway.support_gateway import running_upstream, settings_for


def test_a_slot_is_released_once_whoever_releases_it():
    counts = InFlight()
    with counts.hold("a") as slot:
        assert counts["a"] == 1
        slot.hand_off()
    assert counts["a"] == 1          # handed off: the taker releases it
    slot.release()
    slot.release()
    assert counts["a"] == 0
    with pytest.raises(RuntimeError), counts.hold("a"):
        raise RuntimeError("attempt failed")
    assert counts["a"] == 0


async def _ask(app, body: dict, send) -> None:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions", "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"authorization", b"Bearer sk-test")],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    pending = [{"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}]

    async def receive() -> dict:
        if pending:
            return pending.pop()
        await asyncio.Event().wait()      # the client never hangs up on its own
        return {"type": "http.disconnect"}

    await app(scope, receive, send)


def test_a_stream_whose_body_never_starts_gives_its_slot_back(tmp_path):
    body = {"model": "gpt-5.4", "stream": True, "messages": [{"role": "user", "content": "Hi"}]}

    async def scenario(upstream_url: str) -> tuple[dict, dict, list[str]]:
        app = create_app(settings_for(upstream_url, tmp_path))
        async with app.router.lifespan_context(app):
            proxy = app.state.proxy
            before = dict(proxy.in_flight)
            seen: list[str] = []

            async def send_fails_at_start(message: dict) -> None:
                seen.append(message["type"])
                if message["type"] == "http.response.start":
                    raise OSError("the client is gone")

            with pytest.raises(BaseException) as err:     # noqa: PT011 - anyio may wrap it in a group
                await _ask(app, body, send_fails_at_start)
            assert "the client is gone" in repr(err.value)
            after = dict(proxy.in_flight)

            # A stream that does start gives its slot back too.
            async def send(message: dict) -> None:
                seen.append(message["type"])
            await _ask(app, body, send)
            return before, after | {"then": sum(proxy.in_flight.values())}, seen

    with running_upstream() as up:
        before, after, seen = asyncio.run(scenario(up.url))
    assert seen[0] == "http.response.start" and "http.response.body" not in seen[:1]
    assert sum(before.values()) == 0
    assert after == {"openai": 0, "then": 0}
