"""Gemini's Files API through the gateway, each file its tenant's: the resumable upload (`POST /upload/{v}/files`),
`GET /{v}/files`, `GET` and `DELETE /{v}/files/{id}` (on `/v1/...` reached through `endpoints_files`, which tells
a Google client by its key header).

An upload starts with `X-Goog-Upload-Command: start`, which goes to the first Gemini upstream of the key's routes
with the gateway's key; the provider answers the URL to send the bytes to, and the caller gets the gateway's own
instead, its `upload_id` sealing (`sealed`) the provider's URL, the upstream and the caller's principal. The
chunks come without a key (the SDK sends them so: the upload URL is the capability, as at Google), each streamed
on to that URL, which must lie under the upstream's own URL (a sealed URL elsewhere is never followed). The last
chunk's answer, the File, is recorded as the starter's tenant's under every name a request may give it
(`files/{id}`, its uri) until it expires (48 hours). Another tenant's id is what Google answers an id its project
does not hold: 403 `You do not have permission to access the File ... or it may not exist.`
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode

from fastapi import APIRouter
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import gemini
from prefixgate.errors import RequestError
from prefixgate.gateway.accounting import CLIENT_CLOSED
from prefixgate.gateway.auth import Caller, authenticate, upstream_credential
from prefixgate.gateway.error_response import answer_or_error
from prefixgate.gateway.file_quota import file_size
from prefixgate.gateway.files_list import MAX_LIST_PAGES, listed_to, opened_at, sealed_at, uncursored
from prefixgate.gateway.files_upstream import (
    UPLOAD_ANSWER_S,
    file_home,
    files_upstream,
    files_upstreams,
    forget_if_gone,
    json_object,
    lifetime_s,
    may_touch,
    upload_body,
)
from prefixgate.gateway.intake import authenticated_body
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.provider_ids import FILE
from prefixgate.gateway.proxy import Proxy
from prefixgate.gateway.sealed import seal, unseal
from prefixgate.gateway.upstream import UpstreamFailure, UpstreamResponse
from prefixgate.model_ids import STORED_ID, path_model
from prefixgate.policies import Upstream
from prefixgate.providers.files import LIST_QUERY, file_not_found, gemini_names

router = APIRouter()
WIRE = gemini.WIRE
VERSIONS = ("v1", "v1beta")
GOOG_UPLOAD = "x-goog-upload-"      # the resumable protocol's headers


@router.post("/upload/{version}/files")
async def upload(version: str, request: Request) -> Response:
    try:
        if request.headers.get("x-goog-upload-command", "") == "start":
            return await answer_or_error(WIRE.name, _start(request, version))
        return await answer_or_error(WIRE.name, _chunk(request, version))
    except ClientDisconnect:
        return Response(status_code=CLIENT_CLOSED)


@router.get("/v1beta/files")
async def listed(request: Request) -> Response:
    return await answer_or_error(WIRE.name, list_files(request, version="v1beta"))


@router.get("/v1beta/files/{name}")
async def retrieve(name: str, request: Request) -> Response:
    return await answer_or_error(WIRE.name, owned(request, version="v1beta", method="GET", name=name))


@router.delete("/v1beta/files/{name}")
async def delete(name: str, request: Request) -> Response:
    return await answer_or_error(WIRE.name, owned(request, version="v1beta", method="DELETE", name=name))


async def _start(request: Request, version: str) -> Response:
    proxy: Proxy = request.app.state.proxy
    _version(version)
    raw, caller = await authenticated_body(proxy, request)      # the File's metadata: small JSON
    upstream = files_upstream(proxy, caller, WIRE.name)
    declared = request.headers.get(GOOG_UPLOAD + "header-content-length", "")
    if declared.isdigit():
        proxy.body_limits.check_upload(int(declared), WIRE.name)
    quota, owner = request.app.state.file_quota, principal(caller.key)
    # Held until the last chunk's answer (or HOLD_S, for an upload never finished).
    hold = await quota.reserve(owner, caller.key.uploads if caller.key else None,
                               int(declared) if declared.isdigit() else None)
    goog = {k: v for k, v in request.headers.items() if k.startswith(GOOG_UPLOAD)}
    try:
        resp = await proxy.upstream.forward(upstream, WIRE, "POST", f"/upload/{version}/files", "", raw,
                                            upstream_credential(upstream, caller, WIRE.name), caller_headers=goog)
    except BaseException:
        await quota.release(owner, hold)
        raise
    theirs = resp.headers.get(GOOG_UPLOAD + "url")
    if theirs is None:
        await quota.release(owner, hold)
        return Response(resp.body, resp.status, resp.headers, media_type="application/json")
    token = seal(proxy.secret, json.dumps([theirs, upstream.name, owner, hold]))
    # The SDK sends the chunks to this URL's path and query on its own base URL.
    mine = f"{str(request.base_url).rstrip('/')}/upload/{version}/files?upload_id={token}&upload_protocol=resumable"
    return Response(resp.body, resp.status, {**resp.headers, GOOG_UPLOAD + "url": mine}, media_type="application/json")


async def _chunk(request: Request, version: str) -> Response:
    proxy: Proxy = request.app.state.proxy
    _version(version)
    theirs, upstream, owner, hold = _session(proxy, request.query_params.get("upload_id", ""))
    offset = request.headers.get(GOOG_UPLOAD + "offset", "0")
    length = request.headers.get("content-length", "")
    if offset.isdigit() and length.isdigit():       # the whole file so far, not this chunk alone
        proxy.body_limits.check_upload(int(offset) + int(length), WIRE.name)
    body = await upload_body(request, proxy.body_limits, WIRE.name, proxy.settings.client_timeout_s)
    path, _, query = theirs[len(upstream.url.rstrip("/")):].partition("?")
    goog = {k: v for k, v in request.headers.items() if k.startswith(GOOG_UPLOAD)}
    # No caller key came (the upload URL is the capability): the gateway's own, if it has one, goes along.
    key = upstream_credential(upstream, Caller(None, None), WIRE.name)
    resp = await proxy.upstream.forward(upstream, WIRE, "POST", path, query, body, key, UPLOAD_ANSWER_S,
                                        caller_headers={**goog, "content-type": "application/octet-stream"})
    if resp.headers.get(GOOG_UPLOAD + "status") == "final":
        made = json_object(resp.body).get("file")
        if isinstance(made, dict) and isinstance(made.get("name"), str):
            ttl = lifetime_s(made, time.time())
            for name in {*gemini_names(made["name"]), str(made.get("uri") or made["name"])}:
                proxy.stored_ids.record(FILE, name, owner, ttl, home=upstream.name)
            await request.app.state.file_quota.add(owner, made["name"], file_size(made), ttl)
        await request.app.state.file_quota.release(owner, hold)
    return Response(resp.body, resp.status, resp.headers, media_type="application/json")


def _session(proxy: Proxy, upload_id: str) -> tuple[str, Upstream, str | None, str | None]:
    """(provider's upload URL, its upstream, the starter's principal, its quota hold) sealed in an `upload_id`
    this gateway issued (one sealed before holds has none)."""
    opened = unseal(proxy.secret, upload_id)
    try:
        theirs, name, owner, *held = json.loads(opened) if opened is not None else (None, None, None)
    except (ValueError, TypeError):
        theirs = name = owner = None
        held = []
    hold = held[0] if held and isinstance(held[0], str) else None
    upstream = proxy.policy.upstreams.get(name) if isinstance(name, str) else None
    if not isinstance(theirs, str) or upstream is None or not theirs.startswith(upstream.url.rstrip("/") + "/"):
        raise RequestError("upload_id: no upload this gateway started", field="upload_id", status=404,
                           kind="not_found")
    return theirs, upstream, owner, hold


async def list_files(request: Request, *, version: str) -> Response:
    """The caller's tenant's files in every Gemini account its routes reach, each in turn (`files_list`), pages
    of others' skipped, its `nextPageToken` sealed with the account it goes on in."""
    proxy: Proxy = request.app.state.proxy
    _version(version)
    caller = authenticate(request.headers, request.query_params, proxy.keys)
    accounts = files_upstreams(proxy, caller, WIRE.name)
    owner = principal(caller.key)
    asked = [(k, v) for k, v in request.query_params.multi_items() if k in LIST_QUERY[WIRE.name]]
    if owner is None and len(accounts) == 1:    # an open gateway: one party, the provider's page as it is
        resp = await _send(proxy, caller, accounts[0], "GET", f"/{version}/files", asked)
        return Response(resp.body, resp.status, resp.headers, media_type="application/json")
    at, query = 0, asked
    token = next((v for k, v in asked if k == "pageToken"), None)
    if token is not None:
        account, cursor = opened_at(proxy, token, "pageToken")
        at = next((i for i, a in enumerate(accounts) if a.name == account), 0)
        query = [*uncursored(asked), *cursor]
    kept: list[dict] = []
    for _ in range(MAX_LIST_PAGES):
        resp = await _send(proxy, caller, accounts[at], "GET", f"/{version}/files", query or [])
        page = json_object(resp.body)
        items = [f for f in page.get("files") or () if isinstance(f, dict)]
        kept += await listed_to(proxy, caller, items, lambda f: str(f.get("name", "")))
        token = page.get("nextPageToken")
        query = [*uncursored(query or []), ("pageToken", str(token))] if token else None
        if query is None and at + 1 < len(accounts):
            at, query = at + 1, uncursored(asked)       # this account is done: the next one's first page
        if kept or query is None:
            break
    page["files"] = kept
    page.pop("nextPageToken", None)
    if query is not None:
        page["nextPageToken"] = sealed_at(proxy, accounts[at], query)
    return Response(compact_bytes(page), resp.status, resp.headers, media_type="application/json")


