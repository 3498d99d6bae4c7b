"""Mock Gemini Interactions API (`/v1` and `/v1beta`): create (whole or streamed), get, delete, cancel.

Usage comes from the cache simulator's Gemini implicit cache (`gemini_cache.TokenPrefixCache`, the one the
generateContent mock uses): the prompt is the system instruction, the tools, the stored turns of the chain
(`previous_interaction_id`) and the new input; a later request reads the longest token prefix it shares
with a live cached prompt of the same model and project, wherever it ends (inside one text part too), once
that prefix holds the model's minimum (4,096 for 3.x Flash and newer). Only the chain's turns carry over:
the system instruction, tools and generation config are the request's own, as the API documents.
Interactions are stored per API key (a project), so `store: false` ones cannot be continued or read back.
Replies are deterministic text, or a function call (status `requires_action`) when the request asks for one
as `script.py` describes (`generation_config.tool_choice` "any" or one allowed tool, or the `[[mock:call
NAME]]` marker in the newest user input); interactions complete at once, so a background one is already
done when `cancel` comes.
"""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from dataclasses import dataclass, replace

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from prefixgate.dialects import interactions as dialect
from prefixgate.errors import RequestError
from prefixgate.providers.pricing import UnknownModel
from prefixgate.simulation.mock.gemini import authenticate
from prefixgate.simulation.mock.gemini_thinking import THOUGHT_TOKENS, thinks
from prefixgate.simulation.mock.script import ScriptedCall, scripted_call
from prefixgate.simulation.mock.server import MockContext, json_body, prompt_text, sse_response
from prefixgate.simulation.mock.text import reply_for
from prefixgate.tokens import count_tokens


@dataclass
class StoredInteraction:
    interaction: dict
    steps: list[dict]        # every turn so far: the chain's, this request's input, this interaction's output


class InteractionStore:
    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self._items: OrderedDict[tuple[str, str], StoredInteraction] = OrderedDict()

    def put(self, tenant: str, stored: StoredInteraction) -> None:
        self._items[(tenant, stored.interaction["id"])] = stored
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def get(self, tenant: str, interaction_id: str) -> StoredInteraction:
        stored = self._items.get((tenant, interaction_id))
        if stored is None:
            raise RequestError(f"Interaction '{interaction_id}' not found.", status=404, kind="not_found")
        return stored

    def delete(self, tenant: str, interaction_id: str) -> None:
        self.get(tenant, interaction_id)
        del self._items[(tenant, interaction_id)]


def add_routes(app: FastAPI, ctx: MockContext, store: InteractionStore | None = None) -> None:
    interactions = store or InteractionStore()
    for prefix in dialect.PATHS:
        _add_version_routes(app, ctx, interactions, prefix)


def _add_version_routes(app: FastAPI, ctx: MockContext, interactions: InteractionStore, prefix: str) -> None:
    @app.post(prefix)
    async def create(request: Request) -> Response:
        tenant = authenticate(request)
        body = await json_body(request)
        fault = await ctx.fault_for(request, "gemini", body.get("model"))
        conv = dialect.parse_request(body)      # every field checked before anything is stored or counted
        if body.get("agent") is not None:
            raise RequestError("agent: this mock serves models only", field="agent")
        previous = body.get("previous_interaction_id")
        history = interactions.get(tenant, previous).steps if previous is not None else []
        new_input = input_steps(body.get("input"))
        sent = {k: v for k, v in body.items() if k not in ("previous_interaction_id", "input")} | \
            {"input": [*history, *new_input]}
        try:
            result = ctx.simulator.respond("gemini", sent, now=ctx.clock(), tenant=tenant)
        except UnknownModel:
            raise RequestError(f"models/{body['model']} is not found for the Interactions API.", status=404,
                               kind="not_found", field="model") from None
        config = body.get("generation_config") or {}
        call = _scripted(body, [*history, *new_input])
        chunks: list[str] = []
        if call is not None:
            output = [{"type": "function_call", "id": "call_" + uuid.uuid4().hex[:12], "name": call.name,
                       "arguments": json.loads(call.arguments)}]
            produced, status = count_tokens(call.name + call.arguments), "requires_action"
        else:
            reply = reply_for(prompt_text(result.conversation), config.get("max_output_tokens"))
            output, chunks = [dialect.text_step(reply.text)], reply.chunks()
            produced, status = reply.output_tokens, "incomplete" if reply.truncated else "completed"
        # A thinking model's thoughts are output beside the answer (total_thought_tokens); unlike generateContent's
        # maxOutputTokens, whether max_output_tokens bounds them is unconfirmed (wire-2026-11.md section 1), so it
        # does not here.
        thought = THOUGHT_TOKENS if thinks(result.model.id) else 0
        interaction = dialect.interaction_object(result.model.id, output,
                                                 replace(result.usage, output=produced + thought), status=status,
                                                 previous=previous, thought=thought)
        if body.get("store", True) is not False:
            interactions.put(tenant, StoredInteraction(interaction, [*history, *new_input, *output]))
        if conv.stream:
            return sse_response(dialect.interaction_events(interaction, chunks), fault)
        return JSONResponse(interaction)

    @app.get(prefix + "/{interaction_id}")
    async def get(interaction_id: str, request: Request) -> Response:
        stored = interactions.get(authenticate(request), interaction_id)
        interaction = stored.interaction
        if request.query_params.get("include_input") == "true":
            interaction = {**interaction, "steps": stored.steps}
        if request.query_params.get("stream") == "true":
            return sse_response(dialect.interaction_events(interaction), None)
        return JSONResponse(interaction)

    @app.delete(prefix + "/{interaction_id}")
    async def delete(interaction_id: str, request: Request) -> dict:
        interactions.delete(authenticate(request), interaction_id)
        return {}

    @app.post(prefix + "/{interaction_id}/cancel")
    async def cancel(interaction_id: str, request: Request) -> dict:
        stored = interactions.get(authenticate(request), interaction_id)
        return stored.interaction


def input_steps(raw: object) -> list[dict]:
    """A request's `input` as steps, as the server keeps it for the chain."""
    if raw is None:
        return []
    if isinstance(raw, str):
        return [{"type": "user_input", "content": [{"type": "text", "text": raw}]}]
    if isinstance(raw, dict):
        return [{"type": "user_input", "content": [raw]}]
    items = list(raw)       # type: ignore[call-overload]
    if items and all(isinstance(i, dict) and i.get("type") in dialect.CONTENT_KINDS for i in items):
        return [{"type": "user_input", "content": items}]
    return items


def _scripted(body: dict, steps: list[dict]) -> ScriptedCall | None:
    """`script.scripted_call` on this API's shapes: its tool choice, its steps as the items the script reads."""
    choice = (body.get("generation_config") or {}).get("tool_choice", "auto")
    if isinstance(choice, dict):
        allowed = (choice.get("allowed_tools") or {}).get("tools") or []
        choice = {"type": "function", "name": allowed[0]} if len(allowed) == 1 else "required"
    elif choice == "any":
        choice = "required"
    items = [{"role": "user", "content": step.get("content") or []} if step.get("type") == "user_input"
             else {"type": "function_call_output" if step.get("type") == "function_result" else step.get("type")}
             for step in steps]
    return scripted_call({"tools": body.get("tools"), "tool_choice": choice}, items)
