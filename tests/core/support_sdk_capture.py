"""Real SDK clients wired to an in-memory httpx transport: captures the exact request bodies the
SDKs send, and answers with responses built by our dialect emitters (so the SDKs also parse those)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx2 as httpx  # the provider SDKs now build on httpx2, a drop-in fork of httpx

from prefixgate.dialects import anthropic as an
from prefixgate.dialects import gemini as ge
from prefixgate.dialects import openai as oa
from prefixgate.usage import Usage

USAGE = Usage(uncached_input=50, cache_read=2048, cache_writes={"5m": 100, "1h": 30}, output=7)
TEXT_CHUNKS = ["Hello", ", ", "world"]


@dataclass
class Capture:
    requests: list[httpx.Request] = field(default_factory=list)
    usage: Usage = USAGE
    # Set to an (status, body) pair to answer with an error instead.
    error: tuple[int, dict] | None = None

    @property
    def bodies(self) -> list[dict]:
        return [json.loads(r.content) for r in self.requests if r.content]

    def transport(self, respond: Callable[[httpx.Request, dict], httpx.Response]) -> httpx.MockTransport:
        def handler(request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            if self.error:
                return httpx.Response(self.error[0], json=self.error[1])
            body = json.loads(request.content) if request.content else {}
            return respond(request, body)

        return httpx.MockTransport(handler)


def _sse(events) -> httpx.Response:
    return httpx.Response(200, content=b"".join(events), headers={"content-type": "text/event-stream"})


def anthropic_client(cap: Capture):
    import anthropic

    def respond(request: httpx.Request, body: dict) -> httpx.Response:
        if request.url.path.endswith("/count_tokens"):
            return httpx.Response(200, json={"input_tokens": 42})
        if body.get("stream"):
            return _sse(an.stream_events(body["model"], TEXT_CHUNKS, cap.usage))
        return httpx.Response(200, json=an.build_response(body["model"], "".join(TEXT_CHUNKS), cap.usage))

    return anthropic.Anthropic(api_key="sk-test", base_url="http://sdk.test",
                               http_client=httpx.Client(transport=cap.transport(respond)), max_retries=0)


def openai_client(cap: Capture):
    import openai

    def respond(request: httpx.Request, body: dict) -> httpx.Response:
        if body.get("stream"):
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            return _sse(oa.stream_events(body["model"], TEXT_CHUNKS, cap.usage, include_usage=include))
        return httpx.Response(200, json=oa.build_response(body["model"], "".join(TEXT_CHUNKS), cap.usage))

    return openai.OpenAI(api_key="sk-test", base_url="http://sdk.test/v1",
                         http_client=httpx.Client(transport=cap.transport(respond)), max_retries=0)


def gemini_client(cap: Capture):
    from google import genai
    from google.genai import types

    def respond(request: httpx.Request, body: dict) -> httpx.Response:
        model = request.url.path.split("/models/")[-1].split(":")[0]
        if ":streamGenerateContent" in request.url.path:
            return _sse(ge.stream_events(model, TEXT_CHUNKS, cap.usage))
        return httpx.Response(200, json=ge.build_response(model, "".join(TEXT_CHUNKS), cap.usage))

    options = types.HttpOptions(base_url="http://sdk.test", httpx_client=httpx.Client(transport=cap.transport(respond)),
                                retry_options=types.HttpRetryOptions(attempts=1))
    return genai.Client(api_key="sk-test", http_options=options)
