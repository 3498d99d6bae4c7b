"""The Gemini Files API's resumable upload (`POST /upload/{v}/files`), as the google-genai SDK drives it.

`X-Goog-Upload-Command: start` (with `X-Goog-Upload-Header-Content-Length` and `-Content-Type`, and the File's
`displayName` in the body) answers the URL to send the bytes to (`X-Goog-Upload-URL`, status `active`); each
chunk is a POST there with `X-Goog-Upload-Command: upload` and its `X-Goog-Upload-Offset`, the last one
`upload, finalize`, which answers `{"file": File}` with status `final`. The File lives 48 hours in the project's
files (`files.Files`, provider `gemini`); an upload id the project did not start is a 404.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from prefixgate.dialects.validate import expect, load_body
from prefixgate.errors import RequestError
from prefixgate.providers.files import GEMINI, GEMINI_FILE_LIFETIME_S, GEMINI_FILE_URIS, MAX_FILE_BYTES
from prefixgate.simulation.mock.files import Files, StoredFile, rfc3339

CHUNK_GRANULARITY = 8 * 1024 * 1024


@dataclass
class _Upload:
    account: str
    display_name: str | None
    mime_type: str
    size: int
    data: bytearray = field(default_factory=bytearray)


def add_routes(app: FastAPI, files: Files, account_of: Callable[[Request], str]) -> None:
    uploads: dict[str, _Upload] = {}

    @app.post("/upload/{version}/files")
    async def upload(version: str, request: Request) -> JSONResponse:
        command = request.headers.get("x-goog-upload-command", "")
        if command == "start":
            return await _start(request, version, account_of(request), uploads)
        # The upload URL is the capability: the SDK sends its chunks without the API key.
        upload_id = request.query_params.get("upload_id", "")
        pending = uploads.get(upload_id)
        if pending is None:
            raise RequestError(f"upload {upload_id!r} not found", status=404, kind="not_found")
        account = pending.account
        offset = _bytes(request, "x-goog-upload-offset")
        if offset != len(pending.data):
            raise RequestError(f"X-Goog-Upload-Offset {offset} is not the {len(pending.data)} bytes received so far")
        pending.data += await request.body()
        if "finalize" not in command:
            return JSONResponse({}, headers={"x-goog-upload-status": "active"})
        del uploads[upload_id]
        return JSONResponse({"file": files.add(GEMINI, account, _file(pending, files.now()))},
                            headers={"x-goog-upload-status": "final"})


async def _start(request: Request, version: str, account: str, uploads: dict[str, _Upload]) -> JSONResponse:
    size = _bytes(request, "x-goog-upload-header-content-length")
    if size > MAX_FILE_BYTES[GEMINI]:
        raise RequestError(f"file of {size} bytes is over the {MAX_FILE_BYTES[GEMINI]}-byte limit", status=413,
                           kind="too_large")
    body = await request.body()      # {"file": {"displayName": ...}}, or nothing
    meta = expect((load_body(body) if body else {}).get("file") or {}, dict, "file")
    upload_id = secrets.token_urlsafe(24)
    uploads[upload_id] = _Upload(account, meta.get("displayName") or meta.get("display_name"),
                                 request.headers.get("x-goog-upload-header-content-type")
                                 or meta.get("mimeType") or "application/octet-stream", size)
    url = f"{str(request.base_url).rstrip('/')}/upload/{version}/files?upload_id={upload_id}&upload_protocol=resumable"
    return JSONResponse({}, headers={"x-goog-upload-url": url, "x-goog-upload-status": "active",
                                     "x-goog-upload-chunk-granularity": str(CHUNK_GRANULARITY)})


def _bytes(request: Request, header: str) -> int:
    """A byte count or offset header (0 where absent); anything but digits is a 400."""
    value = request.headers.get(header, "") or "0"
    if not value.isdigit():
        raise RequestError(f"{header}: {value!r} is not a number of bytes")
    return int(value)


def _file(upload: _Upload, now: float) -> StoredFile:
    ident = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(12))
    content = bytes(upload.data)
    meta = {"name": f"files/{ident}", "mimeType": upload.mime_type, "sizeBytes": str(len(content)),
            "createTime": rfc3339(now), "updateTime": rfc3339(now),
            "expirationTime": rfc3339(now + GEMINI_FILE_LIFETIME_S),
            "sha256Hash": base64.b64encode(hashlib.sha256(content).hexdigest().encode()).decode(),
            "uri": GEMINI_FILE_URIS[0] + ident, "state": "ACTIVE", "source": "UPLOADED"}
    if upload.display_name:
        meta["displayName"] = upload.display_name
    return StoredFile(meta, content, now + GEMINI_FILE_LIFETIME_S)
