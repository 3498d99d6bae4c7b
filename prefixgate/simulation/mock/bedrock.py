"""Mock Amazon Bedrock Runtime for Claude: InvokeModel, InvokeModelWithResponseStream, Converse, ConverseStream
at `/model/{modelId}/...` (and CountTokens), and the Messages API at `/anthropic/v1/messages`.

Every request must carry a SigV4 signature (service `bedrock`, or `bedrock-mantle` on the Messages API) made
with the credentials in this process's environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`), checked as
Bedrock checks it: a wrong signature, or one scoped to another region than this process's AWS_REGION
(or to another service), is a 403 InvalidSignatureException, an unknown key a 403 UnrecognizedClientException. Each access key is its own cache scope. Streams are real event-stream frames
(InvokeModel: base64 Anthropic events in `chunk`s; Converse: its own events), usage comes from the
simulator's Bedrock cache (Bedrock's per-model minimums and TTLs), errors are Bedrock's JSON with
`x-amzn-ErrorType`.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import replace

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from prefixgate import sigv4
from prefixgate.dialects import anthropic, bedrock_invoke, converse, eventstream
from prefixgate.dialects.bedrock import counted_request, operation_of
from prefixgate.dialects.sse import event_json
from prefixgate.errors import RequestError
from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.providers.rules import ModelRules
from prefixgate.simulation.mock import retired
from prefixgate.simulation.mock.anthropic_params import SAMPLING_PAIR, deprecated_sampling, sampling_pair
from prefixgate.simulation.mock.server import MockContext, json_body, prompt_text, sse_response, tenant_of
from prefixgate.simulation.mock.text import reply_for


def authenticate(request: Request, body: bytes) -> str:
    """The caller's cache scope, after checking its SigV4 signature against this process's credentials."""
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not key or not secret:
        raise RequestError("mock Bedrock: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in mock-providers' "
                           "environment; requests are checked against them", status=403, kind="authentication")
    raw_path = request.scope.get("raw_path") or request.url.path.encode()
    query = request.scope.get("query_string") or b""
    url = f"http://{request.headers.get('host', 'localhost')}{raw_path.decode()}" + (f"?{query.decode()}" if query else "")
    try:
        signed = sigv4.verify(request.method, url, dict(request.headers), body, {key: secret})
    except sigv4.SignatureError as e:
        unknown = "token included" in str(e)
        raise RequestError(str(e), status=403, kind="authentication" if unknown else "signature") from None
    # The signature covers its credential scope, but AWS also checks that scope names this endpoint's region and
    # service (a client configured for another region is refused, not served there).
    services = ("bedrock", "bedrock-mantle") if request.url.path.startswith("/anthropic/") else ("bedrock",)
    if signed.region != sigv4.aws_region():
        raise RequestError(f"Credential should be scoped to a valid region, not '{signed.region}'. ", status=403,
                           kind="signature")
    if signed.service not in services:
        raise RequestError(f"Credential should be scoped to correct service: '{services[0]}'. ", status=403,
                           kind="signature")
    return tenant_of(key)


def model_rules(ctx: MockContext, model: str) -> ModelRules:
    try:
        rules = resolve_model("bedrock", model, ctx.simulator.catalog)
    except UnknownModel:
        raise RequestError("The provided model identifier is invalid.", field="modelId") from None
    retired.refuse(ctx, "bedrock", model, rules)
    return rules


def check_sampling(params: dict, model_id: str) -> None:
    """Claude Opus 4.7 and later refuse non-default sampling on Bedrock too, and Opus 4.1 to 4.6 the temperature and
    top_p pair, in Bedrock's words (DayuanJiang/next-ai-draw-io#861; the rules are mock/anthropic_params.py's)."""
    refused = deprecated_sampling(params, model_id) if isinstance(params, dict) else None
    if refused is not None:
        raise RequestError(f"The model returned the following errors: {refused} is deprecated for this model.",
                           field=refused)
    if isinstance(params, dict) and sampling_pair(params, model_id):
        # Sonnet 4.6 on Bedrock: skydiscover-ai/skydiscover#15.
        raise RequestError(f"The model returned the following errors: {SAMPLING_PAIR}", field="topP")


def check_blank_text(body: dict) -> None:
    """Converse refuses an empty text block: "The text field in the ContentBlock object at messages.0.content.0 is
    blank. Add text to the text field, and try again." (a ValidationException many Bedrock clients report)."""
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, dict) else None
        for j, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, dict) and block.get("text") == "":
                raise RequestError(f"The text field in the ContentBlock object at messages.{i}.content.{j} is blank. "
                                   "Add text to the text field, and try again.", field=f"messages.{i}.content.{j}")


