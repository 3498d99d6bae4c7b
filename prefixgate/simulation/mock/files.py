"""Mock Files APIs at `/v1/files`: OpenAI's and Anthropic's (told apart by the caller's auth headers, as
`/v1/models` is), each file its account's: another account's id is the provider's 404.

Shapes are the SDKs' (openai 3.57 `FileObject`, `FileDeleted`; anthropic 2.14 `BetaFileMetadata`,
`BetaDeletedFile`, its list's `next_page` cursor beside the documented `first_id`/`last_id`/`has_more`).
Anthropic refuses every call without the `files-api-2025-04-14` beta, and serves `/content` only for
`downloadable` files (those a tool wrote; an upload never is). A model request naming a file reads its bytes as
text (`inlined`), so usage counts them; one naming a file the account does not hold is a 404.
"""

from __future__ import annotations

import base64
import mimetypes
import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import UploadFile
from starlette.requests import ClientDisconnect

from prefixgate.errors import RequestError
from prefixgate.providers.files import (
    ANTHROPIC,
    ANTHROPIC_FILES_BETA,
    GEMINI,
    GEMINI_FILE_URIS,
    MAX_FILE_BYTES,
    OPENAI,
    file_not_found,
)
from prefixgate.simulation.mock.google_pages import page_of

OPENAI_PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
OPENAI_BATCH_LIFETIME_S = 30 * 86400        # "files with purpose=batch expire after 30 days" by default
_ALNUM = string.ascii_letters + string.digits
FORM_OVERHEAD = 64 * 1024     # a multipart body's own parts (purpose, headers) beside the file's bytes


@dataclass
class StoredFile:
    meta: dict
    content: bytes
    expires: float | None       # epoch seconds; None: until deleted


