"""An upstream that compresses whatever the request asks (docs/sdk.md: the wrapper asks for `identity`, and
a server that compresses anyway is decoded by the tap): the wrapped SDK's caller sees the same answer as an
unwrapped one, and the ledger prices the usage read from the compressed body, whole and streamed."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from decimal import Decimal

import openai
import pytest

import prefixgate
from prefixgate.sdk import Ledger
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.sdk.support_sdk import OPENAI_MODEL, dated_system, fresh_key
from tests.support_services import ServerThread

# gpt-5.4's list prices (https://developers.openai.com/api/docs/models/gpt-5.4): $2.50 input, $0.25 cached input,
# $15 output.
INPUT, CACHED, OUTPUT = Decimal("2.50"), Decimal("0.25"), Decimal("15")


class AlwaysGzip:
    """ASGI middleware: every response body gzip-compressed (flushed per chunk, so streams still stream),
    whatever `accept-encoding` the request sent."""

    def __init__(self, app) -> None:
        self.app = app
        self.compressed = 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        gz = zlib.compressobj(wbits=zlib.MAX_WBITS | 16)

        async def gzip_send(message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message["headers"] if k.lower() not in (b"content-length", b"content-encoding")]
                message = {**message, "headers": [*headers, (b"content-encoding", b"gzip")]}
                self.compressed += 1
            elif message["type"] == "http.response.body":
                more = message.get("more_body", False)
                body = gz.compress(message.get("body", b"")) + (gz.flush(zlib.Z_SYNC_FLUSH) if more else gz.flush())
                message = {**message, "body": body}
            await send(message)

        await self.app(scope, receive, gzip_send)


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[str, AlwaysGzip]]:
    app = AlwaysGzip(mock_app(MockContext()))
    with ServerThread(app) as server:
        yield server.url, app


def _messages(day: int) -> list[dict]:
    return [{"role": "system", "content": dated_system(day)}, {"role": "user", "content": "Where is my parcel?"}]


def _priced(rec) -> Decimal:
    return (rec.uncached_input * INPUT + rec.cache_read * CACHED + rec.output * OUTPUT) / 1_000_000


def test_a_compressed_answer_is_read_and_priced(upstream) -> None:
    url, app = upstream
    ledger = Ledger()
    raw = openai.OpenAI(api_key=fresh_key(), base_url=url + "/v1", max_retries=0)
    wrapped = prefixgate.wrap(raw, ledger=ledger)
    before = app.compressed
    answer = wrapped.chat.completions.create(model=OPENAI_MODEL, messages=_messages(1), max_tokens=16)
    assert app.compressed > before                     # the upstream did compress it
    assert answer.choices[0].message.content and answer.usage.prompt_tokens > 1000
    (rec,) = ledger.records
    assert rec.uncached_input + rec.cache_read == answer.usage.prompt_tokens
    assert rec.output == answer.usage.completion_tokens
    assert Decimal(rec.cost_usd) == _priced(rec)


def test_a_compressed_stream_is_read_as_it_arrives_and_priced(upstream) -> None:
    url, _ = upstream
    ledger = Ledger()
    raw = openai.OpenAI(api_key=fresh_key(), base_url=url + "/v1", max_retries=0)
    wrapped = prefixgate.wrap(raw, ledger=ledger)
    chunks = list(wrapped.chat.completions.create(model=OPENAI_MODEL, messages=_messages(2), max_tokens=16, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    # The caller did not ask for usage: it sees none, as unwrapped; the ledger still has it.
    assert text and all(c.usage is None for c in chunks)
    (rec,) = ledger.records
    assert rec.uncached_input + rec.cache_read > 1000 and rec.output > 0
    assert Decimal(rec.cost_usd) == _priced(rec)
