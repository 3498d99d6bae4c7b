"""Gemini Interactions API paths besides `POST /{v1,v1beta}/interactions` (which the front serves itself,
fastpath): `GET` / `DELETE /{version}/interactions/{id}` and `POST .../{id}/cancel`.

A stored interaction is the tenant's that created it (`ownership`): any other keyed caller, and any caller
naming an id the gateway never saw created, gets the 404 Google answers for an unknown id. The call goes
to the upstream that answered the create (`stored_ids`), else to the first upstream that speaks the
Interactions API, under the caller's API version. None of these is a model request: none is planned or
written to the ledger.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from prefixgate.dialects import interactions_adapter
from prefixgate.errors import RequestError
from prefixgate.gateway import stored_answers
from prefixgate.gateway.error_response import answer_or_error
from prefixgate.gateway.upstream import STORED_INTERACTION_QUERY

router = APIRouter()
WIRE = interactions_adapter.WIRE


@router.get("/{version}/interactions/{interaction_id}")
async def retrieve(version: str, interaction_id: str, request: Request) -> Response:
    return await answer_or_error(WIRE.name, _stored(request, "GET", version, interaction_id, ""))


@router.delete("/{version}/interactions/{interaction_id}")
async def delete(version: str, interaction_id: str, request: Request) -> Response:
    return await answer_or_error(WIRE.name, _stored(request, "DELETE", version, interaction_id, ""))


@router.post("/{version}/interactions/{interaction_id}/cancel")
async def cancel(version: str, interaction_id: str, request: Request) -> Response:
    return await answer_or_error(WIRE.name, _stored(request, "POST", version, interaction_id, "/cancel"))


async def _stored(request: Request, method: str, version: str, interaction_id: str, suffix: str) -> Response:
    if version not in ("v1", "v1beta"):
        raise RequestError(f"{request.url.path}: no such endpoint on this gateway", status=404, kind="not_found")
    _, resp = await stored_answers.relay(
        request, WIRE, method, interaction_id, field="interaction_id", not_found=f"Interaction '{interaction_id}' not found",
        stored="interactions", path=lambda _, segment: f"/{version}/interactions/{segment}{suffix}",
        query=STORED_INTERACTION_QUERY)
    return stored_answers.answer(request, resp)
