"""`/v1/uploads`: OpenAI's Uploads API (files over the Files API's 512 MB, up to 8 GB, in Parts of at most 64 MB),
what the openai SDK's `uploads.upload_file_chunked` drives, each Upload and the File it makes its tenant's.

`POST /v1/uploads` goes where the caller's files go (`files_upstream`) and the Upload id it answers is recorded
as the caller's tenant's, with that upstream (`stored_ids`, kind `upload`); its Parts, `complete` and `cancel` go
there for that tenant only (another tenant's id is the provider's 404, never forwarded), each Part's body streamed
as it arrives (`upload_body`). The `bytes` declared at creation count toward the key's `uploads` quota from the
create (`file_quota`: refused there, before anything is sent, like a Files upload), held under the Upload's own
name (`upload_hold`) until it is completed (then the File counts instead, recorded as the tenant's like a Files
upload), cancelled, or expires with the Upload (an hour); each Part's bytes come off that hold, and any past it
count on their own for the hour. Only OpenAI's SDK speaks it: another format's caller gets its own 404.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

from fastapi import APIRouter
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from prefixgate.dialects.validate import load_body
from prefixgate.errors import RequestError
from prefixgate.gateway.accounting import CLIENT_CLOSED
from prefixgate.gateway.auth import Caller, authenticate
from prefixgate.gateway.body_limits import FORM_ALLOWANCE
from prefixgate.gateway.endpoints_models import shape_of
from prefixgate.gateway.error_response import answer_or_error, error_response
from prefixgate.gateway.file_quota import FileQuota, file_size, upload_hold
from prefixgate.gateway.files_upstream import (
    UPLOAD_ANSWER_S,
    files_upstream,
    json_object,
    lifetime_s,
    send,
    upload_body,
)
from prefixgate.gateway.intake import authenticated_body
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.provider_ids import FILE
from prefixgate.gateway.proxy import Proxy
from prefixgate.gateway.upstream import UpstreamResponse
from prefixgate.model_ids import STORED_ID, path_model
from prefixgate.policies import Upstream
from prefixgate.providers.files import FILE_KINDS, MAX_PART_BYTES, OPENAI, PROVIDER_NAMES, upload_not_found

router = APIRouter()
UPLOAD = "upload"       # the stored_ids kind of an Upload id
JSON = {"content-type": "application/json"}
PART_FORM_BYTES = 1024      # a Part's multipart lines beside its data, at most (the openai SDK's are 182 bytes)


@router.post("/v1/uploads")
async def create(request: Request) -> Response:
    return await openai_only(request, _create)


@router.post("/v1/uploads/{upload_id}/parts")
async def part(upload_id: str, request: Request) -> Response:
    return await openai_only(request, partial(_part, upload_id=upload_id))


@router.post("/v1/uploads/{upload_id}/complete")
async def complete(upload_id: str, request: Request) -> Response:
    return await openai_only(request, partial(_complete, upload_id=upload_id))


@router.post("/v1/uploads/{upload_id}/cancel")
async def cancel(upload_id: str, request: Request) -> Response:
    return await openai_only(request, partial(_cancel, upload_id=upload_id))


async def openai_only(request: Request, work: Callable[[Request], Awaitable[Response]], api: str = "Uploads"
                      ) -> Response:
    """`work`'s answer to an OpenAI client; another format's caller gets its own 404 (OpenAI's `api` alone has it)."""
    dialect = shape_of(request)
    if dialect != OPENAI:
        return error_response(RequestError(f"{request.url.path}: no such method of this format's API (the {api} API "
                                           f"is {PROVIDER_NAMES[OPENAI]}'s)", status=404, kind="not_found"), dialect)
    try:
        return await answer_or_error(dialect, work(request))
    except ClientDisconnect:
        return Response(status_code=CLIENT_CLOSED)      # gone mid-upload: the upstream saw the body cut short


async def _create(request: Request) -> Response:
    proxy: Proxy = request.app.state.proxy
    raw, caller = await authenticated_body(proxy, request)
    upstream = files_upstream(proxy, caller, OPENAI)
    size = load_body(raw).get("bytes")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise RequestError(f"bytes: the file's size, a whole number of bytes, got {size!r}", field="bytes")
    quota: FileQuota = request.app.state.file_quota
    owner = principal(caller.key)
    hold = await quota.reserve(owner, caller.key.uploads if caller.key else None, size)
    try:
        resp = await send(proxy, request, caller, OPENAI, upstream, "POST", "/uploads", "", raw, JSON)
        made = json_object(resp.body)
        if isinstance(made.get("id"), str):
            ttl = lifetime_s(made, proxy.clock())     # the Upload's hour
            proxy.stored_ids.record(UPLOAD, made["id"], owner, ttl, home=upstream.name)
            await quota.add(owner, upload_hold(made["id"]), size, ttl)
    finally:
        await quota.release(owner, hold)
    return _relayed(resp)


async def _part(request: Request, upload_id: str) -> Response:
    proxy: Proxy = request.app.state.proxy
    caller, upstream, segment = await _owned(request, upload_id)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_PART_BYTES + FORM_ALLOWANCE:      # refused before a byte is read
        raise RequestError(f"a Part of {declared} bytes is over {PROVIDER_NAMES[OPENAI]}'s {MAX_PART_BYTES} bytes per "
                           "Part", field="data", status=413, kind="too_large")
    body = await upload_body(request, proxy.body_limits, OPENAI, proxy.settings.client_timeout_s)
    quota: FileQuota = request.app.state.file_quota
    owner, declared_hold = principal(caller.key), upload_hold(upload_id)
    # A Part's bytes are the Upload's declared ones, taken off its hold; any past them (more than declared, a
    # Part sent again) lie in the provider's storage all the same, so they count on their own until the Upload's
    # hour is out, and are refused past the quota like an upload.
    data = max(0, body.length - PART_FORM_BYTES)
    taken, beyond = -await quota.adjust(owner, declared_hold, -data), None
    try:
        if data > taken:
            beyond = await quota.reserve(owner, caller.key.uploads if caller.key else None, data - taken)
        resp = await send(proxy, request, caller, OPENAI, upstream, "POST", f"/uploads/{segment}/parts", "", body,
                          {"content-type": request.headers.get("content-type", "")}, UPLOAD_ANSWER_S)
    except BaseException:
        await quota.adjust(owner, declared_hold, taken)     # refused or failed: nothing was added
        await quota.release(owner, beyond)
        raise
    return _relayed(resp)


async def _complete(request: Request, upload_id: str) -> Response:
    proxy: Proxy = request.app.state.proxy
    caller, upstream, segment = await _owned(request, upload_id)
    raw, _ = await authenticated_body(proxy, request)
    resp = await send(proxy, request, caller, OPENAI, upstream, "POST", f"/uploads/{segment}/complete", "", raw, JSON,
                      UPLOAD_ANSWER_S)
    made = json_object(resp.body).get("file")
    if isinstance(made, dict) and isinstance(made.get("id"), str):
        quota: FileQuota = request.app.state.file_quota
        owner = principal(caller.key)
        ttl = lifetime_s(made, proxy.clock())         # the File's own `expires_at`, not the Upload's
        proxy.stored_ids.record(FILE, made["id"], owner, ttl, home=upstream.name)
        await quota.add(owner, made["id"], file_size(made), ttl)
        await quota.remove(owner, upload_hold(upload_id))
    return _relayed(resp)


async def _cancel(request: Request, upload_id: str) -> Response:
    proxy: Proxy = request.app.state.proxy
    caller, upstream, segment = await _owned(request, upload_id)
    resp = await send(proxy, request, caller, OPENAI, upstream, "POST", f"/uploads/{segment}/cancel", "", b"")
    if json_object(resp.body).get("status") == "cancelled":     # its bytes are free again
        await request.app.state.file_quota.remove(principal(caller.key), upload_hold(upload_id))
    return _relayed(resp)


async def _owned(request: Request, upload_id: str) -> tuple[Caller, Upstream, str]:
    """(caller, the upstream holding the Upload, its id as a path segment) for the tenant that created it; any other
    Upload id is the provider's 404."""
    proxy: Proxy = request.app.state.proxy
    caller = authenticate(request.headers, request.query_params, proxy.keys)
    segment = path_model(upload_id, STORED_ID, field="upload_id")
    if not await proxy.stored_ids.allows(UPLOAD, upload_id, principal(caller.key)):
        raise upload_not_found(upload_id)
    home = proxy.policy.upstreams.get(await proxy.stored_ids.find_home(UPLOAD, upload_id) or "")
    if home is None or home.kind not in FILE_KINDS[OPENAI]:
        home = files_upstream(proxy, caller, OPENAI)
    return caller, home, segment


def _relayed(resp: UpstreamResponse) -> Response:
    return Response(resp.body, resp.status, resp.headers, media_type="application/json")
