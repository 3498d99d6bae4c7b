"""`/v1/files`: OpenAI's Files API and Anthropic's (beta), through the gateway, each file its tenant's.

Whose API a call is comes from the caller's headers (Anthropic's SDK always sends `anthropic-version`, as on
`/v1/models`; Google's its key header: Gemini's Files API, `endpoints_gemini_files`), and problems answer in that
SDK's error shape. An upload goes to the first upstream of the key's routes that is that provider's own API
(`providers.files.FILE_KINDS`), with the gateway's credential as model requests go, streamed as it arrives
(never held whole: a body without a content-length is spooled to a temporary file first, since the upstream
needs its length) within `BodyLimits.check_upload`. The id it answers is recorded as the caller's tenant's,
with the upstream that holds it (`stored_ids`, kind `file`: what `provider_ids` checks a model request
against). Metadata, `/content` and DELETE of an id the tenant does not own are the provider's own 404, never
forwarded; a list (`files_list`) covers every account the key's routes reach, filtered to the tenant's files,
pages of others' files skipped, its opaque cursor sealed (`sealed`). Uploads are free at both providers: nothing is written to the ledger.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import partial

from fastapi import APIRouter
from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse

from prefixgate.dialects import gemini
from prefixgate.errors import RequestError
from prefixgate.gateway import endpoints_gemini_files as gemini_files
from prefixgate.gateway import files_list
from prefixgate.gateway.accounting import CLIENT_CLOSED
from prefixgate.gateway.auth import authenticate
from prefixgate.gateway.endpoints_models import shape_of
from prefixgate.gateway.error_response import answer_or_error, error_response
from prefixgate.gateway.file_quota import FileQuota, file_size
from prefixgate.gateway.files_upstream import (
    UPLOAD_ANSWER_S,
    file_home,
    files_upstream,
    forget_if_gone,
    json_object,
    lifetime_s,
    may_touch,
    send,
    upload_body,
)
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.provider_ids import FILE
from prefixgate.gateway.proxy import Proxy
from prefixgate.gateway.upstream import UpstreamFailure
from prefixgate.model_ids import STORED_ID, path_model
from prefixgate.providers.files import FILE_KINDS, file_not_found

router = APIRouter()


@router.post("/v1/files")
async def upload(request: Request) -> Response:
    try:
        return await _answer(request, _upload, None)
    except ClientDisconnect:
        return Response(status_code=CLIENT_CLOSED)      # gone mid-upload: the upstream saw the body cut short


@router.get("/v1/files")
async def listed(request: Request) -> Response:
    return await _answer(request, files_list.listed, partial(gemini_files.list_files, version="v1"))


@router.get("/v1/files/{file_id}")
async def retrieve(file_id: str, request: Request) -> Response:
    return await _answer(request, partial(_owned, method="GET", file_id=file_id, suffix=""),
                         partial(gemini_files.owned, version="v1", method="GET", name=file_id))


@router.get("/v1/files/{file_id}/content")
async def content(file_id: str, request: Request) -> Response:
    return await _answer(request, partial(_owned, method="GET", file_id=file_id, suffix="/content"), None)


@router.delete("/v1/files/{file_id}")
async def delete(file_id: str, request: Request) -> Response:
    return await _answer(request, partial(_owned, method="DELETE", file_id=file_id, suffix=""),
                         partial(gemini_files.owned, version="v1", method="DELETE", name=file_id))


Work = Callable[[Request, str], Awaitable[Response]]


async def _answer(request: Request, work: Work, gemini_work: Callable[[Request], Awaitable[Response]] | None
                  ) -> Response:
    """`work` for the caller's format, whose SDK its headers name (as on `/v1/models`); a Google client's call is
    Gemini's Files API (`endpoints_gemini_files`), where it has this path (uploads have their own)."""
    dialect = shape_of(request)
    if dialect == gemini.WIRE.name and gemini_work is not None:
        return await answer_or_error(dialect, gemini_work(request))
    if dialect not in FILE_KINDS or dialect == gemini.WIRE.name:
        return error_response(RequestError(f"{request.url.path}: no such method of this format's Files API",
                                           status=404, kind="not_found"), dialect)
    return await answer_or_error(dialect, work(request, dialect))


async def _upload(request: Request, dialect: str) -> Response:
    proxy: Proxy = request.app.state.proxy
    caller = authenticate(request.headers, request.query_params, proxy.keys)   # before a byte is read or sent
    upstream = files_upstream(proxy, caller, dialect)
    quota: FileQuota = request.app.state.file_quota
    owner = principal(caller.key)
    body = await upload_body(request, proxy.body_limits, dialect, proxy.settings.client_timeout_s)
    # Before a byte is sent: its declared length, or (sent chunked) the length spooled.
    hold = await quota.reserve(owner, caller.key.uploads if caller.key else None, body.length)
    try:
        form = {"content-type": request.headers.get("content-type", "")}
        resp = await send(proxy, request, caller, dialect, upstream, "POST", "/files", "", body, form,
                          UPLOAD_ANSWER_S)
        made = json_object(resp.body)
        if isinstance(made.get("id"), str):
            ttl = lifetime_s(made, time.time())
            proxy.stored_ids.record(FILE, made["id"], owner, ttl, home=upstream.name)
            await quota.add(owner, made["id"], file_size(made), ttl)
    finally:
        await quota.release(owner, hold)
    return Response(resp.body, resp.status, resp.headers, media_type="application/json")


async def _owned(request: Request, dialect: str, *, method: str, file_id: str, suffix: str) -> Response:
    """Metadata, content or deletion of a file the caller's tenant uploaded; any other id is the provider's 404."""
    proxy: Proxy = request.app.state.proxy
    caller = authenticate(request.headers, request.query_params, proxy.keys)
    segment = path_model(file_id, STORED_ID, field="file_id")
    if not await may_touch(proxy, caller, file_id, method):
        raise file_not_found(dialect, file_id)
    upstream = await file_home(proxy, caller, dialect, file_id)
    download = suffix == "/content"
    try:
        resp = await send(proxy, request, caller, dialect, upstream, method, f"/files/{segment}{suffix}", "", b"",
                          stream=download)
    except UpstreamFailure as failure:
        await forget_if_gone(proxy, request.app.state.file_quota, caller, failure, upstream, [file_id], file_id)
        raise
    if method == "DELETE" and 200 <= resp.status < 300:
        await proxy.stored_ids.forget(FILE, file_id)
        await request.app.state.file_quota.remove(principal(caller.key), file_id)   # its share is free again
    if download and resp.chunks is not None:
        return StreamingResponse(resp.chunks, resp.status, resp.headers, media_type="application/octet-stream",
                                 background=BackgroundTask(resp.close))
    return Response(resp.body, resp.status, resp.headers, media_type="application/json")


