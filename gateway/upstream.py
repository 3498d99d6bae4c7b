"""Talking to upstreams: pooled keep-alive connections (the lean client in http1.py; aiohttp for upstreams
behind an HTTP proxy), streamed responses, failures classified for retry.

A non-2xx answer or a transport error becomes an `UpstreamFailure` whose message is the provider's own
(secrets scrubbed); a 2xx answer becomes an `UpstreamResponse` whose body is read whole or streamed,
and a stream that breaks raises `UpstreamFailure` from its chunk iterator.

Not httpx: httpcore's pool checks every pooled socket with a poll() on each request, which measured
6.5 ms of CPU per request at 32 requests in flight (bench/gateway.py). Why a lean client of our own ahead
of aiohttp is in http1.py; aiohttp's responses are adapted to its interface and errors (`_Proxied`).

The aiohttp session does not use `trust_env`: with it, every request makes two thread-pool round
trips (the ~/.netrc file and the proxy variables are read again each time), which was a third of the
gateway's CPU per request. HTTP(S)_PROXY / NO_PROXY are read once per upstream origin instead.
Upstream cookies are not kept either: a shared cookie jar would carry one caller's provider cookies
into another caller's requests.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from urllib.parse import urlencode

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from prefixgate.compact_json import compact_bytes
from prefixgate.dialects.google_error import caller_details, google_error, path_project, without_account
from prefixgate.dialects.wire import WireFormat
from prefixgate.errors import KIND_BY_STATUS, Refused, RequestError, limit_reached
from prefixgate.gateway.http1 import BodyStream, Broken, ConnectFailed, Http1Pool, Http1Response, ReadTimeout
from prefixgate.gateway.local import LocalTarget
from prefixgate.policies.schema import Upstream
from prefixgate.providers import compatible

# Upstream response headers worth handing back to the caller (ids for support tickets, rate limits).
PASS_HEADERS = ("request-id", "x-request-id", "openai-processing-ms", "retry-after", "retry-after-ms",
                "anthropic-organization-id",
                # A Gemini resumable upload's state (endpoints_gemini_files replaces the URL with the gateway's own).
                "x-goog-upload-status", "x-goog-upload-url", "x-goog-upload-chunk-granularity")
PASS_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
# Provider keys and signing credentials that could appear in an upstream's error text ("Incorrect API key
# provided: sk-...", a Google OAuth access token `ya29.`, an AWS access key id `AKIA`/`ASIA` + 16).
SECRET = re.compile(r"(sk-[A-Za-z0-9_\-]{6,}|AIza[0-9A-Za-z_\-]{20,}|Bearer\s+\S+|ya29\.[0-9A-Za-z_\-.]+"
                    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b)")
# What a signed request's headers hold that must never be echoed: a bearer token, SigV4's access key id and
# signature, a session token.
_SIGNED_PARTS = re.compile(r"(?:Bearer\s+|Credential=|Signature=)([^\s,/]+)")
# An upstream's 429 codes for an account out of quota or credit (OpenAI's error codes guide): no retry of that
# upstream helps until its billing changes; another target may.
QUOTA_CODES = frozenset({"insufficient_quota"})
log = logging.getLogger("prefixgate.gateway")


class UpstreamFailure(Exception):
    def __init__(self, upstream: str, status: int | None, message: str, *, timed_out: bool = False,
                 connect_failed: bool = False, retry_after: float | None = None, param: str | None = None,
                 answered: bool = False, code: str | None = None, details: dict | list | None = None,
                 rpc_status: str | None = None, lost: bool = False) -> None:
        super().__init__(message)
        self.upstream, self.status, self.message = upstream, status, message
        self.timed_out, self.connect_failed, self.retry_after = timed_out, connect_failed, retry_after
        self.param = param      # the request field the upstream's error names (OpenAI's `param`)
        self.code = code        # its error code (OpenAI's `code`: what SDK callers branch on)
        # its `error.details`: Anthropic's object (`error_code`: what SDK callers branch on) or Google's list
        self.details = details
        self.rpc_status = rpc_status    # Google's status name (FAILED_PRECONDITION)
        # The upstream answered 2xx before it broke: it did the work (and billed it), so it is never sent again.
        self.answered = answered
        # The connection broke once the request was on its way and before an answer: the upstream may have acted.
        self.lost = lost
        # It refused the gateway's own credentials (not a caller's passed through): the operator's to fix.
        self.own_credentials = False
        self.refused: Refused | None = None     # its refusal as sent (type, rate-limit headers): `_credited` sets it

    @property
    def in_doubt(self) -> bool:
        """Whether the upstream may have acted on the request all the same (made what it asked for, billed it): it
        went out and no answer says what became of it. A refusal did say; a connection never made sent nothing."""
        return self.answered or self.lost or (self.status is None and not self.connect_failed)

    @property
    def out_of_quota(self) -> bool:
        """The upstream's account is out of quota: sending it again fails the same way."""
        return self.status == 429 and self.code in QUOTA_CODES

    def request_error(self) -> RequestError:
        """The failure as the caller will see it, in its own dialect's error shape."""
        if self.timed_out:
            return RequestError(f"upstream {self.upstream!r} timed out", status=504, kind="timeout")
        if self.connect_failed:
            return RequestError(f"upstream {self.upstream!r} is unreachable", status=502, kind="server")
        if self.own_credentials:
            # Passed on as a 401, the caller's SDK (and Claude Code's "run /login") would blame the caller's own
            # key, which the gateway accepted: a 502 its SDK is told not to retry, naming whose key it was.
            return RequestError(f"upstream {self.upstream!r} refused the gateway's credentials: {self.message}",
                                status=502, kind="not_configured", rpc_status="INTERNAL")
        # A redirect (an upstream URL that moved: the gateway follows none) is the gateway's configuration, not the
        # caller's request: a 502, as no status is.
        status = self.status if self.status and self.status >= 400 else 502
        kind = "quota" if self.out_of_quota else KIND_BY_STATUS.get(status, "server" if status >= 500 else "invalid_request")
        # The provider's own words, as its SDK would read them from the provider: which upstream said them is the
        # operator's business (the request's ledger `target`, and the log line `_exchange` writes), and a prefix
        # would set this 404 apart from the gateway's own for an id the caller may not see.
        return RequestError(self.message, status=status, kind=kind,
                            retry_after=self.retry_after, field=self.param, code=self.code, details=self.details,
                            rpc_status=self.rpc_status, refused=self.refused if status == self.status else None)


