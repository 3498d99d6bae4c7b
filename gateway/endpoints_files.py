"""`/v1/files`: OpenAI's Files API and Anthropic's (beta), through the gateway, each file its tenant's.

Whose API a call is comes from the caller's headers (Anthropic's SDK always sends `anthropic-version`, as on
`/v1/models`), and problems answer in that SDK's error shape; Google's SDK's `/v1/files` (Gemini's Files API) is
not served. An upload goes to the first upstream of the key's routes that is that provider's own API
(`providers.files.FILE_KINDS`), with the gateway's credential as model requests go, streamed as it arrives
(never held whole: a body without a content-length is spooled to a temporary file first, since the upstream
needs its length) within `BodyLimits.check_upload`. The id it answers is recorded as the caller's tenant's,
with the upstream that holds it (`stored_ids`, kind `file`: what `provider_ids` checks a model request
against). Metadata, `/content` and DELETE of an id the tenant does not own are the provider's own 404, never
forwarded; a list is filtered to the tenant's files, pages of others' files skipped, its opaque cursor sealed
(`sealed`). Uploads are free at both providers: nothing is written to the ledger.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import IO
from urllib.parse import urlencode

from fastapi import APIRouter
from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse

from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import anthropic, wire_format
from prefixgate.errors import RequestError
from prefixgate.gateway.accounting import CLIENT_CLOSED
from prefixgate.gateway.auth import Caller, authenticate, upstream_credential
from prefixgate.gateway.body_limits import BodyLimits
from prefixgate.gateway.endpoints_models import shape_of
from prefixgate.gateway.endpoints_responses import api_path
from prefixgate.gateway.error_response import answer_or_error, error_response
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.provider_ids import FILE
from prefixgate.gateway.proxy import Proxy
from prefixgate.gateway.sealed import seal, unseal
from prefixgate.gateway.upstream import BodyStream, UpstreamResponse, forwarded_headers, takes_callers_headers
from prefixgate.model_ids import STORED_ID, path_model
from prefixgate.policies import Upstream
from prefixgate.providers.cached_contents import parse_rfc3339
from prefixgate.providers.files import FILE_KINDS, LIST_QUERY, PROVIDER_NAMES, file_not_found

router = APIRouter()
# A file lives until it is deleted unless it says when it expires; its owner is remembered that long (an owner
# forgotten earlier would make the tenant's own file a 404: refused, never leaked).
FILE_TTL_S = 10 * 365 * 86400
UPLOAD_ANSWER_S = 300.0     # a provider reads and checks a whole upload before it answers
MAX_LIST_PAGES = 50         # upstream pages of other tenants' files one list call skips at most
SPOOL_CHUNK = 1 << 20
PAGE = "page_"              # how Anthropic's opaque list cursors begin (its SDK's `page`)


@router.post("/v1/files")
async def upload(request: Request) -> Response:
    try:
        return await _answer(request, _upload)
    except ClientDisconnect:
        return Response(status_code=CLIENT_CLOSED)      # gone mid-upload: the upstream saw the body cut short


@router.get("/v1/files")
async def listed(request: Request) -> Response:
    return await _answer(request, _list)


@router.get("/v1/files/{file_id}")
async def retrieve(file_id: str, request: Request) -> Response:
    return await _answer(request, partial(_owned, method="GET", file_id=file_id, suffix=""))


@router.get("/v1/files/{file_id}/content")
async def content(file_id: str, request: Request) -> Response:
    return await _answer(request, partial(_owned, method="GET", file_id=file_id, suffix="/content"))


@router.delete("/v1/files/{file_id}")
async def delete(file_id: str, request: Request) -> Response:
    return await _answer(request, partial(_owned, method="DELETE", file_id=file_id, suffix=""))


async def _answer(request: Request, work: Callable[[Request, str], Awaitable[Response]]) -> Response:
    """`work` for the caller's format, whose SDK its headers name (as on `/v1/models`); a Google client's
    `/v1/files` (Gemini's Files API, not served) is Google's 404."""
    dialect = shape_of(request)
    if dialect not in FILE_KINDS:
        return error_response(RequestError(f"{request.url.path}: this gateway does not serve this format's Files API",
                                           status=404, kind="not_found"), dialect)
    return await answer_or_error(dialect, work(request, dialect))


async def _upload(request: Request, dialect: str) -> Response:
    proxy: Proxy = request.app.state.proxy
    caller = authenticate(request.headers, request.query_params, proxy.keys)   # before a byte is read or sent
    upstream = _files_upstream(proxy, caller, dialect)
    body = await _upload_body(request, proxy.body_limits, dialect, proxy.settings.client_timeout_s)
    form = {"content-type": request.headers.get("content-type", "")}
    resp = await _send(proxy, request, caller, dialect, upstream, "POST", "/files", "", body, form, UPLOAD_ANSWER_S)
    made = _json_object(resp.body)
    if isinstance(made.get("id"), str):
        proxy.stored_ids.record(FILE, made["id"], principal(caller.key), _lifetime_s(made, time.time()),
                                home=upstream.name)
    return Response(resp.body, resp.status, resp.headers, media_type="application/json")


async def _list(request: Request, dialect: str) -> Response:
    proxy: Proxy = request.app.state.proxy
    caller = authenticate(request.headers, request.query_params, proxy.keys)
    upstream = _files_upstream(proxy, caller, dialect)
    owner = principal(caller.key)
    query: list[tuple[str, str]] | None = [(k, _opened(proxy, v) if k == "page" and owner is not None else v)
                                           for k, v in request.query_params.multi_items() if k in LIST_QUERY[dialect]]
    kept: list[dict] = []
    for _ in range(MAX_LIST_PAGES):
        resp = await _send(proxy, request, caller, dialect, upstream, "GET", "/files", urlencode(query or []), b"")
        if owner is None:       # an open gateway: one party, the provider's page as it is
            return Response(resp.body, resp.status, resp.headers, media_type="application/json")
        page = _json_object(resp.body)
        items = [i for i in page.get("data") or () if isinstance(i, dict)]
        kept += await proxy.stored_ids.only_own(FILE, items, lambda f: str(f.get("id", "")), owner)
        query = _next_query(query or [], page, items, dialect)
        if kept or query is None:
            break
    # The cursors are the tenant's own files' (the SDKs page on from the last one), never another tenant's id;
    # an opaque one (the provider's `next_page`, which may spell out the id of the page's last file) is sealed.
    page.update(data=kept, first_id=kept[0]["id"] if kept else None, last_id=kept[-1]["id"] if kept else None)
    if page.get("next_page"):
        page["next_page"] = PAGE + seal(proxy.secret, str(page["next_page"]))
    return Response(compact_bytes(page), resp.status, resp.headers, media_type="application/json")


def _opened(proxy: Proxy, cursor: str) -> str:
    """The provider's cursor inside a `next_page` this gateway sealed; a 400 for any other."""
    found = unseal(proxy.secret, cursor.removeprefix(PAGE)) if cursor.startswith(PAGE) else None
    if found is None:
        raise RequestError("page: not a page cursor this gateway issued (pass a list's next_page back as it is)",
                           field="page")
    return found


def _next_query(query: list[tuple[str, str]], page: dict, items: list[dict], dialect: str
                ) -> list[tuple[str, str]] | None:
    """The query for the upstream's next page after `page` (None: it was the last), in the direction asked."""
    if not page.get("has_more") and not page.get("next_page"):
        return None
    rest = [(k, v) for k, v in query if k not in ("after", "after_id", "before_id", "page")]
    if page.get("next_page"):
        return [*rest, ("page", str(page["next_page"]))]
    if any(k == "before_id" for k, _ in query):
        cursor, name = page.get("first_id") or (items[0].get("id") if items else None), "before_id"
    else:
        cursor = page.get("last_id") or (items[-1].get("id") if items else None)
        name = "after_id" if dialect == anthropic.WIRE.name else "after"
    return [*rest, (name, str(cursor))] if cursor else None


async def _owned(request: Request, dialect: str, *, method: str, file_id: str, suffix: str) -> Response:
    """Metadata, content or deletion of a file the caller's tenant uploaded; any other id is the provider's 404."""
    proxy: Proxy = request.app.state.proxy
    caller = authenticate(request.headers, request.query_params, proxy.keys)
    segment = path_model(file_id, STORED_ID, field="file_id")
    if not await proxy.stored_ids.allows(FILE, file_id, principal(caller.key)):
        raise file_not_found(dialect, file_id)
    home = await proxy.stored_ids.find_home(FILE, file_id)
    upstream = proxy.policy.upstreams.get(home) if home is not None else None
    if upstream is None or upstream.kind not in FILE_KINDS[dialect]:
        upstream = _files_upstream(proxy, caller, dialect)
    download = suffix == "/content"
    resp = await _send(proxy, request, caller, dialect, upstream, method, f"/files/{segment}{suffix}", "", b"",
                       stream=download)
    if method == "DELETE" and 200 <= resp.status < 300:
        await proxy.stored_ids.forget(FILE, file_id)
    if download and resp.chunks is not None:
        return StreamingResponse(resp.chunks, resp.status, resp.headers, media_type="application/octet-stream",
                                 background=BackgroundTask(resp.close))
    return Response(resp.body, resp.status, resp.headers, media_type="application/json")


def _files_upstream(proxy: Proxy, caller: Caller, dialect: str) -> Upstream:
    """Where the caller's files live: the first upstream of the key's routes that is the provider's own API."""
    key = caller.key
    for route in proxy.policy.routes:
        if key is not None and key.routes and route.name not in key.routes:
            continue
        for ref in route.targets:
            for name in ref.upstreams:
                if proxy.policy.upstreams[name].kind in FILE_KINDS[dialect]:
                    return proxy.policy.upstreams[name]
    raise RequestError(f"no route of this key reaches {PROVIDER_NAMES[dialect]}'s own API, which would hold its "
                       "files", status=403, kind="permission")


async def _send(proxy: Proxy, request: Request, caller: Caller, dialect: str, upstream: Upstream, method: str,
                tail: str, query: str, body: bytes | BodyStream, headers: dict[str, str] | None = None,
                timeout_s: float = 60, stream: bool = False) -> UpstreamResponse:
    wire = wire_format(dialect)
    # The caller's version, betas and organisation, to the provider itself only (as model requests send them).
    own = forwarded_headers(wire, request.headers) if takes_callers_headers(upstream) else {}
    return await proxy.upstream.forward(upstream, wire, method, api_path(upstream, tail), query, body,
                                        upstream_credential(upstream, caller, dialect), timeout_s,
                                        caller_headers={**own, **(headers or {})}, stream=stream)


async def _upload_body(request: Request, limits: BodyLimits, dialect: str, idle_s: float) -> BodyStream:
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


def _json_object(raw: bytes | None) -> dict:
    """An upstream's JSON object answer ({} for anything else: its body still goes back to the caller as sent)."""
    try:
        found = json.loads(raw or b"")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _lifetime_s(made: dict, now: float) -> float:
    """Seconds until the file expires (OpenAI's epoch `expires_at`, Anthropic's RFC 3339 one), else FILE_TTL_S."""
    expires = made.get("expires_at")
    if isinstance(expires, (int, float)) and not isinstance(expires, bool):
        return max(60.0, expires - now)
    if isinstance(expires, str):
        try:
            return max(60.0, parse_rfc3339(expires, "expires_at") - now)
        except RequestError:
            pass
    return FILE_TTL_S
