"""Mock OpenAI Responses API: `POST /v1/responses` (streamed or not), `GET`/`DELETE /v1/responses/{id}`,
`GET /v1/responses/{id}/input_items`, `POST /v1/responses/{id}/cancel`, `POST /v1/responses/input_tokens`.

Usage comes from the cache simulator under OpenAI's rules (1024-token minimum, 128-token steps,
`prompt_cache_key` routing, `prompt_cache_retention`). A `previous_response_id` request is expanded to the
stored chain plus the new input, as OpenAI rebuilds and bills it. Replies are deterministic text, or a
function call when the request asks for one (see `script.py`). Responses complete at once, so
`background: true` ones are already completed when `cancel` comes.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from prefixgate.dialects import responses as dialect
from prefixgate.errors import RequestError
from prefixgate.providers.files import OPENAI
from prefixgate.providers.response_store import ResponseStore, StoredResponse
from prefixgate.providers.rules import ModelRules
from prefixgate.simulation.mock import item_references, retired
from prefixgate.simulation.mock.openai import authenticate
from prefixgate.simulation.mock.openai_params import check_input_tokens_body, check_responses_body
from prefixgate.simulation.mock.script import scripted_call, value_for
from prefixgate.simulation.mock.server import MockContext, json_body, prompt_text, sse_response
from prefixgate.simulation.mock.service_tier import openai_tier
from prefixgate.simulation.mock.text import reply_for
from prefixgate.tokens import count_tokens, encoding_for
from prefixgate.usage import Usage

# Reasoning models think before answering; the mock reports this many reasoning tokens when asked to reason.
REASONING_TOKENS = 64
_REASONING_MODELS = ("gpt-5", "o1", "o3", "o4", "gpt-6")


def add_routes(app: FastAPI, ctx: MockContext, store: ResponseStore | None = None, *, root: str = "/v1",
               account: Callable[[Request], str] = authenticate, deployed: Callable[[Any], str] | None = None,
               rules: Callable[[str], ModelRules] | None = None) -> None:
    """OpenAI's API under /v1, or a compatible provider's under `root` (mock/compatible.py: Azure's v1 API, xAI), its
    callers' accounts told apart by `account`. `deployed`: the body's model names a deployment, answered as the
    model it runs (Azure); `rules`: the provider's caching rules of a model. Only OpenAI counts input tokens."""
    responses = store or ResponseStore()

    @app.post(f"{root}/responses")
    async def create(request: Request) -> Response:
        tenant = account(request)
        body = await json_body(request)
        fault = await ctx.fault_for(request, "openai", body.get("model"))
        check_responses_body(body)  # every field checked before anything is stored or counted
        if root != "/v1":
            ctx.received.append((request.url.path, body))     # as a compatible provider's chat requests are
        if deployed is not None:
            body = {**body, "model": deployed(body.get("model"))}
        dialect.parse_request(body)
        if root == "/v1":       # OpenAI's dates: Azure retires deployments on its own
            retired.refuse(ctx, "openai", str(body.get("model", "")))
        container = ctx.containers.code_interpreter(body, tenant, ctx.clock())
        context, new_input = _context(body, responses, tenant), _input(body, responses, tenant)
        sent = ctx.files.inlined(OPENAI, tenant, _expanded(body, context, new_input))    # a file is read as text
        result = ctx.simulator.respond("openai", sent, now=ctx.clock(), tenant=tenant,
                                       rules=rules(body["model"]) if rules is not None else None)
        response, chunks = _answer(body, sent, result.usage, prompt_text(result.conversation), result.model.id)
        if container is not None:       # the code it ran, and the file it wrote cited
            ctx.containers.ran(response, tenant, container, ctx.clock())
        response |= ctx.responses_diagnostics.answer(body, sent, tenant, response["id"], result.usage)
        response["service_tier"] = openai_tier(body, fault)
        if body.get("store", True) is not False:
            responses.put(tenant, StoredResponse(response, context, new_input))
        if result.conversation.stream:
            return sse_response(dialect.response_events(response, chunks), fault, speaks="responses")
        return JSONResponse(response)

    async def input_tokens(request: Request) -> dict:
        tenant = account(request)
        body = await json_body(request)
        await ctx.fault_for(request, "openai", body.get("model"))
        check_input_tokens_body(body)
        dialect.parse_request(body)
        retired.refuse(ctx, "openai", str(body.get("model", "")))
        sent = ctx.files.inlined(OPENAI, tenant, _expanded(body, _context(body, responses, tenant),
                                                           _input(body, responses, tenant)))
        return {"object": "response.input_tokens", "input_tokens": ctx.simulator.count_tokens("openai", sent)}

    if root == "/v1":
        app.post(f"{root}/responses/input_tokens")(input_tokens)

    @app.get(f"{root}/responses/{{response_id}}")
    async def retrieve(response_id: str, request: Request) -> Response:
        stored = responses.get(account(request), response_id)
        if request.query_params.get("stream") == "true":
            after = _int_param(request, "starting_after", -1)
            return sse_response(dialect.response_events(stored.response, starting_after=after), None)
        return JSONResponse(stored.response)

    @app.delete(f"{root}/responses/{{response_id}}")
    async def delete(response_id: str, request: Request) -> dict:
        responses.delete(account(request), response_id)
        return {"id": response_id, "object": "response", "deleted": True}

    @app.post(f"{root}/responses/{{response_id}}/cancel")
    async def cancel(response_id: str, request: Request) -> dict:
        stored = responses.get(account(request), response_id)
        if not stored.response.get("background"):
            raise RequestError("Only responses created with background=true can be cancelled.")
        return stored.response

    @app.get(f"{root}/responses/{{response_id}}/input_items")
    async def list_input_items(response_id: str, request: Request) -> dict:
        stored = responses.get(account(request), response_id)
        items = _listed(stored)
        order = request.query_params.get("order", "desc")
        if order not in ("asc", "desc"):
            raise RequestError(f"order: must be 'asc' or 'desc', got {order!r}", field="order")
        if order == "desc":
            items.reverse()
        after = request.query_params.get("after")
        if after is not None:
            ids = [i.get("id") for i in items]
            if after not in ids:
                raise RequestError(f"after: no input item with id {after!r}", field="after")
            items = items[ids.index(after) + 1:]
        limit = _int_param(request, "limit", 20)
        if not 1 <= limit <= 100:
            raise RequestError("limit: must be between 1 and 100", field="limit")
        page = items[:limit]
        return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None, "has_more": len(items) > limit}


