"""OpenAI's Uploads API (`POST /v1/uploads`, `/v1/uploads/{id}/parts`, `/complete`, `/cancel`), as the openai SDK's
`uploads.create`, `uploads.parts.create`, `uploads.complete`, `uploads.cancel` and `upload_file_chunked` drive it.

As documented (platform.openai.com/docs/api-reference/uploads; the limits in `providers.files`): an Upload takes
`bytes`, `filename`, `mime_type` and `purpose` (a File's purposes) and answers `pending`; a Part is at most 64 MB,
Parts may be added in any order while the Upload is pending, and `complete` puts the ones its `part_ids` list in
that order, refusing when their bytes are not the `bytes` given at creation or (given) their `md5` is not the
content's; it answers the Upload `completed` with its `file`, an ordinary File of the account's (`files.Files`,
provider `openai`). `cancel` ends a pending Upload (`cancelled`); one not completed within the hour is `expired`.
An Upload id the account did not create is a 404.
"""

from __future__ import annotations

import hashlib
import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from starlette.datastructures import UploadFile

from prefixgate.dialects.validate import load_body
from prefixgate.errors import RequestError
from prefixgate.providers.files import (
    MAX_PART_BYTES,
    MAX_UPLOAD_BYTES,
    OPENAI,
    UPLOAD_LIFETIME_S,
    upload_not_found,
)
from prefixgate.simulation.mock.files import FORM_OVERHEAD, Files, check_purpose, openai_file

_ALNUM = string.ascii_letters + string.digits


@dataclass
class _Upload:
    account: str
    meta: dict          # the Upload object, `status` pending, completed or cancelled (expired is read off the clock)
    file_seconds: object        # the File's `expires_after.seconds`, if given
    parts: dict[str, bytes] = field(default_factory=dict)

    def status(self, now: float) -> str:
        pending = self.meta["status"] == "pending"
        return "expired" if pending and now >= self.meta["expires_at"] else self.meta["status"]


def add_routes(app: FastAPI, files: Files, account_of: Callable[[Request], str]) -> None:
    uploads: dict[str, _Upload] = {}

    def found(request: Request, upload_id: str, pending: bool = True) -> _Upload:
        upload = uploads.get(upload_id)
        if upload is None or upload.account != account_of(request):
            raise upload_not_found(upload_id)
        status = upload.status(files.now())
        if pending and status != "pending":
            raise RequestError(f"Upload {upload_id} is {status}: only a pending Upload takes Parts, or is completed "
                               "or cancelled", field="upload_id")
        return upload

    @app.post("/v1/uploads")
    async def create(request: Request) -> dict:
        account = account_of(request)
        body = load_body(await request.body())
        size = _required(body, "bytes")
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_UPLOAD_BYTES:
            raise RequestError(f"bytes: an Upload is a whole number of bytes, at most {MAX_UPLOAD_BYTES}, got {size!r}",
                               field="bytes")
        for name in ("filename", "mime_type"):
            if not isinstance(_required(body, name), str):
                raise RequestError(f"{name}: expected a string", field=name)
        check_purpose(_required(body, "purpose"))
        expires_after = body.get("expires_after")
        seconds = expires_after.get("seconds") if isinstance(expires_after, dict) else None
        now = int(files.now())
        meta = {"id": "upload_" + _token(24), "object": "upload", "bytes": size, "created_at": now,
                "filename": body["filename"], "purpose": body["purpose"], "status": "pending",
                "expires_at": now + UPLOAD_LIFETIME_S, "file": None}
        uploads[meta["id"]] = _Upload(account, meta, seconds)
        return meta

    @app.post("/v1/uploads/{upload_id}/parts")
    async def part(upload_id: str, request: Request) -> dict:
        try:
            upload = found(request, upload_id)
            declared = request.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_PART_BYTES + FORM_OVERHEAD:
                raise _too_large(int(declared))
        except RequestError:
            request.state.answered_early = True     # before the body is read: the front end closes the connection
            raise
        data = (await request.form()).get("data")
        if not isinstance(data, UploadFile):
            raise RequestError("Missing required parameter: 'data'.", field="data")
        content = await data.read()
        if len(content) > MAX_PART_BYTES:
            raise _too_large(len(content))
        if sum(map(len, upload.parts.values())) + len(content) > MAX_UPLOAD_BYTES:
            raise RequestError(f"an Upload takes at most {MAX_UPLOAD_BYTES} bytes in all", field="data")
        ident = "part_" + _token(24)
        upload.parts[ident] = content
        return {"id": ident, "object": "upload.part", "created_at": int(files.now()), "upload_id": upload_id}

    @app.post("/v1/uploads/{upload_id}/complete")
    async def complete(upload_id: str, request: Request) -> dict:
        upload = found(request, upload_id)
        body = load_body(await request.body())
        part_ids = _required(body, "part_ids")
        if not isinstance(part_ids, list) or len(set(map(str, part_ids))) != len(part_ids):
            raise RequestError("part_ids: expected a list of this Upload's Part ids, each once", field="part_ids")
        missing = [p for p in part_ids if p not in upload.parts]
        if missing:
            raise RequestError(f"part_ids: {missing[0]!r} is not a Part of Upload {upload_id}", field="part_ids")
        content = b"".join(upload.parts[p] for p in part_ids)
        if len(content) != upload.meta["bytes"]:
            raise RequestError(f"The Parts hold {len(content)} bytes, not the {upload.meta['bytes']} bytes the Upload "
                               "was created with", field="part_ids")
        md5 = body.get("md5")
        if md5 is not None and md5 != hashlib.md5(content, usedforsecurity=False).hexdigest():  # the API's own checksum
            raise RequestError("md5: the checksum does not match the uploaded bytes", field="md5")
        made = files.add(OPENAI, upload.account, openai_file(upload.meta["filename"], content, upload.meta["purpose"],
                                                             upload.file_seconds, files.now()))
        upload.parts.clear()
        upload.meta.update(status="completed", file=made)
        return upload.meta

    @app.post("/v1/uploads/{upload_id}/cancel")
    async def cancel(upload_id: str, request: Request) -> dict:
        upload = found(request, upload_id)
        upload.parts.clear()
        upload.meta["status"] = "cancelled"
        return upload.meta


def _required(body: dict, name: str) -> object:
    if body.get(name) is None:
        raise RequestError(f"Missing required parameter: '{name}'.", field=name)
    return body[name]


def _too_large(size: int) -> RequestError:
    return RequestError(f"Part is too large: {size} bytes; a Part is at most {MAX_PART_BYTES} bytes", field="data",
                        status=413, kind="too_large")


def _token(length: int) -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(length))
