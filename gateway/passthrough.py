"""`POST /v1/completions` and `POST /v1/embeddings`: forwarded to the route's OpenAI-speaking upstream
unplanned (a legacy completion prompt and an embedding input have no prefix structure worth rewriting),
with usage priced and written to the ledger like any model request. A route ending at a target that
cannot take them (another provider, the in-process engine) is a 400 saying so.
"""

from __future__ import annotations

import json
import time

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response

from prefixgate.cache_planner import Target, plan
from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import openai
from prefixgate.dialects.validate import load_body, require
from prefixgate.errors import RequestError
from prefixgate.gateway.auth import upstream_credential
from prefixgate.gateway.endpoints_responses import api_path
from prefixgate.gateway.error_response import error_response
from prefixgate.gateway.intake import authenticated_body
from prefixgate.gateway.proxy import Prepared
from prefixgate.gateway.upstream import UpstreamFailure
from prefixgate.ir import Conversation

WIRE = openai.WIRE


async def forward_priced(request: Request, tail: str) -> Response:
    """Forward one completions or embeddings request (`tail`: "/completions" or "/embeddings")."""
    proxy = request.app.state.proxy
    started = time.perf_counter()
    try:
        raw, caller = await authenticated_body(proxy, request)
        data = load_body(raw)
        model = require(data, "model", str)
        if data.get("stream"):
            raise RequestError(f"stream: streaming /v1{tail} is not supported by the gateway", field="stream")
        conv = Conversation(WIRE.name, model, [], params=data)
        call = proxy.start(WIRE.name, conv, caller, request.headers, started, raw=raw)
    except RequestError as e:
        return error_response(e, WIRE.name)
    try:
        await proxy.admit(call)      # the same key, route, budget and rate checks as every model request
    except RequestError as e:
        return proxy.fail(call, e, None)
    ref = call.route.targets[0]
    upstream = proxy.policy.upstreams[ref.upstreams[0]]
    target = ref.model or model
    planner = upstream.planner_provider(WIRE)
    the_plan = plan(conv, Target(planner, target), mode="off")
    the_plan.explanation[:] = [f"passthrough: /v1{tail} is forwarded unplanned"]
    body = compact_bytes({**data, "model": target})
    prep = Prepared(upstream, WIRE, target, the_plan, body, None, False, planner)
    try:
        if upstream.dialect != WIRE.name or upstream.kind == "local":
            raise RequestError(f"/v1{tail}: route {call.route.name!r} ends at upstream {upstream.name!r}, "
                               "which does not serve it", field="model")
        prep.key = upstream_credential(upstream, caller, WIRE.name)
        sent = time.perf_counter()
        resp = await proxy.upstream.forward(upstream, WIRE, "POST", api_path(upstream, tail), "", body, prep.key,
                                            call.route.retry.timeout_s)
    except UpstreamFailure as f:
        return proxy.fail(call, f.request_error(), prep)
    except RequestError as e:
        return proxy.fail(call, e, prep)
    try:
        usage = openai.usage_from_response(json.loads(resp.body or b"{}"))
    except (ValueError, AttributeError):
        return proxy.fail(call, RequestError(f"upstream {upstream.name!r} sent a body that is not JSON", status=502,
                                             kind="server"), prep)
    rec = proxy.accounts.record(call, prep, usage, 200, ttft_s=None, upstream_s=time.perf_counter() - sent)
    return Response(resp.body, 200, {**resp.headers, **proxy.headers(call, prep, rec)}, media_type="application/json",
                    background=BackgroundTask(proxy.accounts.finish, call, rec))
