"""OpenAI's paths: `POST /v1/chat/completions` and `GET /v1/models`."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import openai
from prefixgate.gateway.intake import serve

router = APIRouter()
WIRE = openai.WIRE


# The gateway's front serves this path itself (fastpath); the route keeps the router usable on its own.
@router.post("/v1/chat/completions")
async def chat_completions(request: Request) -> Response:
    return await serve(request.app.state.proxy, request, WIRE.name, openai.parse_request)


@router.get("/v1/models")
async def models(request: Request) -> Response:
    """The model names callers can send (patterns such as `gpt-*` are left out: they are not names)."""
    proxy = request.app.state.proxy
    data = [{"id": m, "object": "model", "created": 0, "owned_by": r.name}
            for r in proxy.policy.routes for m in r.models if not any(c in m for c in "*?[")]
    return Response(compact_bytes({"object": "list", "data": data}), media_type="application/json")
