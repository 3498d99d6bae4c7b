"""Relaying a streamed answer: events pass through as they arrive (or are re-emitted in the caller's
dialect), usage is read on the way, and a client that hangs up cancels the upstream stream.

Same-format streams are forwarded byte for byte; the only event ever withheld is one the caller did not
ask for (OpenAI's usage chunk: the gateway always asks, to bill the stream; `WireFormat.relays`). The terminal
event goes out only after the request's ledger record is written, so a client that saw its stream end
can rely on the record existing even if the gateway is killed a moment later. A stream that
breaks or ends without its terminal event gets the caller dialect's error event, so the SDK raises
instead of returning a silently truncated answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING

import anyio
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from prefixgate.dialects.gemini import GeminiGenerate
from prefixgate.dialects.google_error import caller_error, error_of, without_account
from prefixgate.dialects.sse import SSE_FRAMING, FramingError
from prefixgate.errors import RequestError
from prefixgate.gateway.accounting import CLIENT_CLOSED, UNREADABLE, UNREADABLE_USAGE, Accounting
from prefixgate.gateway.diagnostics import ProviderDiagnostics
from prefixgate.gateway.estimate import BOUND_HEADER, cut_usage
from prefixgate.gateway.in_flight import Slot
from prefixgate.gateway.keepalive import collects_replies
from prefixgate.gateway.response_cache import HEADER as RESPONSE_CACHE_HEADER
from prefixgate.gateway.upstream import UpstreamFailure, UpstreamResponse, reported_error
from prefixgate.usage import Usage

if TYPE_CHECKING:
    from prefixgate.gateway.proxy import Call, Prepared
log = logging.getLogger("prefixgate.gateway")
# The ledger's note on a stream that ended normally but never reported usage: its tokens and cost are unknown,
# not zero (a compatible server that ignores `stream_options.include_usage`, or a proxy that drops the chunk).
NO_USAGE = "usage: the stream ended without a usage report; tokens and cost unknown"
# Bytes every SSE error event carries (Anthropic's `event: error`, an OpenAI/Gemini `{"error": ...}` chunk, Responses'
# `"type":"error"` and `response.failed`): such an event is parsed, so an upstream's in-band error is never taken for
# the stream's end nor re-emitted as a normal finish. Event-stream formats parse every frame already.
ERROR_MARK = b"error"


class DisconnectAwareStream(StreamingResponse):
    """Listens for the client's disconnect while streaming, whatever ASGI version the server speaks,
    so a hang-up cancels the body iterator (and with it the upstream request) at once. `let_go` runs
    however the response ends: a body that never started (the client left before the headers went
    out) never runs its own cleanup."""

    def __init__(self, *args: object, let_go: Callable[[], Awaitable[None]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.let_go = let_go

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:
                async def run_then_cancel(func) -> None:
                    await func()
                    group.cancel_scope.cancel()

                group.start_soon(run_then_cancel, partial(self.stream_response, send))
                await run_then_cancel(partial(self.listen_for_disconnect, receive))
        finally:
            with anyio.CancelScope(shield=True):
                await self.let_go()
        if self.background is not None:
            await self.background()


def stream_response(accounts: Accounting, diagnostics: ProviderDiagnostics, call: Call, prep: Prepared,
                    resp: UpstreamResponse, sent: float, slot: Slot) -> StreamingResponse:
    target = prep.wire
    same = target is call.wire
    framing, terminal = target.framing, target.terminal
    counter = prep.usage_counter()
    writer = None if same else call.wire.stream_writer(call.conv.model or prep.model, call.include_usage)
    # The response cache keeps the answer as neutral deltas: every event is read, not only those with usage.
    kept = call.response_cache.answer if call.response_cache is not None and call.response_cache.collects else None
    # Keep-alive may re-send a Claude chat's answer to keep the session cached through a break (gateway/keepalive.py);
    # a ledger that keeps the body keeps the answer too.
    reply = target.reply_collector() if collects_replies(call.route, target, bool(prep.trace_body)) else None
    state: dict = {"rec": None, "began": False}

    def count(event: dict) -> None:
        """Usage read on the way; usage the gateway cannot read (token counts as strings) leaves the stream as sent."""
        try:
            counter.feed(event)
        except UNREADABLE:
            if UNREADABLE_USAGE not in call.notes:
                call.notes.append(UNREADABLE_USAGE)

    async def let_go() -> None:
        """The in-flight slot and, if the body never began (the caller left as its headers went out), the upstream
        stream, and the request's record and budget: the upstream answered 2xx and took the prompt."""
        slot.release()
        if not state["began"]:
            await resp.close()
            await accounts.finish(call, accounts.hung_up(call))

    async def body() -> AsyncIterator[bytes]:
        state["began"] = True
        buffer = bytearray()
        first: float | None = None
        ended = False
        finished = False        # false in `finally` means the client hung up and the body was cancelled
        tail = b""              # the terminal event, held until the ledger record is written
        events = 0              # events relayed to the caller: a cut stream's output estimate
        error: RequestError | None = None
        reported: RequestError | None = None    # the upstream's own error event mid-stream, as the caller gets it
        shown: RequestError | None = None   # that event as a Gemini caller gets it, when Google sent it
        try:
            async for chunk in resp.chunks:
                if first is None:
                    first = time.perf_counter()
                out = []
                for ev in framing.split(buffer, chunk):
                    if terminal is not None and terminal in ev:
                        ended = True
                    parsed = None
                    if not same or target.may_carry_usage(ev) or ERROR_MARK in ev:
                        parsed = framing.payload(ev)
                        if parsed is not None and (message := target.stream_error(parsed)) is not None:
                            count(parsed)
                            google = error_of(parsed)
                            message = without_account(message, resp.clean) if google else resp.clean(message)
                            reported = reported_error(prep.upstream.name, target, parsed, message)
                            if google is not None and isinstance(call.wire, GeminiGenerate):
                                # Google's code, status and details, as a whole-answer error carries them, less
                                # the gateway's project (the event as sent would name it)
                                shown = caller_error(google, resp.clean)
                            # The caller's own format: its SDK raises on the provider's event as sent, held like a
                            # terminal event until the record is written; another format gets its own error event.
                            tail = ev if same and shown is None else b""
                            break
                        if parsed is not None:
                            count(parsed)
                            diagnostics.read(call, prep.ask, parsed)
                            accounts.created(call, parsed)
                            if target.ends_stream(parsed):
                                ended = True
                                accounts.stored(call, prep, target.stored_id(parsed))
                    if target.stored_mark is not None and target.stored_mark in ev:
                        created = parsed if parsed is not None else framing.payload(ev)
                        if created is not None:
                            accounts.stored(call, prep, target.stored_id(created), begun=True)
                    if kept is not None or reply is not None:
                        event = parsed if parsed is not None else framing.payload(ev)
                        if event is not None and kept is not None:
                            kept.feed(target.read_deltas(event), target)
                            kept.saw(event)
                        if event is not None and reply is not None:
                            reply.feed(event)
                    if same:
                        if parsed is None or target.relays(parsed, call.include_usage):
                            out.append(ev)
                    elif parsed is not None:
                        out.append(writer.write(target.read_deltas(parsed)))
                events += len(out)
                if out:
                    if ended:
                        tail += b"".join(out)
                    else:
                        yield b"".join(out)
                if reported is not None:
                    break
            if reported is not None:
                ended = False
                error = reported
            elif not same and ended:
                tail += writer.finish(counter.usage)
            elif not ended:
                error = RequestError(f"upstream {prep.upstream.name!r} ended the stream early", status=502, kind="server")
            finished = True
        except UpstreamFailure as f:
            # A break after the terminal event lost nothing the caller needs.
            error = None if ended else f.request_error()
            finished = True
        except FramingError as e:     # a frame that fails its checksum: the upstream's fault, not ours
            error = RequestError(f"upstream {prep.upstream.name!r} sent a broken stream: {e}", status=502, kind="server")
            finished = True
        except Exception:   # an event no reader here takes (a shape the provider never documented): still a stream
            # that ended in an error, told to the caller in its format and recorded as such, not a hang-up
            log.exception("relaying %s's stream for request %s", prep.upstream.name, call.id)
            error = RequestError(f"upstream {prep.upstream.name!r} sent an event the gateway could not relay",
                                 status=502, kind="server")
            finished = True
        finally:
            with anyio.CancelScope(shield=True):
                await resp.close()
                slot.release()
                done = time.perf_counter()
                status = 200 if error is None else error.status
                message = error.message if error else ""
                if not finished:
                    status, message = CLIENT_CLOSED, "client disconnected mid-stream"
                elif error is None and counter.usage is None:
                    call.notes.append(NO_USAGE)
                if kept is not None:
                    kept.usage = counter.usage
                if reply is not None and ended and error is None:
                    call.reply = reply.content()
                usage = counter.usage
                if not ended and (events or usage not in (None, Usage())):  # cut mid-way: what was sent and streamed is billed
                    usage = cut_usage(usage, prep.body, events)
                    if usage != counter.usage:
                        call.notes.append("usage estimated: the stream was cut before the provider reported it "
                                          "(prompt from the body's size, an output token per event streamed)")
                state["rec"] = accounts.record(call, prep, usage, status,
                                               ttft_s=(first - call.started) if first else None,
                                               upstream_s=done - sent, error=message)
        if error is not None:
            yield tail if reported is not None and tail else (writer.opening() if writer else b"") + call.wire.error_event(shown or error)
        elif tail:
            yield tail

    async def after() -> None:
        if state["rec"] is not None:
            await accounts.finish(call, state["rec"])

    headers = {**resp.headers, "cache-control": "no-cache", "x-prefixgate-request-id": call.id,
               "x-prefixgate-route": call.route.name, "x-prefixgate-target": prep.upstream.name,
               "x-prefixgate-plan": prep.plan.summary}
    if call.response_cache is not None:
        headers[RESPONSE_CACHE_HEADER] = call.response_cache.state
    if prep.bound is not None:
        headers[BOUND_HEADER] = str(prep.bound)
    if call.json_array:
        return DisconnectAwareStream(json_array(body()), 200, headers, media_type="application/json",
                                     background=BackgroundTask(after), let_go=let_go)
    return DisconnectAwareStream(body(), 200, headers, media_type=call.wire.framing.media_type, background=BackgroundTask(after),
                                 let_go=let_go)


async def json_array(sse: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Server-sent events re-framed as a JSON-array stream (Gemini's without alt=sse): `[` first element
    `,` next ... `]`, each element sent as soon as its event arrives."""
    buffer, opened = bytearray(), False
    async for chunk in sse:
        parts = []
        for ev in SSE_FRAMING.split(buffer, chunk):
            data = SSE_FRAMING.data(ev)
            if data:
                parts.append((b",\r\n" if opened else b"[") + data)
                opened = True
        if parts:
            yield b"".join(parts)
    yield b"]" if opened else b"[]"