def reported_error(upstream: str, wire: WireFormat, event: dict, message: str) -> RequestError:
    """An error `upstream` reported after its 200 (an event mid-stream, a 200 body), as the caller gets it: as the
    refusal with the status its type stands for would (Anthropic's overloaded_error a 529, a rate limit a 429), so
    the caller's SDK or agent retries what it would retry."""
    failure = UpstreamFailure(upstream, wire.stream_error_status(event) or 502, message)
    said = event["error"] if isinstance(event.get("error"), dict) else event
    failure.refused = Refused(wire.planner_provider, None, {}, limit_reached(said.get("type"), {}, said.get("details")))
    return failure.request_error()


@dataclass
class UpstreamResponse:
    status: int
    headers: dict[str, str]
    body: bytes | None                      # a whole (non-streamed) body
    chunks: AsyncIterator[bytes] | None     # a streamed body
    close: Callable[[], Awaitable[None]]
    # What an error text from this exchange may show a caller: the request's key, credentials and project taken out
    # (an upstream's error event mid-stream is one).
    clean: Callable[[str], str] = lambda text: scrub(text)


async def _nothing() -> None:
    return None


def auth_headers(upstream: Upstream, wire: WireFormat, key: str | None) -> dict[str, str]:
    """The policy's extra headers for `upstream`, and the key the way its format sends one."""
    headers = dict(upstream.headers)
    if key is not None:
        profile = upstream.profile
        headers.update(compatible.auth_headers(profile, key) if profile else wire.auth_headers(key))
    return headers


def forwarded_headers(wire: WireFormat, headers: Mapping[str, str]) -> dict[str, str]:
    """The caller's own headers its format passes on (`forward_headers`: Anthropic's version and betas)."""
    return {h: headers[h] for h in wire.forward_headers if h in headers}


