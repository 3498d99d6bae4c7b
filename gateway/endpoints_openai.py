"""OpenAI's paths: `POST /v1/chat/completions`, and the unplanned but priced
`POST /v1/completions` and `POST /v1/embeddings` (passthrough.py). The Responses API: endpoints_responses.py;
model listing, every format's: endpoints_models.py."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from prefixgate.dialects import openai
from prefixgate.gateway.intake import serve
from prefixgate.gateway.passthrough import forward_priced

router = APIRouter()
WIRE = openai.WIRE


# The gateway's front serves this path itself (fastpath); the route keeps the router usable on its own.
@router.post("/v1/chat/completions")
async def chat_completions(request: Request) -> Response:
    return await serve(request.app.state.proxy, request, WIRE.name, openai.parse_request)


@router.post("/v1/completions")
async def completions(request: Request) -> Response:
    return await forward_priced(request, "/completions")


@router.post("/v1/embeddings")
async def embeddings(request: Request) -> Response:
    return await forward_priced(request, "/embeddings")
