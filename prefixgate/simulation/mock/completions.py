"""Mock OpenAI legacy completions and embeddings: `POST /v1/completions`, `POST /v1/embeddings`.

Neither is cached by OpenAI, so usage is a plain token count (prompt tokens, and for completions the
deterministic reply's tokens). Embeddings are fixed unit vectors seeded by the input's hash, returned as
floats or, as the openai SDK asks by default, base64 float32.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import uuid

from fastapi import FastAPI, Request

from prefixgate.dialects.validate import expect, require
from prefixgate.errors import RequestError
from prefixgate.simulation.mock.openai import authenticate
from prefixgate.simulation.mock.server import MockContext, json_body
from prefixgate.simulation.mock.text import reply_for
from prefixgate.tokens import count_tokens

DIMENSIONS = 16


def add_routes(app: FastAPI, ctx: MockContext) -> None:
    @app.post("/v1/completions")
    async def completions(request: Request) -> dict:
        authenticate(request)
        body = await json_body(request)
        await ctx.fault_for(request, "openai", body.get("model"))
        model = require(body, "model", str)
        prompt = require(body, "prompt", str)
        reply = reply_for(prompt, body.get("max_tokens", 16))
        prompt_tokens = count_tokens(prompt)
        return {"id": "cmpl-" + uuid.uuid4().hex[:24], "object": "text_completion", "created": int(ctx.clock()),
                "model": model, "choices": [{"text": reply.text, "index": 0, "logprobs": None,
                                             "finish_reason": "length" if reply.truncated else "stop"}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": reply.output_tokens,
                          "total_tokens": prompt_tokens + reply.output_tokens}}

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> dict:
        authenticate(request)
        body = await json_body(request)
        await ctx.fault_for(request, "openai", body.get("model"))
        model = require(body, "model", str)
        raw = require(body, "input", (str, list))
        texts = [raw] if isinstance(raw, str) else [expect(t, str, f"input.{i}") for i, t in enumerate(raw)]
        if not texts:
            raise RequestError("input: must not be empty", field="input")
        fmt = body.get("encoding_format", "float")
        if fmt not in ("float", "base64"):
            raise RequestError(f"encoding_format: must be 'float' or 'base64', got {fmt!r}", field="encoding_format")
        data = [{"object": "embedding", "index": i, "embedding": _vector(t, fmt)} for i, t in enumerate(texts)]
        tokens = sum(count_tokens(t) for t in texts)
        return {"object": "list", "data": data, "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def _vector(text: str, fmt: str) -> list[float] | str:
    digest = hashlib.sha256(text.encode()).digest()
    raw = [b - 127.5 for b in digest[:DIMENSIONS]]
    norm = sum(v * v for v in raw) ** 0.5 or 1.0
    vector = [v / norm for v in raw]
    return vector if fmt == "float" else base64.b64encode(struct.pack(f"<{DIMENSIONS}f", *vector)).decode()
