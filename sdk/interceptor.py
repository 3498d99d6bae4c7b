"""The wrapper's one hook: a wrapped client's HTTP `send`.

For a call the wrapper plans (see `endpoints`), it swaps in the planned body, creates a Gemini
explicit cache first when the plan asks (through the same client, with the caller's credentials),
sends, and taps the response body so its usage is priced and recorded once the SDK has read it.
Errors, retries, timeouts and response parsing stay the SDK's own: the response object it gets back
is the inner client's, with only its body stream wrapped.
"""

from __future__ import annotations

import json
import time
from typing import Any

from prefixgate.compact_json import compact_bytes
from prefixgate.sdk.config import WrapConfig
from prefixgate.sdk.endpoints import Provider, endpoint_of
from prefixgate.sdk.exchange import Exchange
from prefixgate.sdk.http_family import family_of
from prefixgate.sdk.tapped_stream import tapped_stream
from prefixgate.sdk.usage_tap import UsageTap, named_model
from prefixgate.usage import cut_usage, prompt_estimate

# Headers a replacement request must not copy: httpx sets them for the new body.
_BODY_HEADERS = ("content-length", "transfer-encoding")
_RETRY_HEADERS = ("x-stainless-retry-count",)


class Interceptor:
    def __init__(self, provider: Provider, config: WrapConfig) -> None:
        self.provider = provider
        self.config = config

    # ---- sync -------------------------------------------------------------------------------------

    def send(self, inner: Any, request: Any, *, stream: bool = False, **kwargs: Any) -> Any:
        ex = self._exchange(request)
        if ex is None:
            return inner.send(request, stream=stream, **kwargs)
        create = ex.cache_create(request.url.path)
        if create is not None:
            try:
                made = inner.send(_json_request(request, create[0], create[1]), **kwargs)
                ex.adopt_cache(made.status_code, _json_or_none(made.content))
            except Exception as e:  # a transport failure: the request still goes out, uncached
                ex.notes.append(f"cache: creating the explicit cache failed ({type(e).__name__}); sent without it")
        sent = _replace_body(request, ex.body())
        try:
            response = inner.send(sent, stream=True, **kwargs)
        except BaseException as e:
            _unanswered(ex, sent, e)
            raise
        _watch(response, ex)
        if not stream:
            try:
                response.read()
            except BaseException:
                response.close()
                raise
        return response

    # ---- async ------------------------------------------------------------------------------------

    async def asend(self, inner: Any, request: Any, *, stream: bool = False, **kwargs: Any) -> Any:
        ex = self._exchange(request)
        if ex is None:
            return await inner.send(request, stream=stream, **kwargs)
        create = ex.cache_create(request.url.path)
        if create is not None:
            try:
                made = await inner.send(_json_request(request, create[0], create[1]), **kwargs)
                ex.adopt_cache(made.status_code, _json_or_none(made.content))
            except Exception as e:
                ex.notes.append(f"cache: creating the explicit cache failed ({type(e).__name__}); sent without it")
        sent = _replace_body(request, ex.body())
        try:
            response = await inner.send(sent, stream=True, **kwargs)
        except BaseException as e:
            _unanswered(ex, sent, e)
            raise
        _watch(response, ex)
        if not stream:
            try:
                await response.aread()
            except BaseException:
                await response.aclose()
                raise
        return response

    # ---- shared -----------------------------------------------------------------------------------

    def _exchange(self, request: Any) -> Exchange | None:
        endpoint = endpoint_of(self.provider, request.method, request.url.path)
        if endpoint is None:
            return None
        try:
            body = request.content
        except Exception:  # a streamed upload: not a JSON call we plan
            return None
        retries = next((request.headers[h] for h in _RETRY_HEADERS if h in request.headers), "0")
        attempt = int(retries) + 1 if retries.isdigit() else 1
        return Exchange(endpoint, self.config, body, host=request.url.host, attempt=attempt)


