"""Mock OpenAI Containers API (platform.openai.com/docs/api-reference/containers), each container its
organisation's (`mock/containers.py` holds them):

- `POST /v1/containers` (`name` required; `expires_after` `{"anchor": "last_active_at", "minutes"}`; `file_ids`
  copied in; `memory_limit`), `GET /v1/containers` (`after`, `limit` 1-100 default 20, `order` default `desc`,
  `name`), `GET` and `DELETE /v1/containers/{id}` (`container.deleted`).
- `POST /v1/containers/{id}/files`: multipart `file`, or `file_id` (in the form or JSON) copying one of the
  organisation's Files in (`source: "user"`, at `/mnt/data/<name>`); `GET .../files` (paged as the containers are),
  `GET`/`DELETE .../files/{file_id}` (`container.file.deleted`), `GET .../files/{file_id}/content`.

Shapes are openai 3.57's (`ContainerCreateResponse`, `FileCreateResponse`, the list's `first_id`/`last_id`/
`has_more`).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.datastructures import UploadFile

from prefixgate.errors import RequestError
from prefixgate.providers.files import MAX_FILE_BYTES, OPENAI
from prefixgate.simulation.mock.openai import authenticate
from prefixgate.simulation.mock.server import MockContext, json_body

MEMORY_LIMITS = ("1g", "4g", "16g", "64g")


def add_routes(app: FastAPI, ctx: MockContext) -> None:
    boxes = ctx.containers

    @app.post("/v1/containers")
    async def create(request: Request) -> dict:
        tenant, body = authenticate(request), await json_body(request)
        _check_create(body)
        copied = [ctx.files.get(OPENAI, tenant, ident) for ident in body.get("file_ids") or ()]    # each held
        made = boxes.create(tenant, body, ctx.clock())
        for stored in copied:
            boxes.add_file(tenant, made["id"], stored.meta["filename"], stored.content, "user", ctx.clock())
        return made

    @app.get("/v1/containers")
    async def listed(request: Request) -> dict:
        held = boxes.of(authenticate(request), ctx.clock())
        name = request.query_params.get("name")
        return _page([c for c in held if name is None or c["name"] == name], request.query_params)

    @app.get("/v1/containers/{container_id}")
    async def retrieve(container_id: str, request: Request) -> dict:
        return boxes.get(authenticate(request), container_id, ctx.clock()).meta

    @app.delete("/v1/containers/{container_id}")
    async def delete(container_id: str, request: Request) -> dict:
        boxes.delete(authenticate(request), container_id, ctx.clock())
        return {"id": container_id, "object": "container.deleted", "deleted": True}

    @app.post("/v1/containers/{container_id}/files")
    async def add_file(container_id: str, request: Request) -> dict:
        tenant = authenticate(request)
        boxes.get(tenant, container_id, ctx.clock())
        # The API reference's body is a form (its SDK sends one whenever a `file` is given), or JSON: `file_id` is
        # read from either.
        multipart = request.headers.get("content-type", "").startswith("multipart/form-data")
        fields = dict(await request.form()) if multipart else await json_body(request)
        file, ident = fields.get("file"), fields.get("file_id")
        if isinstance(file, UploadFile):
            name, content = file.filename or "upload", await file.read()
        elif isinstance(ident, str):
            stored = ctx.files.get(OPENAI, tenant, ident)
            name, content = stored.meta["filename"], stored.content
        else:
            raise RequestError("Missing required parameter: 'file' or 'file_id'.", field="file_id")
        if len(content) > MAX_FILE_BYTES[OPENAI]:
            raise RequestError(f"File is too large: {len(content)} bytes; the limit is {MAX_FILE_BYTES[OPENAI]} bytes",
                               field="file", status=413, kind="too_large")
        return boxes.add_file(tenant, container_id, name, content, "user", ctx.clock())

    @app.get("/v1/containers/{container_id}/files")
    async def files(container_id: str, request: Request) -> dict:
        box = boxes.get(authenticate(request), container_id, ctx.clock())
        return _page([meta for meta, _ in box.files.values()], request.query_params)

    @app.get("/v1/containers/{container_id}/files/{file_id}")
    async def file(container_id: str, file_id: str, request: Request) -> dict:
        return boxes.file(authenticate(request), container_id, file_id, ctx.clock())[0]

    @app.get("/v1/containers/{container_id}/files/{file_id}/content")
    async def content(container_id: str, file_id: str, request: Request) -> Response:
        return Response(boxes.file(authenticate(request), container_id, file_id, ctx.clock())[1],
                        media_type="application/octet-stream")

    @app.delete("/v1/containers/{container_id}/files/{file_id}")
    async def delete_file(container_id: str, file_id: str, request: Request) -> dict:
        tenant = authenticate(request)
        boxes.file(tenant, container_id, file_id, ctx.clock())
        del boxes.get(tenant, container_id, ctx.clock()).files[file_id]
        return {"id": file_id, "object": "container.file.deleted", "deleted": True}


def _check_create(body: dict) -> None:
    if not isinstance(body.get("name"), str):
        raise RequestError("Missing required parameter: 'name'.", field="name")
    expires = body.get("expires_after", {"anchor": "last_active_at", "minutes": 20})
    minutes = expires.get("minutes") if isinstance(expires, dict) else None
    if not isinstance(expires, dict) or expires.get("anchor") != "last_active_at" or not isinstance(minutes, int) \
            or isinstance(minutes, bool) or minutes < 1:
        raise RequestError("expires_after: expected {'anchor': 'last_active_at', 'minutes': a positive integer}",
                           field="expires_after")
    if body.get("memory_limit", "1g") not in MEMORY_LIMITS:
        raise RequestError(f"memory_limit: must be one of {', '.join(MEMORY_LIMITS)}", field="memory_limit")
    ids = body.get("file_ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise RequestError("file_ids: expected a list of file ids", field="file_ids")


def _page(items: list[dict], query: Any) -> dict:
    """One page of `items` (oldest first) as OpenAI's cursor lists answer: newest first unless `order=asc`,
    after the `after` id (none when it is not among them), `limit` 1-100 (20 by default)."""
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise RequestError(f"order: must be 'asc' or 'desc', got {order!r}", field="order")
    items = items[::-1] if order == "desc" else items
    after = query.get("after")
    if after is not None:
        ids = [i["id"] for i in items]
        items = items[ids.index(after) + 1:] if after in ids else []
    raw = query.get("limit", "20")
    if not raw.isdigit() or not 1 <= int(raw) <= 100:
        raise RequestError(f"limit: must be an integer between 1 and 100, got {raw!r}", field="limit")
    page = items[:int(raw)]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": len(items) > len(page)}
