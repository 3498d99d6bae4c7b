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
from prefixgate.gateway.auth import authenticate, upstream_credential
from prefixgate.gateway.error_response import answer_or_error
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.upstream import STORED_INTERACTION_QUERY, allowed_query
from prefixgate.model_ids import STORED_ID, path_model

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
    proxy = request.app.state.proxy
    caller = authenticate(request.headers, request.query_params, proxy.keys)
    segment = path_model(interaction_id, STORED_ID, field="interaction_id")
    if not await proxy.stored_ids.allows(WIRE.stored_kind, interaction_id, principal(caller.key)):
        # Another tenant's, or never created through this gateway: what Google answers an unknown id.
        raise RequestError(f"Interaction '{interaction_id}' not found.", status=404, kind="not_found")
    home = await proxy.stored_ids.find_home(WIRE.stored_kind, interaction_id)
    upstream = proxy.policy.upstreams[home] if home is not None else next(
        (u for u in proxy.policy.upstreams.values() if u.dialect_for(WIRE.name) == WIRE.name), None)
    if upstream is None:
        raise RequestError(f"Interaction '{interaction_id}' not found: no upstream of this gateway stores interactions",
                           status=404, kind="not_found")
    body = await request.body() if method == "POST" else b""
    key = upstream_credential(upstream, caller, WIRE.name)
    resp = await proxy.upstream.forward(upstream, WIRE, method, f"/{version}/interactions/{segment}{suffix}",
                                        allowed_query(request.query_params.multi_items(), STORED_INTERACTION_QUERY), body,
                                        key)
    if method == "DELETE" and 200 <= resp.status < 300:
        await proxy.stored_ids.forget(WIRE.stored_kind, interaction_id)
    if method == "DELETE" and (200 <= resp.status < 300 or resp.status == 404):
        await proxy.response_cache.forget(interaction_id)     # gone upstream: no replay may hand out its id
    # `GET ?stream=true` replays a finished interaction's events (read whole here: it is over already).
    replay = request.query_params.get("stream") == "true"
    return Response(resp.body, resp.status, media_type="text/event-stream" if replay else "application/json")
