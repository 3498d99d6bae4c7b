"""Claude on Vertex AI: `publishers/anthropic/models/{model}:rawPredict` and `:streamRawPredict`.

The body is Anthropic's Messages body without `model` (the path names it) and with
`anthropic_version: vertex-2023-10-16`; `stream` stays in the body (AnthropicVertex keeps it and picks
`streamRawPredict` from it). Answers, streams (plain Anthropic SSE), usage and cache markers
(`cache_control`, planned under Claude's rules) are Anthropic's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from prefixgate.dialects import anthropic
from prefixgate.dialects.neutral import Chat
from prefixgate.dialects.validate import load_resent
from prefixgate.dialects.vertex import GoogleSigned, model_call, versioned
from prefixgate.dialects.wire import Parse
from prefixgate.errors import RequestError, error_body
from prefixgate.ir import Conversation
from prefixgate.model_ids import path_model

NAME = "vertex_anthropic"
VERSION = "vertex-2023-10-16"
METHODS = {"rawPredict": False, "streamRawPredict": True}
# Claude's token count on Vertex is this pseudo-model's rawPredict, not a model request.
COUNT_TOKENS = "count-tokens"


def parse_request(body: bytes | str | dict, *, model: str, stream: bool = False) -> Conversation:
    """A rawPredict body as a Conversation; the model comes from the path, streaming from the path or body."""
    # Claude Code and other agents resend their conversation: the Anthropic parser's memo of recent bodies.
    data, resent = load_resent(body, "messages", anthropic.BODIES)
    if "model" in data:
        raise RequestError("model: not allowed in a Vertex rawPredict body (the path names the model)", field="model")
    conv = anthropic.conversation({"model": model, **data}, resent)
    conv.params.pop("model", None)
    conv.field_order.remove("model")
    conv.dialect, conv.stream = NAME, stream or conv.stream
    return conv


def encode_request(conv: Conversation) -> dict:
    body = anthropic.encode_request(conv)
    body.pop("model", None)
    return body


class VertexAnthropic(GoogleSigned, anthropic.AnthropicMessages):
    """rawPredict with Claude: Anthropic's body, events and errors; Vertex's paths and Google's OAuth token."""

    name = NAME
    span_name = "POST /v1/projects/{project}/locations/{location}/publishers/anthropic/models/{model}"
    model_in_body = False
    upstream_headers: dict[str, str] = {}     # the API version travels in the body

    def parser_for(self, path: str) -> Parse | None:
        call = model_call(path)
        if call is None or call.publisher != "anthropic" or call.method not in METHODS or call.model == COUNT_TOKENS:
            return None
        return lambda body: parse_request(body, model=call.model, stream=METHODS[call.method])

    def owns_path(self, path: str) -> bool:
        call = model_call(path)
        return call is not None and call.publisher == "anthropic"

    def parse_request(self, body: bytes | str | dict, *, model: str | None = None) -> Conversation:
        return parse_request(body, model=model or "")

    def encode_request(self, conv: Conversation) -> dict:
        return encode_request(conv)

    def billable(self, conv: Conversation) -> Conversation:
        """Vertex needs the API version in the body, and `stream: true` for streamRawPredict."""
        wanted = {"anthropic_version": VERSION, **({"stream": True} if conv.stream else {})}
        missing = {k: v for k, v in wanted.items() if k not in conv.params}
        if not missing:
            return conv
        return replace(conv, params={**conv.params, **missing}, field_order=[*missing, *conv.field_order])

    def error_body(self, err: RequestError) -> dict:
        return error_body(err, anthropic.NAME)

    def adopt(self, conv: Conversation, headers: Mapping[str, str]) -> Conversation | None:
        """An Anthropic Messages request as rawPredict takes it: every block and marker as the caller sent it."""
        if conv.dialect != anthropic.NAME:
            return None
        params = {k: v for k, v in conv.params.items() if k != "model"}
        order = [k for k in conv.field_order if k != "model"]
        return self.billable(replace(conv, dialect=NAME, params=params, field_order=order))

    def write_chat(self, chat: Chat, model: str) -> dict:
        body = anthropic.write_chat(chat, model)
        body.pop("model", None)
        return {"anthropic_version": VERSION, **body}

    def upstream_url(self, base_url: str, model: str, stream: bool) -> str:
        method = "streamRawPredict" if stream else "rawPredict"
        return f"{versioned(base_url, 'v1')}/publishers/anthropic/models/{path_model(model)}:{method}"

    def resource_url(self, base_url: str, path: str) -> str:
        # Through split_root, as model calls: a root with no project is the gateway's 501, never `projects//`.
        return versioned(base_url, "v1") + path


WIRE = VertexAnthropic()
