"""`/v1/containers`: OpenAI's Containers API (where a code interpreter runs, and the files it wrote: an answer's
`container_file_citation`s are downloaded here), each container its tenant's.

A container is the tenant's when the gateway saw it made for that tenant: a `code_interpreter_call`'s
`container_id` in its answer (`accounting.created`) or `POST /v1/containers` through the gateway (recorded with
the account that made it, `stored_ids` kind `container`). Every other id, another tenant's or one that never
existed, is the same 404 OpenAI answers an unknown container (`container_not_found`), never forwarded, so the
answer tells nothing of whether it exists; a container the operator granted a key (`provider_ids`) is readable
by that key. The list is the caller's tenant's containers across the key's OpenAI accounts, paged as
`GET /v1/files` is (`files_list`). A create naming Files (`file_ids`) or skills takes only the tenant's own.
A file added to a container (multipart, or `file_id` JSON copying one of the tenant's Files in), or copied in by
its create's `file_ids`, is held to the upload limits and the key's `uploads` quota as a `/v1/files` upload is,
and counts until it or its container is deleted through the gateway or the container's default idle lifetime
has passed (`CONTAINER_IDLE_S`: a container kept busy longer keeps its files longer than they count). Downloads
are streamed. Only OpenAI's SDK speaks it: another format's caller gets its own 404.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from urllib.parse import urlencode

from fastapi import APIRouter
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from prefixgate.dialects.validate import load_body
from prefixgate.errors import RequestError
from prefixgate.gateway import files_list
from prefixgate.gateway.auth import Caller, authenticate
from prefixgate.gateway.endpoints_uploads import openai_only
from prefixgate.gateway.file_quota import FileQuota, file_size
from prefixgate.gateway.files_list import MAX_LIST_PAGES
from prefixgate.gateway.files_upstream import (
    UPLOAD_ANSWER_S,
    file_home,
    files_upstream,
    json_object,
    may_touch,
    send,
    upload_body,
)
from prefixgate.gateway.intake import authenticated_body
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.provider_ids import CONTAINER, FILE, Named, body_ids, check_owned
from prefixgate.gateway.proxy import Proxy
from prefixgate.gateway.upstream import BodyStream, UpstreamFailure, UpstreamResponse
from prefixgate.model_ids import STORED_ID, path_model
from prefixgate.policies import Upstream
from prefixgate.providers.files import (
    CONTAINER_FILES_QUERY,
    CONTAINER_IDLE_S,
    CONTAINER_LIST_QUERY,
    OPENAI,
    container_not_found,
)

router = APIRouter()
JSON = {"content-type": "application/json"}
BOUNDARY = re.compile(r'boundary="?([^";]+)"?', re.IGNORECASE)
FIELD_NAME = re.compile(rb'\bname\*?=\s*"?([^";\r\n]*)', re.IGNORECASE)     # a form part's name (any spelling of it)
PART_HEAD = 1024    # a form part's headers, at most (the openai SDK's are under 200 bytes)


@router.post("/v1/containers")
async def create(request: Request) -> Response:
    return await _openai_only(request, _create)


@router.get("/v1/containers")
async def listed(request: Request) -> Response:
    return await _openai_only(request, partial(files_list.listed, dialect=OPENAI, kind=CONTAINER, tail="/containers",
                                               names=CONTAINER_LIST_QUERY))


@router.get("/v1/containers/{container_id}")
async def retrieve(container_id: str, request: Request) -> Response:
    return await _openai_only(request, partial(_owned, container_id=container_id, method="GET"))


@router.delete("/v1/containers/{container_id}")
async def delete(container_id: str, request: Request) -> Response:
    return await _openai_only(request, partial(_owned, container_id=container_id, method="DELETE"))


@router.post("/v1/containers/{container_id}/files")
async def add_file(container_id: str, request: Request) -> Response:
    return await _openai_only(request, partial(_add_file, container_id=container_id))


@router.get("/v1/containers/{container_id}/files")
async def files(container_id: str, request: Request) -> Response:
    return await _openai_only(request, partial(_owned, container_id=container_id, method="GET", file_id="",
                                               names=CONTAINER_FILES_QUERY))


@router.get("/v1/containers/{container_id}/files/{file_id}")
async def file(container_id: str, file_id: str, request: Request) -> Response:
    return await _openai_only(request, partial(_owned, container_id=container_id, method="GET", file_id=file_id))


@router.get("/v1/containers/{container_id}/files/{file_id}/content")
async def content(container_id: str, file_id: str, request: Request) -> Response:
    return await _openai_only(request, partial(_owned, container_id=container_id, method="GET", file_id=file_id,
                                               download=True))


@router.delete("/v1/containers/{container_id}/files/{file_id}")
async def delete_file(container_id: str, file_id: str, request: Request) -> Response:
    return await _openai_only(request, partial(_owned, container_id=container_id, method="DELETE", file_id=file_id))


def _openai_only(request: Request, work: Callable[[Request], Awaitable[Response]]) -> Awaitable[Response]:
    return openai_only(request, work, "Containers")


async def _create(request: Request) -> Response:
    proxy: Proxy = request.app.state.proxy
    raw, caller = await authenticated_body(proxy, request)
    upstream = files_upstream(proxy, caller, OPENAI)
    body, owner = load_body(raw), principal(caller.key)
    listed = body.get("file_ids") if isinstance(body.get("file_ids"), list) else []
    ids = [i for i in listed if isinstance(i, str)]
    await _own_named(proxy, caller, [*(Named(FILE, i, "file_ids") for i in ids), *body_ids(body)])
    # Files copied in count as a file added is (`_add_file`): held while the container is made, then each counted.
    quota: FileQuota = request.app.state.file_quota
    size = sum([await quota.size_of(owner, i) or 0 for i in ids])
    hold = await quota.reserve(owner, caller.key.uploads if caller.key else None, size) if ids else None
    try:
        resp = await send(proxy, request, caller, OPENAI, upstream, "POST", "/containers", "", raw, JSON)
        made = json_object(resp.body)
        if isinstance(made.get("id"), str):
            proxy.stored_ids.record(CONTAINER, made["id"], owner, home=upstream.name)
            for copied in await _files_in(request, caller, upstream, f"/containers/{made['id']}") if ids and owner else ():
                await quota.add(owner, copied["id"], file_size(copied), CONTAINER_IDLE_S)
    finally:
        await quota.release(owner, hold)
    return _relayed(resp)


async def _owned(request: Request, container_id: str, method: str, file_id: str | None = None,
                 names: frozenset[str] = frozenset(), download: bool = False) -> Response:
    """A call about the tenant's container (`file_id` None), its files' list (""), or one of its files."""
    proxy: Proxy = request.app.state.proxy
    caller, upstream, tail = await _container(request, container_id, method)
    if file_id:
        tail += f"/files/{path_model(file_id, STORED_ID, field='file_id')}" + ("/content" if download else "")
    elif file_id is not None:
        tail += "/files"
    owner = principal(caller.key)
    # A container's files go with it: their shares are freed with theirs (listed first, while it still holds them).
    held = await _files_in(request, caller, upstream, tail) if method == "DELETE" and file_id is None and owner else []
    query = urlencode([(k, v) for k, v in request.query_params.multi_items() if k in names])
    resp = await send(proxy, request, caller, OPENAI, upstream, method, tail, query, b"", stream=download)
    if method == "DELETE" and 200 <= resp.status < 300:
        for gone in [file_id] if file_id else [f["id"] for f in held]:
            await request.app.state.file_quota.remove(owner, gone)     # its share is free again
        if not file_id:
            await proxy.stored_ids.forget(CONTAINER, container_id)
    if download and resp.chunks is not None:
        return StreamingResponse(resp.chunks, resp.status, resp.headers, media_type="application/octet-stream",
                                 background=BackgroundTask(resp.close))
    return _relayed(resp)


async def _files_in(request: Request, caller: Caller, upstream: Upstream, tail: str) -> list[dict]:
    """The files in the container at `tail`, each with its `id` (as many pages as `MAX_LIST_PAGES`; what a failed call
    leaves out is not counted, or counts until the container's idle lifetime has passed)."""
    proxy: Proxy = request.app.state.proxy
    files: list[dict] = []
    for _ in range(MAX_LIST_PAGES):
        query = [("limit", "100"), *([("after", files[-1]["id"])] if files else [])]
        try:
            resp = await send(proxy, request, caller, OPENAI, upstream, "GET", tail + "/files", urlencode(query), b"")
        except UpstreamFailure:
            break
        page = json_object(resp.body)
        found = [f for f in page.get("data") or () if isinstance(f, dict) and isinstance(f.get("id"), str)]
        files += found
        if not found or not page.get("has_more"):
            break
    return files


async def _add_file(request: Request, container_id: str) -> Response:
    proxy: Proxy = request.app.state.proxy
    caller, upstream, tail = await _container(request, container_id, "POST")
    quota: FileQuota = request.app.state.file_quota
    owner = principal(caller.key)
    body, headers, size = await _file_body(request, proxy, caller, quota)
    hold = await quota.reserve(owner, caller.key.uploads if caller.key else None, size)
    try:
        resp = await send(proxy, request, caller, OPENAI, upstream, "POST", tail + "/files", "", body, headers,
                          UPLOAD_ANSWER_S)
        made = json_object(resp.body)
        if isinstance(made.get("id"), str):
            await quota.add(owner, made["id"], file_size(made), CONTAINER_IDLE_S)
    finally:
        await quota.release(owner, hold)
    return _relayed(resp)


async def _file_body(request: Request, proxy: Proxy, caller: Caller, quota: FileQuota
                     ) -> tuple[bytes | BodyStream, dict[str, str], int]:
    """(body, its headers, the bytes it adds) of a file added to a container: a multipart upload streamed within the
    upload limit, or JSON copying in a File, which must be the tenant's (its size as counted, if it is)."""
    kind = request.headers.get("content-type", "")
    if kind.startswith("multipart/form-data"):
        body = await upload_body(request, proxy.body_limits, OPENAI, proxy.settings.client_timeout_s)
        boundary = BOUNDARY.search(kind)
        if boundary is not None:
            body = BodyStream(_file_alone(body.chunks, b"--" + boundary.group(1).encode("latin-1")), body.length)
        return body, {"content-type": kind}, body.length
    raw, _ = await authenticated_body(proxy, request)
    copied = load_body(raw).get("file_id")
    if not isinstance(copied, str) or not copied:
        raise RequestError("file_id: the id of a File to copy into the container, or a multipart `file`",
                           field="file_id")
    await _own_named(proxy, caller, [Named(FILE, copied, "file_id")])
    return raw, JSON, await quota.size_of(principal(caller.key), copied) or 0


async def _file_alone(chunks: AsyncIterator[bytes], delimiter: bytes) -> AsyncIterator[bytes]:
    """A multipart form's `chunks` as they arrive, refused (a 400, the upload cut short) at a part not named `file`:
    OpenAI reads `file_id` from a form too, and a File copied in that way would be nobody's to check (JSON's is)."""
    window, closed = b"", False
    async for chunk in chunks:
        window, start = window + chunk, 0
        while not closed and (at := window.find(delimiter, start)) >= 0:
            head = window[at + len(delimiter):at + len(delimiter) + PART_HEAD]
            closed = head.startswith(b"--")     # the form's end
            end = head.find(b"\r\n\r\n")
            if closed or end < 0 and len(head) < PART_HEAD:
                break       # its end, or a part's head still arriving (looked at again with the next chunk)
            if end < 0 or {name.lower() for name in FIELD_NAME.findall(head[:end])} != {b"file"}:
                raise RequestError("a multipart body carries one `file`; a File is copied into a container by JSON "
                                   '{"file_id": ...}', field="file_id")
            start = at + len(delimiter) + end
        window = window[at:] if not closed and at >= 0 else window[-len(delimiter):]
        yield chunk


async def _own_named(proxy: Proxy, caller: Caller, named: list[Named]) -> None:
    """Files copied into a container and skills it loads: the tenant's own (or granted), as in a model request."""
    owner = principal(caller.key)
    if caller.key is not None and owner is not None:     # an open gateway: one party, nothing checked
        await check_owned(proxy.stored_ids, owner, named, caller.key.provider_ids)


async def _container(request: Request, container_id: str, method: str) -> tuple[Caller, Upstream, str]:
    """(caller, the account holding the container, its path) for the tenant whose container it is; any other id
    is OpenAI's 404 for an unknown container."""
    proxy: Proxy = request.app.state.proxy
    caller = authenticate(request.headers, request.query_params, proxy.keys)
    segment = path_model(container_id, STORED_ID, field="container_id")
    if not await may_touch(proxy, caller, container_id, method, CONTAINER):
        raise container_not_found(container_id)
    return caller, await file_home(proxy, caller, OPENAI, container_id, CONTAINER), f"/containers/{segment}"


def _relayed(resp: UpstreamResponse) -> Response:
    return Response(resp.body, resp.status, resp.headers, media_type="application/json")
