"""OpenAI Responses API paths besides `POST /v1/responses` (which the front serves itself, fastpath).

Stored responses (`GET` / `DELETE /v1/responses/{id}`, `GET .../input_items`, `POST .../cancel`; the same under Azure
clients' `/openai/responses` and `/openai/v1/responses`) are the
tenant's that created them (`ownership`; any other caller gets OpenAI's 404 for an unknown id) and are forwarded to the upstream that answered them (`stored_ids`), else to the first upstream that speaks
the Responses API (OpenAI, Azure's v1 API, xAI); `POST /v1/responses/input_tokens` is asked of the route's upstream
when it is OpenAI's (its count is the billing one) and counted here otherwise. None of these is a model request: none is
planned or written to the ledger.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import responses, responses_adapter
from prefixgate.errors import RequestError
from prefixgate.gateway import stored_answers
from prefixgate.gateway.auth import upstream_credential
from prefixgate.gateway.error_response import answer_or_error
from prefixgate.gateway.intake import authenticated_body, serve
from prefixgate.gateway.named_state import check_named
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.provider_ids import record_listed
from prefixgate.gateway.upstream import STORED_RESPONSE_QUERY
from prefixgate.policies import Upstream
from prefixgate.providers import compatible
from prefixgate.tokens import annotate_tokens, encoding_for

router = APIRouter()
WIRE = responses_adapter.WIRE


# The gateway's front serves this path itself (fastpath); the route keeps the router usable on its own.
@router.post("/v1/responses")
async def create(request: Request) -> Response:
    return await serve(request.app.state.proxy, request, WIRE.name, responses.parse_request)


async def input_tokens(request: Request) -> Response:
    return await answer_or_error(WIRE.name, _input_tokens(request))


async def retrieve(response_id: str, request: Request) -> Response:
    return await answer_or_error(WIRE.name, _stored(request, "GET", response_id, ""))


async def delete(response_id: str, request: Request) -> Response:
    return await answer_or_error(WIRE.name, _stored(request, "DELETE", response_id, ""))


async def input_items(response_id: str, request: Request) -> Response:
    return await answer_or_error(WIRE.name, _stored(request, "GET", response_id, "/input_items"))


async def cancel(response_id: str, request: Request) -> Response:
    return await answer_or_error(WIRE.name, _stored(request, "POST", response_id, "/cancel"))


# OpenAI's root, and Azure's clients' (AzureOpenAI(azure_endpoint=...): /openai/responses, its api-version not passed
# on; an OpenAI client on Azure's v1 base URL: /openai/v1/responses), whose creates the front serves as /v1's.
for root in ("/v1/responses", *responses_adapter.AZURE_PATHS):
    router.post(f"{root}/input_tokens")(input_tokens)
    router.get(f"{root}/{{response_id}}")(retrieve)
    router.delete(f"{root}/{{response_id}}")(delete)
    router.get(f"{root}/{{response_id}}/input_items")(input_items)
    router.post(f"{root}/{{response_id}}/cancel")(cancel)


async def _input_tokens(request: Request) -> Response:
    proxy = request.app.state.proxy
    raw, caller = await authenticated_body(proxy, request)
    conv = responses.parse_request(raw)
    await check_named(proxy.stored_ids, caller, conv)     # a count reads what it names
    chained = WIRE.chained_id(conv)
    if chained is not None and not await proxy.stored_ids.allows(WIRE.stored_kind, chained, principal(caller.key)):
        # Counting a chain reads it: another tenant's would say that it exists and how long it is.
        raise WIRE.chain_not_found(chained)
    # Where the chain or a file it names lives (another account answers a 404).
    ref, upstream = await proxy.counted_on(WIRE, conv, proxy.router.decide(conv.model or "", caller.key).route)
    if _speaks_responses(upstream) and upstream.profile is None:    # a compatible provider documents no count
        body = compact_bytes({**responses.encode_request(conv), "model": ref.model or conv.model})
        key = upstream_credential(upstream, caller, WIRE.name)
        resp = await proxy.upstream.forward(upstream, WIRE, "POST", api_path(upstream, "/responses/input_tokens"), "",
                                            body, key)
        return Response(resp.body, resp.status, media_type="application/json")
    if conv.params.get("previous_response_id") is not None:
        raise RequestError("previous_response_id: this route's target does not count a stored response's tokens",
                           field="previous_response_id")
    count = annotate_tokens(conv, encoding_for(WIRE.planner_provider, ref.model or conv.model))
    return Response(compact_bytes({"object": "response.input_tokens", "input_tokens": count}),
                    media_type="application/json")


async def _stored(request: Request, method: str, response_id: str, suffix: str) -> Response:
    caller, resp = await stored_answers.relay(
        request, WIRE, method, response_id, field="response_id", not_found=f"Response with id '{response_id}' not found",
        stored="responses", path=lambda upstream, segment: api_path(upstream, f"/responses/{segment}{suffix}"),
        query=STORED_RESPONSE_QUERY)
    if suffix == "/input_items" and resp.status == 200:
        record_listed(request.app.state.proxy.stored_ids, principal(caller.key), resp.body or b"")
    return stored_answers.answer(request, resp)


def _speaks_responses(upstream: Upstream) -> bool:
    return upstream.dialect_for(WIRE.name) == WIRE.name


def api_path(upstream: Upstream, tail: str) -> str:
    """`tail` under the upstream's OpenAI API root (its URL may or may not end in /v1; Azure's is /openai/v1)."""
    return compatible.api_path(upstream.profile, upstream.url, tail)