async def owned(request: Request, *, version: str, method: str, name: str) -> Response:
    """A File's metadata or deletion, for its tenant only."""
    proxy: Proxy = request.app.state.proxy
    _version(version)
    caller = authenticate(request.headers, request.query_params, proxy.keys)
    segment = path_model(name, STORED_ID, field="name")
    if not await may_touch(proxy, caller, f"files/{name}", method):
        raise file_not_found(WIRE.name, name)
    upstream = await file_home(proxy, caller, WIRE.name, f"files/{name}")
    try:
        resp = await _send(proxy, caller, upstream, method, f"/{version}/files/{segment}", [])
    except UpstreamFailure as failure:
        await forget_if_gone(proxy, request.app.state.file_quota, caller, failure, upstream, gemini_names(name),
                             f"files/{name}")
        raise
    if method == "DELETE" and 200 <= resp.status < 300:
        for each in gemini_names(name):
            await proxy.stored_ids.forget(FILE, each)
        await request.app.state.file_quota.remove(principal(caller.key), f"files/{name}")
    return Response(resp.body, resp.status, resp.headers, media_type="application/json")


async def _send(proxy: Proxy, caller: Caller, upstream: Upstream, method: str, path: str,
                query: list[tuple[str, str]]) -> UpstreamResponse:
    return await proxy.upstream.forward(upstream, WIRE, method, path, urlencode(query), b"",
                                        upstream_credential(upstream, caller, WIRE.name))


def _version(version: str) -> None:
    if version not in VERSIONS:
        raise RequestError(f"/{version}/files: no such API version", status=404, kind="not_found")