def _context(body: dict, store: ResponseStore, tenant: str) -> list[dict]:
    previous = body.get("previous_response_id")
    return store.get(tenant, previous, "previous_response_id").conversation if previous is not None else []


def _input(body: dict, store: ResponseStore, tenant: str) -> list[dict]:
    """This request's input items, each `item_reference` replaced by the stored item it names."""
    return item_references.resolved(dialect.input_items(body), store, tenant, _listed)


def _expanded(body: dict, context: list[dict], new_input: list[dict]) -> dict:
    """The request as the model sees it: the chain's items, then this request's input."""
    if not context and new_input == dialect.input_items(body):
        return body
    return {k: v for k, v in body.items() if k != "previous_response_id"} | {"input": [*context, *new_input]}


def _listed(stored: StoredResponse) -> list[dict]:
    """A response's input items as listed, each with an id (the caller's, else one fixed per position).
    Stored items keep no ids of ours: the chain must render to the same prompt as the request did."""
    out = []
    for index, item in enumerate([*stored.context, *stored.input]):
        if "role" in item and item.get("type", "message") == "message":
            content = item["content"]
            if isinstance(content, str):
                content = [{"type": "output_text" if item["role"] == "assistant" else "input_text", "text": content}]
            item = {"type": "message", "status": "completed", **item, "content": content}
        if "id" not in item:
            digest = hashlib.sha256(f"{stored.response['id']}:{index}".encode()).hexdigest()[:32]
            item = {"id": f"msg_{digest}", **item}
        out.append(item)
    return out


def _answer(body: dict, sent: dict, usage: Usage, prompt: str, model_id: str) -> tuple[dict, dict[str, list[str]]]:
    """The response object for this request, and how its text is streamed."""
    encoding = encoding_for("openai", model_id)
    output: list[dict] = []
    reasoning = _reasoning_item(body, prompt)
    if reasoning is not None:
        output.append(reasoning)
    call = scripted_call(body, dialect.input_items(sent))
    chunks: dict[str, list[str]] = {}
    status, incomplete = "completed", None
    if call is not None:
        output.append(dialect.function_call_item(call.name, call.arguments))
        produced = count_tokens(call.name + call.arguments, encoding)
    else:
        reply = reply_for(prompt, body.get("max_output_tokens"), encoding)
        structured = _structured(body)
        if structured is not None:
            reply = replace(reply, text=structured, output_tokens=count_tokens(structured, encoding), truncated=False)
        item = dialect.message_item(reply.text)
        output.append(item)
        chunks[item["id"]] = reply.chunks()
        produced = reply.output_tokens
        if reply.truncated:
            status, incomplete = "incomplete", "max_output_tokens"
    thought = REASONING_TOKENS if reasoning is not None else 0
    response = dialect.response_object(body["model"], output, replace(usage, output=produced + thought), request=body,
                                       status=status, reasoning=thought, incomplete_reason=incomplete)
    return response, chunks


def _structured(body: dict) -> str | None:
    """A JSON answer when `text.format` asks for one (a schema's fixed values, or an object)."""
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("json_schema", "json_object"):
        return None
    value = value_for(fmt.get("schema") or {"type": "object"}) if fmt["type"] == "json_schema" else {"answer": "mock"}
    return json.dumps(value, separators=(",", ":"))


def _reasoning_item(body: dict, prompt: str) -> dict | None:
    """A reasoning item when a reasoning model is asked to reason; its encrypted content when `include` asks."""
    effort = (body.get("reasoning") or {}).get("effort") if isinstance(body.get("reasoning"), dict) else None
    if effort in (None, "none") or not str(body.get("model", "")).startswith(_REASONING_MODELS):
        return None
    item: dict[str, Any] = {"id": dialect.new_id("rs"), "type": "reasoning", "summary": []}
    if "reasoning.encrypted_content" in (body.get("include") or []):
        digest = hashlib.sha256(json.dumps([effort, prompt]).encode()).digest()
        item["encrypted_content"] = "gAAAA" + base64.urlsafe_b64encode(digest * 4).decode()
    return item


def _int_param(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise RequestError(f"{name}: expected an integer, got {raw!r}", field=name) from None
