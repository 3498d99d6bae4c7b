"""Talking to upstreams: one pooled httpx client, streamed responses, failures classified for retry.

A non-2xx answer or a transport error becomes an `UpstreamFailure` whose message is the provider's own
(secrets scrubbed); a 2xx answer becomes an `UpstreamResponse` whose body is read whole or streamed.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import httpx
from prefixgate.gateway.local import LocalTarget
from prefixgate.policies.schema import Upstream

from prefixgate.errors import RequestError

# Upstream response headers worth handing back to the caller (ids for support tickets, rate limits).
PASS_HEADERS = ("request-id", "x-request-id", "openai-processing-ms", "retry-after", "anthropic-organization-id")
PASS_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
# Provider keys that could appear in an upstream's error text ("Incorrect API key provided: sk-...").
SECRET = re.compile(r"(sk-[A-Za-z0-9_\-]{6,}|AIza[0-9A-Za-z_\-]{20,}|Bearer\s+\S+)")
_KIND_BY_STATUS = {400: "invalid_request", 401: "authentication", 403: "permission", 404: "not_found",
                   413: "too_large", 429: "rate_limit", 503: "overloaded", 529: "overloaded", 504: "timeout"}


class UpstreamFailure(Exception):
    def __init__(self, upstream: str, status: int | None, message: str, *, timed_out: bool = False,
                 connect_failed: bool = False, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.upstream, self.status, self.message = upstream, status, message
        self.timed_out, self.connect_failed, self.retry_after = timed_out, connect_failed, retry_after

    def request_error(self) -> RequestError:
        """The failure as the caller will see it, in its own dialect's error shape."""
        if self.timed_out:
            return RequestError(f"upstream {self.upstream!r} timed out", status=504, kind="timeout")
        if self.connect_failed:
            return RequestError(f"upstream {self.upstream!r} is unreachable", status=502, kind="server")
        status = self.status or 502
        kind = _KIND_BY_STATUS.get(status, "server" if status >= 500 else "invalid_request")
        return RequestError(f"upstream {self.upstream!r}: {self.message}", status=status, kind=kind,
                            retry_after=self.retry_after)


@dataclass
class UpstreamResponse:
    status: int
    headers: dict[str, str]
    body: bytes | None                      # a whole (non-streamed) body
    chunks: AsyncIterator[bytes] | None     # a streamed body
    close: Callable[[], Awaitable[None]]


async def _nothing() -> None:
    return None


def endpoint(upstream: Upstream, model: str, stream: bool) -> str:
    if upstream.dialect == "anthropic":
        return f"{upstream.url}/v1/messages"
    if upstream.dialect == "gemini":
        action = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return f"{upstream.url}/v1beta/models/{model}:{action}"
    return f"{upstream.url}/chat/completions" if upstream.url.endswith("/v1") else f"{upstream.url}/v1/chat/completions"


def auth_headers(upstream: Upstream, key: str | None) -> dict[str, str]:
    headers = dict(upstream.headers)
    if key is None:
        return headers
    if upstream.dialect == "anthropic":
        headers["x-api-key"] = key
    elif upstream.dialect == "gemini":
        headers["x-goog-api-key"] = key
    else:
        headers["authorization"] = f"Bearer {key}"
    return headers


def scrub(text: str, *secrets: str | None) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return SECRET.sub("***", text)


class UpstreamClient:
    def __init__(self, connect_timeout_s: float, local: LocalTarget | None = None) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.local = local
        self.http = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=256, keepalive_expiry=30),
            timeout=httpx.Timeout(120, connect=connect_timeout_s))

    async def aclose(self) -> None:
        await self.http.aclose()

    async def send(self, upstream: Upstream, model: str, body: bytes, stream: bool, headers: dict[str, str],
                   key: str | None, timeout_s: float) -> UpstreamResponse:
        if upstream.kind == "local":
            return await self._local(upstream, body, stream)
        url = endpoint(upstream, model, stream)
        headers = {"content-type": "application/json", **headers, **auth_headers(upstream, key)}
        timeout = httpx.Timeout(timeout_s, connect=min(self.connect_timeout_s, timeout_s))
        request = self.http.build_request("POST", url, content=body, headers=headers, timeout=timeout)
        return await self._exchange(upstream.name, request, stream, key)

    async def forward(self, upstream: Upstream, method: str, path: str, query: str, body: bytes,
                      key: str | None, timeout_s: float = 60) -> UpstreamResponse:
        """A plain pass-through call (Gemini cachedContents, token counting) to `path` on `upstream`."""
        url = f"{upstream.url}{path}" + (f"?{query}" if query else "")
        headers = {"content-type": "application/json", **auth_headers(upstream, key)}
        request = self.http.build_request(method, url, content=body or None, headers=headers, timeout=timeout_s)
        return await self._exchange(upstream.name, request, False, key)

    async def _exchange(self, name: str, request: httpx.Request, stream: bool, key: str | None) -> UpstreamResponse:
        try:
            resp = await self.http.send(request, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout) as e:
            raise UpstreamFailure(name, None, type(e).__name__, connect_failed=True) from None
        except httpx.TimeoutException as e:
            raise UpstreamFailure(name, None, type(e).__name__, timed_out=True) from None
        except httpx.TransportError as e:
            raise UpstreamFailure(name, 502, f"connection failed ({type(e).__name__})") from None
        headers = {k: v for k, v in resp.headers.items() if k in PASS_HEADERS or k.startswith(PASS_PREFIXES)}
        if resp.status_code >= 400 or (not stream and resp.status_code >= 300):
            try:
                raw = await resp.aread()
            except httpx.HTTPError:
                raw = b""
            finally:
                await resp.aclose()
            raise UpstreamFailure(name, resp.status_code, scrub(_error_message(raw, resp.status_code), key),
                                  retry_after=_retry_after(headers.get("retry-after")))
        if stream:
            return UpstreamResponse(resp.status_code, headers, None, resp.aiter_bytes(), resp.aclose)
        try:
            body = await resp.aread()
        except httpx.TimeoutException:
            raise UpstreamFailure(name, None, "timed out reading the response", timed_out=True) from None
        except httpx.TransportError as e:
            raise UpstreamFailure(name, 502, f"response cut off ({type(e).__name__})") from None
        finally:
            await resp.aclose()
        return UpstreamResponse(resp.status_code, headers, body, None, _nothing)

    async def _local(self, upstream: Upstream, body: bytes, stream: bool) -> UpstreamResponse:
        if self.local is None:
            raise UpstreamFailure(upstream.name, 503, "no local backend is configured")
        try:
            answer = await self.local.chat(json.loads(body), stream=stream)
        except RequestError as e:
            raise UpstreamFailure(upstream.name, e.status, e.message) from None
        if isinstance(answer, dict):
            return UpstreamResponse(200, {}, json.dumps(answer).encode(), None, _nothing)
        close = getattr(answer, "aclose", _nothing)
        return UpstreamResponse(200, {}, None, answer, close)


def _error_message(raw: bytes, status: int) -> str:
    try:
        data = json.loads(raw)
        err = data.get("error", data) if isinstance(data, dict) else data
        message = err.get("message") if isinstance(err, dict) else None
        if message:
            return str(message)[:1000]
    except (ValueError, AttributeError):
        pass
    text = raw.decode(errors="replace").strip()[:300]
    return f"HTTP {status}" + (f": {text}" if text else "")


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