def takes_callers_headers(upstream: Upstream) -> bool:
    """Whether those go to `upstream`: its provider itself, never a compatible provider or a self-hosted server
    (OpenAI-Organization means nothing to DeepSeek and is not its business)."""
    return not upstream.self_hosted and not upstream.provider


def request_url(upstream: Upstream, wire: WireFormat, model: str, stream: bool) -> str:
    """Where a model request goes: the format's URL, or a hosted compatible provider's own (Azure's deployments,
    its v1 API's Responses)."""
    profile = upstream.profile
    if profile is not None and wire.name == "responses":     # a provider serving it itself (dialect_for)
        return compatible.responses_url(profile, upstream.url)
    if profile is not None:
        return compatible.chat_url(profile, upstream.url, model, upstream.api_version)
    return wire.upstream_url(upstream.url, model, stream)


# Shorter than this, a key is no plausible secret (the docs' example key is `k`): replacing it wherever it
# occurs would mangle the error text ("is not a ***nown model") and hide nothing a provider would echo.
MIN_SECRET_CHARS = 8


def signing_secrets(headers: dict[str, str]) -> tuple[str, ...]:
    """The credentials a signed request carries (whatever signed it: an instance role, ADC), to scrub them."""
    auth = headers.get("authorization") or headers.get("Authorization") or ""
    return (*_SIGNED_PARTS.findall(auth), headers.get("x-amz-security-token") or headers.get("X-Amz-Security-Token"))


# The query parameters each pass-through API defines (what is forwarded; anything else, `?key=` included, is not).
CACHED_CONTENTS_QUERY = frozenset({"pageSize", "pageToken", "updateMask"})
STORED_RESPONSE_QUERY = frozenset({"include", "include[]", "stream", "starting_after", "include_obfuscation",
                                   "after", "before", "limit", "order"})
STORED_INTERACTION_QUERY = frozenset({"stream", "last_event_id", "include_input"})


def allowed_query(items: Iterable[tuple[str, str]], allowed: frozenset[str]) -> str:
    """The caller's query parameters the upstream API defines, encoded afresh (never the raw query string)."""
    return urlencode([(k, v) for k, v in items if k in allowed])


def scrub(text: str, *secrets: str | None) -> str:
    for s in secrets:
        if s and len(s) >= MIN_SECRET_CHARS:
            text = text.replace(s, "***")
    return SECRET.sub("***", text)


def implausible_keys(upstreams: Iterable[Upstream]) -> list[str]:
    """Start-up warnings for provider keys too short to be real (a placeholder left in the environment)."""
    out = []
    for upstream in upstreams:
        for env in upstream.api_key_env:
            value = os.environ.get(env)
            if value and len(value) < MIN_SECRET_CHARS:
                out.append(f"{env} holds a {len(value)}-character key: no provider issues keys that short, so "
                           f"{upstream.name!r} will likely refuse it (and error texts are not scrubbed of it)")
    return out


