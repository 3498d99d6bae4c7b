"""What every dialect endpoint does before the proxy takes over: read the body within the size limit,
parse it, authenticate, and answer problems in the caller's own error shape. Also the guard that
cancels the upstream call when a client hangs up before a non-streamed answer is ready.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from prefixgate.dialects import resent
from prefixgate.errors import RequestError
from prefixgate.gateway import off_loop
from prefixgate.gateway.accounting import CLIENT_CLOSED
from prefixgate.gateway.auth import Caller, authenticate
from prefixgate.gateway.body_limits import BodyLimits
from prefixgate.gateway.error_response import error_response
from prefixgate.gateway.inbound import Inbound
from prefixgate.gateway.named_state import check_named
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.proxy import Proxy
from prefixgate.ir import Conversation

TOO_DEEP = RequestError("request body is nested too deeply for the gateway to plan (a tool schema hundreds of levels deep?)")


async def read_body(request: Request | Inbound, limit: int, idle_s: float = 15.0) -> bytes:
    """The body, within `limit` bytes; a 408 when `idle_s` pass with no chunk arriving (a slow client is let go)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(f"request body of {int(declared)} bytes is over the gateway's limit of {limit} bytes",
                           status=413, kind="too_large")
    chunks, size = [], 0
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(idle_s) as deadline:
            async for chunk in request.stream():
                deadline.reschedule(loop.time() + idle_s)
                size += len(chunk)
                if size > limit:
                    raise RequestError(f"request body is over the gateway's limit of {limit} bytes", status=413,
                                       kind="too_large")
                chunks.append(chunk)
    except TimeoutError:
        raise RequestError(f"request body stalled: nothing arrived for {idle_s:g} s", status=408,
                           kind="timeout") from None
    return b"".join(chunks)


async def authenticated_body(proxy: Proxy, request: Request | Inbound) -> tuple[bytes, Caller]:
    """The request body (within the size limit) and who sent it; this request's task parses bodies as its party's
    (`resent.SCOPE`: a body memo each party sees alone, a token count's too)."""
    raw = await read_body(request, proxy.settings.max_body_bytes, proxy.settings.client_timeout_s)
    caller = authenticate(request.headers, request.query_params, proxy.keys)
    resent.SCOPE.set(principal(caller.key) or "")
    return raw, caller


async def until_disconnect(request: Request | Inbound, work: Awaitable[Response]) -> Response:
    """`work`'s response, or cancel it (and its upstream request) if the client disconnects first.

    `work` runs in this task and one watcher task waits for the disconnect: one task per request, not two
    plus an asyncio.wait (the watcher cancels this task rather than racing it)."""
    current = asyncio.current_task()
    if current is None:
        raise RuntimeError("until_disconnect must run in a task: its watcher cancels that task on a disconnect")
    gone = False

    async def hung_up() -> None:
        nonlocal gone
        while (await request.receive())["type"] != "http.disconnect":
            pass
        gone = True
        current.cancel()

    watcher = asyncio.ensure_future(hung_up())
    try:
        return await work
    except asyncio.CancelledError:
        if not gone:
            raise
        current.uncancel()      # the cancellation was ours: it ends here as a disconnect
        raise ClientDisconnect() from None
    finally:
        watcher.cancel()


def within_limits(parse: Callable[[bytes], Conversation], raw: bytes, limits: BodyLimits) -> Conversation:
    """The parsed body, or a 413 when it carries more messages or parts than the gateway takes."""
    conv = parse(raw)
    limits.check(conv)
    return conv


async def serve(proxy: Proxy, request: Request | Inbound, dialect: str, parse: Callable[[bytes], Conversation]) -> Response:
    """The whole life of a model request, from bytes in to the response out."""
    started = time.perf_counter()
    span = proxy.tracing.request_span(dialect, request.scope["path"], request.headers) if proxy.tracing else None
    try:
        raw, caller = await authenticated_body(proxy, request)
        conv = await off_loop.work(len(raw), proxy.settings.off_loop_bytes, within_limits, parse, raw,
                                   proxy.body_limits)
        await check_named(proxy.stored_ids, caller, conv)
        call = proxy.start(dialect, conv, caller, request.headers, started, span, raw)
        call.json_array = conv.stream and call.wire.streams_json_array(request.query_params)
    except RequestError as e:
        if span is not None:
            proxy.tracing.end_request_status(span, e.status, e.message)
        return error_response(e, dialect)
    except BaseException as e:      # a client gone mid-body, or a gateway bug (the caller gets a 500)
        if span is not None:
            proxy.tracing.end_request_status(span, CLIENT_CLOSED if isinstance(e, ClientDisconnect) else 500, type(e).__name__)
        raise
    try:
        response = await until_disconnect(request, proxy.handle(call))
    except RequestError as e:
        response = proxy.fail(call, e, None)
    except RecursionError:      # a body within JSON's depth that the planner's walk through it is not (tool schemas)
        response = proxy.fail(call, TOO_DEEP, None)
    except ClientDisconnect:
        # No answer was sent, but the upstream may have worked (and billed): the ledger and the budget say so.
        await proxy.accounts.finish(call, proxy.accounts.hung_up(call))
        raise
    except BaseException as e:      # a gateway bug: no record, but the span must not stay open
        if call.span is not None:
            proxy.tracing.end_request_status(call.span, 500, type(e).__name__)
            call.span = None
        raise
    if len(raw) < proxy.settings.off_loop_bytes:
        return response
    del call, conv, raw     # the response holds the request now: freed by a worker once it is sent
    return off_loop.LetGoAfter(response)