class Files:
    """Every account's files, oldest first."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._files: dict[tuple[str, str], dict[str, StoredFile]] = {}     # (provider, account) -> id -> file

    def now(self) -> float:
        return self._clock()

    def add(self, provider: str, account: str, stored: StoredFile) -> dict:
        ident = stored.meta.get("id") or stored.meta["name"]        # Gemini's File has a name (`files/x`), no id
        self._files.setdefault((provider, account), {})[ident] = stored
        return stored.meta

    def written(self, account: str, filename: str, content: bytes) -> str:
        """A file a tool wrote in an Anthropic workspace (downloadable, unlike an upload); its id."""
        now = self._clock()
        meta = {"id": "file_011" + "".join(secrets.choice(_ALNUM) for _ in range(21)), "type": "file",
                "filename": filename, "mime_type": mimetypes.guess_type(filename)[0] or "application/octet-stream",
                "size_bytes": len(content), "created_at": rfc3339(now), "downloadable": True, "expires_at": None}
        return self.add(ANTHROPIC, account, StoredFile(meta, content, None))["id"]

    def of(self, provider: str, account: str) -> list[StoredFile]:
        now = self._clock()
        return [f for f in self._files.get((provider, account), {}).values() if f.expires is None or f.expires > now]

    def get(self, provider: str, account: str, file_id: str) -> StoredFile:
        if provider == GEMINI:      # named `files/x`, `x` or by its uri
            file_id = "files/" + file_id.rpartition("files/")[2]
        found = self._files.get((provider, account), {}).get(file_id)
        if found is None or (found.expires is not None and found.expires <= self._clock()):
            raise file_not_found(provider, file_id)
        return found

    def delete(self, provider: str, account: str, file_id: str) -> None:
        found = self.get(provider, account, file_id)
        del self._files[(provider, account)][found.meta.get("id") or found.meta["name"]]

    def inlined(self, provider: str, account: str, body: dict) -> dict:
        """`body` with each file a model request names replaced by its content as text (`body` itself when it
        names none): Anthropic's `{"type": "file"}` document sources, Chat Completions `file` parts, Responses
        `input_file` parts (an image's file is checked, not read)."""
        changed = False

        def walk(node: Any) -> Any:
            nonlocal changed
            if isinstance(node, list):
                return [walk(n) for n in node]
            if not isinstance(node, dict):
                return node
            source = node.get("source")
            if provider == ANTHROPIC and isinstance(source, dict) and source.get("type") == "file":
                text = self._text(provider, account, source.get("file_id"))
                changed = True
                if node.get("type") == "document":
                    return {**node, "source": {"type": "text", "media_type": "text/plain", "data": text}}
                return node     # an image: its bytes are no text to count
            if provider == ANTHROPIC and node.get("type") == "container_upload":
                self._text(provider, account, node.get("file_id"))     # the account must hold it
            file_part = node.get("file") if node.get("type") == "file" else None
            if provider == OPENAI and isinstance(file_part, dict) and "file_id" in file_part:
                changed = True
                return {"type": "text", "text": self._text(provider, account, file_part["file_id"])}
            data = node.get("fileData", node.get("file_data"))
            uri = data.get("fileUri", data.get("file_uri")) if isinstance(data, dict) else None
            if provider == GEMINI and isinstance(uri, str) and uri.startswith(("files/", *GEMINI_FILE_URIS)):
                changed = True
                return {"text": self._text(provider, account, uri)}
            if provider == OPENAI and node.get("type") in ("input_file", "input_image") and "file_id" in node:
                text = self._text(provider, account, node["file_id"])
                changed = True
                return {"type": "input_text", "text": text} if node["type"] == "input_file" else node
            return {k: walk(v) for k, v in node.items()}

        out = walk(body)
        return out if changed else body

    def _text(self, provider: str, account: str, file_id: object) -> str:
        return self.get(provider, account, str(file_id)).content.decode("utf-8", errors="replace")


def add_routes(app: FastAPI, files: Files, account_of: Callable[[Request], tuple[str, str]]) -> None:
    """The `/v1/files` paths; `account_of(request)` is (provider, account) after the provider's own auth checks."""

    @app.post("/v1/files")
    async def upload(request: Request) -> Response:
        try:
            provider, account = account_of(request)
            declared = request.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_FILE_BYTES[provider] + FORM_OVERHEAD:
                raise RequestError(f"File is too large: the request is {declared} bytes; the limit is "
                                   f"{MAX_FILE_BYTES[provider]} bytes", field="file", status=413, kind="too_large")
        except RequestError:
            # Answered before the body is read: the providers' front ends then close the connection.
            request.state.answered_early = True
            raise
        try:
            form = await request.form()
        except ClientDisconnect:        # the sender gave up mid-body: no file
            return Response(status_code=400)
        file = form.get("file")
        if not isinstance(file, UploadFile):
            raise RequestError("Missing required parameter: 'file'.", field="file")
        content = await file.read()
        if len(content) > MAX_FILE_BYTES[provider]:
            raise RequestError(f"File is too large: {len(content)} bytes; the limit is {MAX_FILE_BYTES[provider]} bytes",
                               field="file", status=413, kind="too_large")
        now = files.now()
        if provider == ANTHROPIC:
            stored = _anthropic_file(file, content, form.get("expires_in_seconds"), now)
        else:
            stored = _openai_file(file, content, form.get("purpose"), form.get("expires_after[seconds]"), now)
        return JSONResponse(files.add(provider, account, stored))

    @app.get("/v1/files")
    @app.get("/v1beta/files")
    async def listed(request: Request) -> dict:
        provider, account = account_of(request)
        stored = [f.meta for f in files.of(provider, account)]
        if provider == ANTHROPIC:
            return _anthropic_page(stored[::-1], request.query_params)      # newest first
        if provider == GEMINI:
            return _gemini_page(stored, request.query_params)
        return _openai_page(stored, request.query_params)

    @app.get("/v1/files/{file_id}")
    @app.get("/v1beta/files/{file_id}")
    async def retrieve(file_id: str, request: Request) -> dict:
        return files.get(*account_of(request), file_id).meta

    @app.get("/v1/files/{file_id}/content")
    async def content(file_id: str, request: Request) -> Response:
        provider, account = account_of(request)
        if provider == GEMINI:      # an uploaded file is read by the model only
            raise RequestError(f"{request.url.path}: no such method", status=404, kind="not_found")
        stored = files.get(provider, account, file_id)
        if provider == ANTHROPIC and not stored.meta["downloadable"]:
            return JSONResponse({"type": "error", "error": {
                "type": "invalid_request_error", "details": {"error_code": "file_not_downloadable"},
                "message": "Only files created by a tool, such as the code execution tool, can be downloaded."}},
                status_code=400)
        return Response(stored.content, media_type="application/octet-stream")

    @app.delete("/v1/files/{file_id}")
    @app.delete("/v1beta/files/{file_id}")
    async def delete(file_id: str, request: Request) -> dict:
        provider, account = account_of(request)
        files.delete(provider, account, file_id)
        if provider == ANTHROPIC:
            return {"id": file_id, "type": "file_deleted"}
        if provider == GEMINI:
            return {}
        return {"id": file_id, "object": "file", "deleted": True}


def require_beta(betas: str) -> None:
    """Anthropic's Files API, and a Messages request naming a file, take its beta header."""
    if ANTHROPIC_FILES_BETA not in (b.strip() for b in betas.split(",")):
        raise RequestError(f"the Files API is in beta: send the header `anthropic-beta: {ANTHROPIC_FILES_BETA}`",
                           field="anthropic-beta")


def names_a_file(body: dict) -> bool:
    """Whether a Messages body names an uploaded file (a `{"type": "file"}` source or a `container_upload`)."""
    pending: list[Any] = [body.get("messages"), body.get("system")]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
        elif isinstance(node, dict):
            source = node.get("source")
            if (isinstance(source, dict) and source.get("type") == "file") or node.get("type") == "container_upload":
                return True
            pending.extend(v for v in node.values() if isinstance(v, (dict, list)))
    return False


def _openai_file(file: UploadFile, content: bytes, purpose: object, seconds: object, now: float) -> StoredFile:
    check_purpose(purpose)
    return openai_file(file.filename or "file", content, str(purpose), seconds, now)


def check_purpose(purpose: object) -> None:
    """An OpenAI File's (or Upload's) `purpose`: given, and one the API takes."""
    if purpose is None:
        raise RequestError("Missing required parameter: 'purpose'.", field="purpose")
    if purpose not in OPENAI_PURPOSES:
        raise RequestError(f"'{purpose}' is not one of {list(OPENAI_PURPOSES)} - 'purpose'", field="purpose")


def openai_file(filename: str, content: bytes, purpose: str, seconds: object, now: float) -> StoredFile:
    """An OpenAI File made now, living `seconds` (its `expires_after`) or its purpose's default."""
    lifetime = OPENAI_BATCH_LIFETIME_S if purpose == "batch" else None
    if seconds is not None:
        lifetime = _seconds(seconds, 3600, 2592000, "expires_after.seconds")
    created = int(now)
    expires = created + lifetime if lifetime is not None else None
    meta = {"id": "file-" + "".join(secrets.choice(_ALNUM) for _ in range(22)), "object": "file",
            "bytes": len(content), "created_at": created, "filename": filename, "purpose": purpose,
            "status": "processed", "expires_at": expires, "status_details": None}
    return StoredFile(meta, content, expires)


def _anthropic_file(file: UploadFile, content: bytes, seconds: object, now: float) -> StoredFile:
    mime = (file.content_type or "").split(";")[0].strip() or mimetypes.guess_type(file.filename or "")[0] \
        or "application/octet-stream"
    name = (file.filename or "").replace("\\", "/").rsplit("/", 1)[-1] or "unnamed" + (mimetypes.guess_extension(mime) or "")
    expires = now + _seconds(seconds, 3600, 7776000, "expires_in_seconds") if seconds is not None else None
    meta = {"id": "file_011" + "".join(secrets.choice(_ALNUM) for _ in range(21)), "type": "file", "filename": name,
            "mime_type": mime, "size_bytes": len(content), "created_at": rfc3339(now), "downloadable": False,
            "expires_at": rfc3339(expires) if expires is not None else None}
    return StoredFile(meta, content, expires)


def _seconds(value: object, low: int, high: int, field: str) -> int:
    try:
        seconds = int(str(value))
    except ValueError:
        raise RequestError(f"{field}: expected an integer, got {value!r}", field=field) from None
    if not low <= seconds <= high:
        raise RequestError(f"{field}: must be between {low} and {high}, got {seconds}", field=field)
    return seconds


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def _limit(query: Any, default: int, high: int) -> int:
    raw = query.get("limit")
    return default if raw is None else _seconds(raw, 1, high, "limit")


def _after(items: list[dict], cursor: str | None) -> list[dict]:
    """The items after the one whose id is `cursor` (none when it is not among them)."""
    if cursor is None:
        return items
    at = next((i for i, f in enumerate(items) if f["id"] == cursor), None)
    return [] if at is None else items[at + 1:]


def _page_cursor(page: str) -> str:
    """The id a `next_page` token this mock issued continues after."""
    try:
        return base64.urlsafe_b64decode(page.removeprefix("page_").encode()).decode()
    except ValueError:
        raise RequestError(f"page: {page[:100]!r} is not a page cursor this API issued", field="page") from None


def _openai_page(items: list[dict], query: Any) -> dict:
    if query.get("purpose"):
        items = [f for f in items if f["purpose"] == query["purpose"]]
    if query.get("order", "desc") == "desc":
        items = items[::-1]
    rest = _after(items, query.get("after"))
    page = rest[:_limit(query, 10000, 10000)]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": len(rest) > len(page)}


def _gemini_page(items: list[dict], query: Any) -> dict:
    """`{"files": [...], "nextPageToken": ...}`: `pageSize` 10 when unset, at most 100 (more is taken as 100)."""
    def place(f: dict) -> tuple[float, str]:
        return datetime.fromisoformat(f["createTime"]).timestamp(), f["name"]

    page, token = page_of(sorted(items, key=place), query, place, 10, 100)
    return {"files": page, **({"nextPageToken": token} if token else {})}


def _anthropic_page(items: list[dict], query: Any) -> dict:
    ids = query.getlist("ids") + query.getlist("ids[]")
    if ids:
        page = [f for f in items if f["id"] in ids]
        return {"data": page, "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None, "has_more": False, "next_page": None}
    limit = _limit(query, 20, 1000)
    if query.get("before_id"):
        before = _after(items[::-1], query["before_id"])[::-1]
        page, more = before[-limit:], len(before) > limit
    else:
        cursor = query.get("after_id")
        if query.get("page"):
            cursor = _page_cursor(query["page"])
        rest = _after(items, cursor)
        page, more = rest[:limit], len(rest) > limit
    next_page = "page_" + base64.urlsafe_b64encode(page[-1]["id"].encode()).decode() if more and page else None
    return {"data": page, "first_id": page[0]["id"] if page else None, "last_id": page[-1]["id"] if page else None,
            "has_more": more, "next_page": next_page}