class UpstreamClient:
    """Create inside the running event loop (the gateway's lifespan does)."""

    def __init__(self, connect_timeout_s: float, local: LocalTarget | None = None) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.local = local
        self.signing: dict = {}        # the signing formats' credentials (WireFormat.sign)
        connector = aiohttp.TCPConnector(limit=1000, limit_per_host=0, keepalive_timeout=30, ttl_dns_cache=300)
        # No automatic decompression: bodies are relayed as they come (we ask for identity encoding).
        self.http = aiohttp.ClientSession(connector=connector, auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(),
                                          skip_auto_headers=("User-Agent",))
        self.direct = Http1Pool(connect_timeout_s)   # every upstream reached without an HTTP proxy
        self._proxies: dict[str, tuple[URL | None, aiohttp.BasicAuth | None]] = {}
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}

    async def aclose(self) -> None:
        self.direct.close()
        await self.http.close()

    async def send(self, upstream: Upstream, wire: WireFormat, model: str, body: bytes, stream: bool,
                   headers: dict[str, str], key: str | None, timeout_s: float) -> UpstreamResponse:
        if upstream.kind == "local":
            return await self._local(upstream, body, stream)
        url = request_url(upstream, wire, model, stream)
        headers = {"content-type": "application/json", "accept-encoding": "identity", **headers,
                   **auth_headers(upstream, wire, key)}
        return await self._credited(upstream, wire, "POST", url, body, headers, stream, key, timeout_s)

    async def forward(self, upstream: Upstream, wire: WireFormat, method: str, path: str, query: str,
                      body: bytes | BodyStream, key: str | None, timeout_s: float = 60,
                      caller_headers: Mapping[str, str] | None = None, stream: bool = False) -> UpstreamResponse:
        """A plain pass-through call (Gemini cachedContents, token counting, model lists, files) to `path` on
        `upstream`, with the format's own required headers (Anthropic's `anthropic-version`) and `caller_headers`
        over them (a multipart upload's content-type); `stream`: the answer's body is streamed."""
        url = wire.resource_url(upstream.url, path) + (f"?{query}" if query else "")
        headers = {"content-type": "application/json", "accept-encoding": "identity", **wire.upstream_headers,
                   **(caller_headers or {}), **auth_headers(upstream, wire, key)}
        return await self._credited(upstream, wire, method, url, body or None, headers, stream, key, timeout_s)

    async def _credited(self, upstream: Upstream, wire: WireFormat, method: str, url: str,
                        body: bytes | BodyStream | None, headers: dict[str, str], stream: bool, key: str | None,
                        timeout_s: float) -> UpstreamResponse:
        """`_signed`, where the one decision is made whether the credentials sent are the gateway's own (its key,
        its signing identity, a self-hosted server's) or a caller's key passed through: a 401 to the gateway's
        own is the operator's to fix (`UpstreamFailure.own_credentials`), and its signing identity's is renewed."""
        signing = wire.signs and key is None      # the gateway's identity signs (Bedrock's SigV4, Vertex's token)
        try:
            return await self._signed(upstream.name, wire, method, url, body, headers, stream, key, timeout_s,
                                      renewable=signing)
        except UpstreamFailure as f:
            # Else no key: a self-hosted server needs none, or a caller on an open gateway sent none of its own
            # (auth.upstream_credential).
            own = signing or (key == upstream.api_key() if key is not None else upstream.self_hosted)
            f.own_credentials = f.status == 401 and own
            if f.refused is not None:
                f.refused = replace(f.refused, provider=wire.planner_provider)
            raise

    async def _signed(self, name: str, wire: WireFormat, method: str, url: str, body: bytes | BodyStream | None,
                      headers: dict[str, str], stream: bool, key: str | None, timeout_s: float, *,
                      renewable: bool) -> UpstreamResponse:
        """One exchange, signed when the format signs. Refused (401) with `renewable` credentials (the gateway's own
        short-lived ones: a Google token expired or revoked early), it is sent once more with renewed ones; the
        refused attempt was not served, so nothing is billed twice."""
        if not wire.signs:
            return await self._exchange(name, method, url, body, headers, stream, (key,), timeout_s)
        try:
            signed = await wire.sign(method, url, headers, body, self.signing)
            return await self._exchange(name, method, url, body, signed, stream, (key, *signing_secrets(signed)), timeout_s)
        except UpstreamFailure as f:
            if f.status != 401 or not renewable or not await wire.reauthenticate(self.signing):
                raise
        signed = await wire.sign(method, url, headers, body, self.signing)
        return await self._exchange(name, method, url, body, signed, stream, (key, *signing_secrets(signed)), timeout_s)

    async def _exchange(self, name: str, method: str, url: str, body: bytes | BodyStream | None, headers: dict[str, str],
                        stream: bool, secrets: tuple[str | None, ...], timeout_s: float) -> UpstreamResponse:
        try:
            resp = await self._open(name, method, url, body, headers, timeout_s)
        except ConnectFailed as e:
            raise UpstreamFailure(name, None, str(e), connect_failed=True) from None
        except ReadTimeout:
            raise UpstreamFailure(name, None, "no answer in time", timed_out=True) from None
        except Broken as e:
            raise UpstreamFailure(name, 502, f"upstream {name!r}: connection failed ({e})", lost=True) from None
        headers_out = _passed(resp.headers)

        def clean(text: str) -> str:
            return scrub(text, *secrets, path_project(url))
        if resp.status >= 300:
            try:
                raw = await resp.read()
            except (ReadTimeout, Broken):
                raw = b""
            message, google = clean(_error_message(raw, resp.status)), google_error(raw)
            log.info("upstream %r answered %d: %s", name, resp.status, message,
                     extra={"fields": {"upstream": name, "status": resp.status}})
            failure = UpstreamFailure(name, resp.status, without_account(message, clean) if google else message,
                                      retry_after=_retry_after(headers_out, raw), param=_error_field(raw, "param"),
                                      code=_error_field(raw, "code") or aws_error_type(resp.headers),
                                      details=caller_details(google, clean) if google else _error_details(raw),
                                      rpc_status=google["status"] if google else None)
            sent_type = _error_field(raw, "type")
            failure.refused = Refused("", sent_type, headers_out,
                                      limit_reached(sent_type, headers_out, google and google.get("details")))
            raise failure

        async def close() -> None:
            resp.close()   # drops the connection: an upstream mid-stream must see the hang-up

        if stream:
            return UpstreamResponse(resp.status, headers_out, None, _chunks(name, resp), close, clean)
        try:
            data = await resp.read()
        except ReadTimeout:
            raise UpstreamFailure(name, None, "timed out reading the response", timed_out=True, answered=True) from None
        except Broken as e:
            raise UpstreamFailure(name, 502, f"upstream {name!r}: response cut off ({e})", answered=True) from None
        return UpstreamResponse(resp.status, headers_out, data, None, _nothing)

    async def _open(self, name: str, method: str, url: str, body: bytes | BodyStream | None, headers: dict[str, str],
                    timeout_s: float) -> Http1Response | _Proxied:
        proxy, proxy_auth = self._proxy(name, url)
        if proxy is None:
            return await self.direct.request(method, url, headers, body, timeout_s)
        data: bytes | AsyncIterator[bytes] | None = body
        if isinstance(body, BodyStream):     # its length, so aiohttp sends it as it comes without chunking it
            data, headers = body.chunks, {**headers, "content-length": str(body.length)}
        with _lean_errors():
            resp = await self.http.request(method, url, data=data, headers=headers, timeout=self._timeout(timeout_s),
                                           allow_redirects=False, proxy=proxy, proxy_auth=proxy_auth)
        return _Proxied(resp)

    def _timeout(self, timeout_s: float) -> aiohttp.ClientTimeout:
        timeout = self._timeouts.get(timeout_s)
        if timeout is None:
            # sock_read bounds the wait for the first byte and every stall after it; a stream may run for
            # as long as it keeps sending.
            timeout = self._timeouts[timeout_s] = aiohttp.ClientTimeout(
                total=None, sock_connect=min(self.connect_timeout_s, timeout_s), sock_read=timeout_s)
        return timeout

    def _proxy(self, upstream: str, url: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
        """The proxy the environment names for `upstream` (one origin), none when NO_PROXY exempts it."""
        found = self._proxies.get(upstream)
        if found is None:
            try:
                found = get_env_proxy_for_url(URL(url))
            except LookupError:
                found = (None, None)
            self._proxies[upstream] = found
        return found

    async def _local(self, upstream: Upstream, body: bytes, stream: bool) -> UpstreamResponse:
        if self.local is None:
            raise UpstreamFailure(upstream.name, 503, "no local backend is configured")
        try:
            answer = await self.local.chat(json.loads(body), stream=stream)
        except RequestError as e:
            raise UpstreamFailure(upstream.name, e.status, e.message, param=e.field) from None
        if isinstance(answer, dict):
            return UpstreamResponse(200, {}, compact_bytes(answer), None, _nothing)
        close = getattr(answer, "aclose", _nothing)
        return UpstreamResponse(200, {}, None, answer, close)


class _Proxied:
    """An aiohttp response (an upstream behind an HTTP proxy) with the lean client's interface and errors."""

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self._resp, self.status, self.headers, self.done = resp, resp.status, list(resp.headers.items()), False

    async def read(self) -> bytes:
        try:
            with _lean_errors():
                data = await self._resp.read()
        except BaseException:       # broken, timed out or cancelled: the connection is not reusable
            self._resp.close()
            raise
        self._resp.release()
        self.done = True
        return data

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        with _lean_errors():
            async for chunk in self._resp.content.iter_any():
                yield chunk
        self.done = True

    def close(self) -> None:
        self._resp.close()


@contextmanager
def _lean_errors() -> Iterator[None]:
    """aiohttp's exceptions as the lean client's, so one exchange routine classifies both."""
    try:
        yield
    except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as e:
        raise ConnectFailed(type(e).__name__) from None
    except (TimeoutError, aiohttp.ServerTimeoutError):
        raise ReadTimeout() from None
    except aiohttp.ClientError as e:
        raise Broken(type(e).__name__) from None


async def _chunks(name: str, resp: Http1Response | _Proxied) -> AsyncIterator[bytes]:
    try:
        async for chunk in resp.iter_chunks():
            yield chunk
    except ReadTimeout:
        raise UpstreamFailure(name, None, "stalled mid-stream", timed_out=True) from None
    except Broken as e:
        raise UpstreamFailure(name, 502, f"upstream {name!r} broke the stream ({e})") from None
    finally:
        if not resp.done:
            resp.close()


def _passed(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The upstream response headers handed back to the caller."""
    out = {}
    for k, v in headers:
        k = k.lower()
        if k in PASS_HEADERS or k.startswith(PASS_PREFIXES):
            out[k] = v
    return out


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


def _error_field(raw: bytes, name: str) -> str | None:
    """An OpenAI-shaped error's `param` (the field at fault) or `code`, so the caller's error says the same."""
    try:
        err = json.loads(raw).get("error")
    except (ValueError, AttributeError):
        return None
    value = err.get(name) if isinstance(err, dict) else None
    return value if isinstance(value, str) else None


def _error_details(raw: bytes) -> dict | None:
    """An Anthropic-shaped error's `details` object (`error_code`); Google's `details` is a list, not this."""
    try:
        err = json.loads(raw).get("error")
    except (ValueError, AttributeError):
        return None
    value = err.get("details") if isinstance(err, dict) else None
    return value if isinstance(value, dict) and value else None


def aws_error_type(headers: Iterable[tuple[str, str]]) -> str | None:
    """An AWS service's exception name, from `x-amzn-ErrorType` ("ThrottlingException:http://internal...")."""
    for k, v in headers:
        if k.lower() == "x-amzn-errortype":
            return v.split(":", 1)[0].strip() or None
    return None


def _retry_after(headers: Mapping[str, str], raw: bytes = b"") -> float | None:
    """The seconds an upstream asks to be left alone: OpenAI's `retry-after-ms`, else Retry-After as seconds or an
    HTTP date (RFC 9110 allows both), else Google's in the body. A value that is none of these, or not finite
    ("inf", "nan"), asks for nothing."""
    asked = _header_retry_after(headers)
    return asked if asked is not None else _google_retry_delay(raw)


def _google_retry_delay(raw: bytes) -> float | None:
    """Gemini's and Vertex's 429 name their wait in the body, not a header: a `google.rpc.RetryInfo` among the
    error's `details`, its `retryDelay` a protobuf Duration in JSON ("17s", "3.957525076s")."""
    try:
        details = json.loads(raw)["error"]["details"]
    except (ValueError, TypeError, KeyError):
        return None
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            delay = detail.get("retryDelay")
            if isinstance(delay, str) and delay.endswith("s"):
                try:
                    wait = float(delay[:-1])
                except ValueError:
                    return None
                return max(0.0, wait) if math.isfinite(wait) else None
    return None


def _header_retry_after(headers: Mapping[str, str]) -> float | None:
    try:
        if (ms := headers.get("retry-after-ms")) is not None and math.isfinite(wait := float(ms)):
            return max(0.0, wait / 1000)
    except ValueError:
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        wait = float(value)
    except ValueError:
        try:
            wait = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return max(0.0, wait) if math.isfinite(wait) else None
