"""A call on an answer a provider stores (a Responses API response, a Gemini interaction): read, delete, cancel,
list its input items. The gateway relays it; none of these is a model request, so none is planned or recorded.

A stored answer is the tenant's that created it (`ownership`): any other keyed caller, and any caller naming an id
the gateway never saw created, gets the 404 its provider answers for an unknown id. The call goes to the upstream
that stored it (`stored_ids`), else to the first upstream that speaks the format. Once one is deleted upstream (or
is gone there), no owner and no replay of the response cache hands out its id again.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response

from prefixgate.dialects.wire import WireFormat
from prefixgate.errors import RequestError
from prefixgate.gateway.auth import Caller, authenticate, upstream_credential
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.upstream import UpstreamFailure, UpstreamResponse, allowed_query
from prefixgate.model_ids import STORED_ID, path_model
from prefixgate.policies import Upstream


async def relay(request: Request, wire: WireFormat, method: str, ident: str, *, field: str, not_found: str,
                stored: str, path: Callable[[Upstream, str], str], query: frozenset[str]) -> tuple[Caller, UpstreamResponse]:
    """The caller and its upstream's answer to `method` on stored answer `ident` (the path parameter `field`), at
    `path(upstream, ident as one path segment)`, with the query parameters `query` allows. `not_found`: the
    provider's words for an unknown id; `stored`: what the format stores, in the gateway's own 404."""
    proxy = request.app.state.proxy
    caller = authenticate(request.headers, request.query_params, proxy.keys)
    segment = path_model(ident, STORED_ID, field=field)
    if not await proxy.stored_ids.allows(wire.stored_kind, ident, principal(caller.key)):
        # Another tenant's, or never created through this gateway: what the provider answers an unknown id.
        raise RequestError(f"{not_found}.", status=404, kind="not_found")
    home = await proxy.stored_ids.find_home(wire.stored_kind, ident)
    upstream = proxy.policy.upstreams[home] if home is not None else next(
        (u for u in proxy.policy.upstreams.values() if u.dialect_for(wire.name) == wire.name), None)
    if upstream is None:
        raise RequestError(f"{not_found}: no upstream of this gateway stores {stored}", status=404, kind="not_found")
    body = await request.body() if method == "POST" else b""
    try:
        resp = await proxy.upstream.forward(upstream, wire, method, path(upstream, segment),
                                            allowed_query(request.query_params.multi_items(), query), body,
                                            upstream_credential(upstream, caller, wire.name))
    except UpstreamFailure as f:
        # A 404 is an UpstreamFailure, never a response: gone there already (deleted at the provider, expired).
        if method == "DELETE" and f.status == 404:
            await proxy.response_cache.forget(ident)
        raise
    if method == "DELETE" and 200 <= resp.status < 300:
        await proxy.stored_ids.forget(wire.stored_kind, ident)
        await proxy.response_cache.forget(ident)     # gone upstream: no replay may hand out its id
    return caller, resp


def answer(request: Request, resp: UpstreamResponse) -> Response:
    """The upstream's answer as is. `GET ?stream=true` replays a finished one's events (read whole here: it is over
    already)."""
    replay = request.query_params.get("stream") == "true"
    return Response(resp.body, resp.status, media_type="text/event-stream" if replay else "application/json")