class _ResponseWatch:
    """Feeds a response body to its usage tap and records the exchange when the body ends."""

    def __init__(self, response: Any, ex: Exchange, tap: UsageTap) -> None:
        self.response, self.ex, self.tap = response, ex, tap

    def chunk(self, data: bytes) -> bytes:
        if self.ex.first_byte_at is None:
            self.ex.first_byte_at = time.perf_counter()
        return self.tap.feed(data)

    def flush(self) -> bytes:
        return self.tap.flush()

    def end(self, complete: bool, failure: BaseException | None) -> None:
        status = self.response.status_code
        if status >= 400:
            self.ex.finish(status, None, error=self.tap.error_message())
            return
        error = self.tap.error
        if failure is not None:
            error = error or f"{type(failure).__name__}: {failure}"
        elif not complete and not self.tap.ended:
            error = error or "the body was closed before it ended"
        data = None if self.tap.sse else _json_or_none(bytes(self.tap.body))
        answered = self.tap.model if self.tap.sse else named_model(data)
        usage = self.tap.usage
        if (failure is not None or not complete) and not self.tap.ended and self.ex.endpoint.kind == "generate":
            # Cut before its usage came (OpenAI reports it in the last chunk only): the provider still ran and
            # billed it, as the gateway prices a stream cut short, never as nothing.
            self.ex.notes.append("usage estimated: the answer was cut before the provider reported all of its usage "
                                 "(prompt from the body's size, an output token per event read)")
            usage = cut_usage(usage, _sent_body(self.response), self.tap.events)
        self.ex.finish(status, usage, error=error or self.tap.unreadable, data=data, answered=answered)


def _sent_body(response: Any) -> bytes:
    try:
        return response.request.content
    except Exception:   # a response with no request, or a streamed upload: no prompt to size
        return b""


def _unanswered(ex: Exchange, sent: Any, failure: BaseException) -> None:
    """Record an attempt that got no answer. One that timed out waiting for it had been sent whole: the provider may
    have run it and billed the prompt, so it is priced at that (an estimate, noted); one that never connected (or
    was not sent whole) ran nothing."""
    usage = None
    if isinstance(failure, family_of(sent).ReadTimeout):
        ex.notes.append("usage estimated: no answer before the client's read timeout, though the provider may have "
                        "run and billed the request (prompt from the body's size)")
        usage = prompt_estimate(sent.content)
    ex.finish(0, usage, error=f"{type(failure).__name__}: {failure}")


def _watch(response: Any, ex: Exchange) -> None:
    headers = response.headers
    encoding = headers.get("content-encoding", "")
    sse = "text/event-stream" in headers.get("content-type", "")
    built = getattr(response, "_content", None)
    if built is not None:
        # A body built in memory (`httpx.MockTransport`, respx: an application's unit tests): httpx read it, decoded,
        # when the response was made, and the SDK reads it from there, never through the stream. Taken in whole now.
        watch = _ResponseWatch(response, ex, UsageTap(ex.endpoint.dialect, sse=sse, withhold_usage=ex.withhold_usage and sse))
        response._content = watch.chunk(built) + watch.flush()
        watch.end(True, None)
        return
    tap = UsageTap(ex.endpoint.dialect, sse=sse, encoding=encoding, withhold_usage=ex.withhold_usage and sse)
    if encoding and encoding.lower() != "identity" and tap.readable:
        del headers["content-encoding"]     # the tap passes the body on decoded
    response.stream = tapped_stream(family_of(response), response.stream, _ResponseWatch(response, ex, tap))


def _replace_body(request: Any, body: bytes) -> Any:
    """The same request with `body`, asking for an uncompressed answer so its usage can be read as it streams."""
    headers = request.headers.copy()
    for name in _BODY_HEADERS:
        headers.pop(name, None)
    headers["accept-encoding"] = "identity"
    return type(request)(request.method, request.url, headers=headers, content=body, extensions=request.extensions)


def _json_request(request: Any, path: str, body: dict) -> Any:
    """A POST of `body` to `path` on the request's host, with its credentials and SDK headers."""
    headers = request.headers.copy()
    for name in (*_BODY_HEADERS, *_RETRY_HEADERS):
        headers.pop(name, None)
    headers["content-type"] = "application/json"
    # Keep only an API key sent as `?key=`; the generate call's other parameters (`alt=sse`) are not the create's.
    key = request.url.params.get("key")
    url = request.url.copy_with(path=path, query=f"key={key}".encode() if key else None)
    content = compact_bytes(body)
    return type(request)("POST", url, headers=headers, content=content, extensions=request.extensions)


def _json_or_none(data: bytes) -> Any:
    try:
        return json.loads(data) if data else None
    except ValueError:
        return None
