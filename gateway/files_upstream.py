"""Talking to a provider's Files API for a caller (`endpoints_files`, `endpoints_gemini_files`): which upstream
holds the caller's files, a call to it with the caller's headers it is owed, an upload body streamed as it
arrives within the upload limit, a file's lifetime from the provider's answer, and list cursors sealed.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator, Iterable
from typing import IO

from starlette.requests import Request

from prefixgate.dialects import wire_format
from prefixgate.errors import RequestError
from prefixgate.gateway.auth import Caller, upstream_credential
from prefixgate.gateway.body_limits import BodyLimits
from prefixgate.gateway.endpoints_responses import api_path
from prefixgate.gateway.file_quota import FILE_TTL_S, FileQuota
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.provider_ids import FILE
from prefixgate.gateway.proxy import Proxy
from prefixgate.gateway.sealed import seal, unseal
from prefixgate.gateway.upstream import (
    BodyStream,
    UpstreamFailure,
    UpstreamResponse,
    forwarded_headers,
    takes_callers_headers,
)
from prefixgate.policies import Upstream
from prefixgate.providers.cached_contents import parse_rfc3339
from prefixgate.providers.files import FILE_KINDS, PROVIDER_NAMES

UPLOAD_ANSWER_S = 300.0     # a provider reads and checks a whole upload before it answers
SPOOL_CHUNK = 1 << 20
PAGE = "page_"              # how the sealed cursors begin (Anthropic's own opaque ones do too: its SDK's `page`)


def sealed_cursor(proxy: Proxy, cursor: str) -> str:
    """A provider's opaque list cursor as the caller gets it: sealed (it may spell out another tenant's id)."""
    return PAGE + seal(proxy.secret, cursor)


def opened_cursor(proxy: Proxy, cursor: str, field: str = "page") -> str:
    """The provider's cursor inside one `sealed_cursor` made; a 400 for any other."""
    found = unseal(proxy.secret, cursor.removeprefix(PAGE)) if cursor.startswith(PAGE) else None
    if found is None:
        raise RequestError(f"{field}: not a page cursor this gateway issued (pass the list's back as it is)",
                           field=field)
    return found


def files_upstream(proxy: Proxy, caller: Caller, dialect: str) -> Upstream:
    """Where the caller's files go: the first upstream of the key's routes that is the provider's own API."""
    return files_upstreams(proxy, caller, dialect)[0]


def files_upstreams(proxy: Proxy, caller: Caller, dialect: str) -> list[Upstream]:
    """Every account the key's routes reach that is the provider's own API (one upstream each), in policy order."""
    key, found = caller.key, {}
    for route in proxy.policy.routes:
        if key is not None and key.routes and route.name not in key.routes:
            continue
        for ref in route.targets:
            for name in ref.upstreams:
                if proxy.policy.upstreams[name].kind in FILE_KINDS[dialect]:
                    found.setdefault(name, proxy.policy.upstreams[name])
    if not found:
        raise RequestError(f"no route of this key reaches {PROVIDER_NAMES[dialect]}'s own API, which would hold "
                           "its files", status=403, kind="permission")
    return list(found.values())


async def file_home(proxy: Proxy, caller: Caller, dialect: str, file_id: str, kind: str = FILE) -> Upstream:
    """The account that holds the file (recorded at its upload) or container (`kind`), else where the caller's
    files go."""
    home = await proxy.stored_ids.find_home(kind, file_id)
    upstream = proxy.policy.upstreams.get(home) if home is not None else None
    if upstream is None or upstream.kind not in FILE_KINDS[dialect]:
        return files_upstream(proxy, caller, dialect)
    return upstream