def count(ctx: MockContext, model: str, body: dict) -> int:
    """CountTokens: the prompt an InvokeModel body (base64, as boto3 sends a blob) or a Converse one would send,
    counted as that operation would bill it; nothing is cached."""
    model_rules(ctx, model)
    _, request = counted_request(body)
    return ctx.simulator.count_tokens("bedrock", request, model=model)


def add_routes(app: FastAPI, ctx: MockContext) -> None:
    async def operation(request: Request, model_id: str, path_op: str) -> Response:
        raw = await request.body()
        tenant = authenticate(request, raw)
        if path_op == "count-tokens":
            return JSONResponse({"inputTokens": count(ctx, model_id, await json_body(request))})
        op = operation_of(f"/model/{model_id}/{path_op}")
        if op is None:
            raise RequestError(f"unknown Bedrock operation {path_op!r}", status=404, kind="not_found")
        body = await json_body(request)
        rules = model_rules(ctx, op.model)
        check_sampling((body.get("inferenceConfig") or {}) if op.format == "converse" else body, rules.id)
        if op.format == "converse":
            check_blank_text(body)
        fault = await ctx.fault_for(request, "bedrock", op.model)
        result = ctx.simulator.respond("bedrock", body, now=ctx.clock(), tenant=tenant, model=op.model)
        conv = result.conversation
        max_tokens = (body.get("inferenceConfig") or {}).get("maxTokens") if op.format == "converse" else body["max_tokens"]
        reply = reply_for(prompt_text(conv), max_tokens)
        usage = replace(result.usage, output=reply.output_tokens)
        stop = "max_tokens" if reply.truncated else "end_turn"
        headers = {"x-amzn-requestid": str(uuid.uuid4())}
        if op.format == "converse":
            if op.stream:
                frames = converse.stream_events(reply.chunks(), usage, stop_reason=stop, started=time.monotonic())
                return sse_response(frames, fault, headers, media_type=eventstream.CONTENT_TYPE, speaks="bedrock")
            return JSONResponse(converse.build_response(reply.text, usage, stop_reason=stop), headers=headers)
        headers |= {"x-amzn-bedrock-input-token-count": str(usage.uncached_input),
                    "x-amzn-bedrock-output-token-count": str(usage.output),
                    "x-amzn-bedrock-cache-read-input-token-count": str(usage.cache_read),
                    "x-amzn-bedrock-cache-write-input-token-count": str(usage.cache_write)}
        if op.stream:
            sse = anthropic.stream_events(rules.id, reply.chunks(), usage, finish_reason=stop)
            events = [e for e in (event_json(raw_event) for raw_event in sse) if e is not None and e.get("type") != "ping"]
            return sse_response(bedrock_invoke.stream_frames(events, usage), fault,
                                headers | {"x-amzn-bedrock-content-type": "application/json"},
                                media_type=eventstream.CONTENT_TYPE, speaks="bedrock")
        return JSONResponse(anthropic.build_response(rules.id, reply.text, usage, finish_reason=stop), headers=headers)

    @app.post("/model/{model_id:path}/{path_op}")
    async def model_operation(model_id: str, path_op: str, request: Request) -> Response:
        return await operation(request, model_id, path_op)

    @app.post("/anthropic/v1/messages")
    async def messages(request: Request) -> Response:
        """Claude in Amazon Bedrock's Messages API: Anthropic's body and SSE, Bedrock's auth and cache."""
        raw = await request.body()
        tenant = authenticate(request, raw)
        body = await json_body(request)
        model = str(body.get("model", ""))
        rules = model_rules(ctx, model)
        check_sampling(body, rules.id)
        fault = await ctx.fault_for(request, "bedrock", model)
        result = ctx.simulator.respond("bedrock", body, now=ctx.clock(), tenant=tenant, model=model)
        reply = reply_for(prompt_text(result.conversation), body["max_tokens"])
        usage = replace(result.usage, output=reply.output_tokens)
        stop = "max_tokens" if reply.truncated else "end_turn"
        if result.conversation.stream:
            return sse_response(anthropic.stream_events(rules.id, reply.chunks(), usage, finish_reason=stop), fault,
                                speaks="anthropic")
        return JSONResponse(anthropic.build_response(rules.id, reply.text, usage, finish_reason=stop))