async def forget_if_gone(proxy: Proxy, quota: FileQuota, caller: Caller, failure: UpstreamFailure,
                         upstream: Upstream, names: Iterable[str], counted: str) -> None:
    """A file the provider says is gone (deleted at the provider, not through the gateway) when asked at its
    recorded home: nobody's from now on (`names`: each it is known by), its share of the tenant's upload
    quota (`counted`: the id it is counted under) free again. Else it would count until it expires, which
    for most files is never (`FILE_TTL_S`)."""
    gone = failure.status == 404 or (failure.status == 403 and "may not exist" in failure.message)  # Gemini's
    if not gone or await proxy.stored_ids.find_home(FILE, counted) != upstream.name:
        return      # a 404 from where the file never was (its home unknown) says nothing of the file
    for name in names:
        await proxy.stored_ids.forget(FILE, name)
    await quota.remove(principal(caller.key), counted)


async def may_touch(proxy: Proxy, caller: Caller, file_id: str, method: str, kind: str = FILE) -> bool:
    """Whether the caller may read (GET) or change the file (or container: `kind`): its tenant's, or, to read
    only, an id the operator granted its key (`provider_ids`: made for it outside the gateway, which it may also
    name)."""
    if method == "GET" and caller.key is not None and file_id in caller.key.provider_ids:
        return True
    return await proxy.stored_ids.allows(kind, file_id, principal(caller.key))


async def send(proxy: Proxy, request: Request, caller: Caller, dialect: str, upstream: Upstream, method: str,
               tail: str, query: str, body: bytes | BodyStream, headers: dict[str, str] | None = None,
               timeout_s: float = 60, stream: bool = False) -> UpstreamResponse:
    """One call to `tail` under the upstream's API root (a Gemini upload's path is whole already)."""
    wire = wire_format(dialect)
    # The caller's version, betas and organisation, to the provider itself only (as model requests send them).
    own = forwarded_headers(wire, request.headers) if takes_callers_headers(upstream) else {}
    return await proxy.upstream.forward(upstream, wire, method, api_path(upstream, tail), query, body,
                                        upstream_credential(upstream, caller, dialect), timeout_s,
                                        caller_headers={**own, **(headers or {})}, stream=stream)


async def upload_body(request: Request, limits: BodyLimits, dialect: str, idle_s: float) -> BodyStream:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit():
        limits.check_upload(int(declared), dialect)     # refused before a byte is read
        return BodyStream(_arriving(request, limits, dialect, idle_s), int(declared))
    spool = tempfile.TemporaryFile()        # noqa: SIM115 (closed by _spooled once sent)
    size = 0
    try:
        async for chunk in _arriving(request, limits, dialect, idle_s):
            spool.write(chunk)
            size += len(chunk)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return BodyStream(_spooled(spool), size)


async def _arriving(request: Request, limits: BodyLimits, dialect: str, idle_s: float) -> AsyncIterator[bytes]:
    """The caller's body as it arrives, within the upload limit; a 408 when `idle_s` pass with nothing."""
    chunks, size = request.stream().__aiter__(), 0
    while True:
        try:
            chunk = await asyncio.wait_for(anext(chunks), idle_s)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise RequestError(f"request body stalled: nothing arrived for {idle_s:g} s", status=408,
                               kind="timeout") from None
        size += len(chunk)
        limits.check_upload(size, dialect)
        if chunk:
            yield chunk


async def _spooled(spool: IO[bytes]) -> AsyncIterator[bytes]:
    try:
        while chunk := spool.read(SPOOL_CHUNK):
            yield chunk
    finally:
        spool.close()


def json_object(raw: bytes | None) -> dict:
    """An upstream's JSON object answer ({} for anything else: its body still goes back to the caller as sent)."""
    try:
        found = json.loads(raw or b"")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def lifetime_s(made: dict, now: float) -> float:
    """Seconds until the file expires (OpenAI's epoch `expires_at`, Anthropic's RFC 3339 one, Gemini's
    `expirationTime`), else FILE_TTL_S."""
    expires = made.get("expires_at", made.get("expirationTime"))
    if isinstance(expires, (int, float)) and not isinstance(expires, bool):
        return max(60.0, expires - now)
    if isinstance(expires, str):
        try:
            return max(60.0, parse_rfc3339(expires, "expires_at") - now)
        except RequestError:
            pass
    return FILE_TTL_S
