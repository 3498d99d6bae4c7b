"""The engine's OpenAI-compatible front end, without HTTP: one body in, a response dict or SSE bytes out.

`prefixgate backend` serves it over HTTP; the gateway calls it in-process for `kind: local` routes
(the `LocalTarget` seam), so both paths share parsing, errors, streaming and usage.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from prometheus_client import Metric
from prometheus_client.core import GaugeMetricFamily

from prefixgate.errors import RequestError, error_body
from prefixgate.local_backend.async_engine import AsyncEngine, RequestStream
from prefixgate.local_backend.metrics import EngineMetrics
from prefixgate.local_backend.outputs import RequestOutput
from prefixgate.local_backend.protocol import ChunkWriter, ParsedRequest, parse_request, response

log = logging.getLogger("prefixgate.local_backend")
STATUSES = ("loaded", "not loaded", "failed")


def _sse(data: Any) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


class ClientGone(Exception):
    """The caller disconnected before its answer was ready; the request was aborted."""


class EventStream:
    """A streamed request's SSE events. Closing it aborts the request if unfinished, even when iteration never
    began (the gateway closes a stream whose client left before its body started): the generator's own
    cleanup only runs once it has started, and the engine would otherwise compute the whole answer."""

    def __init__(self, events: AsyncGenerator[bytes, None], outputs: RequestStream) -> None:
        self._events, self._outputs = events, outputs

    def __aiter__(self) -> EventStream:
        return self

    def __anext__(self) -> Awaitable[bytes]:
        return self._events.__anext__()

    async def aclose(self) -> None:
        try:
            await self._events.aclose()
        finally:
            self._outputs.close()


class Frontend:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.model = engine.model_name

    async def chat(self, body: dict, *, stream: bool | None = None, cache_salt: str | None = None) -> dict | AsyncIterator[bytes]:
        return await self.serve(body, chat=True, cache_salt=cache_salt)

    async def serve(self, body: Any, *, chat: bool, cache_salt: str | None = None,
                    is_disconnected: Callable[[], Awaitable[bool]] | None = None) -> dict | AsyncIterator[bytes]:
        """A Chat Completions (`chat`) or Completions body: the response JSON, or its SSE events.
        Raises RequestError (400 naming the field, 429 when the queue is full) before anything is queued,
        and ClientGone when `is_disconnected` says the caller left before a non-streamed answer was ready."""
        req = parse_request(body, chat=chat, model_name=self.model)
        if cache_salt is not None:
            req.cache_salt = cache_salt
        prompt = {"prompt_token_ids": self.engine.engine.apply_chat_template(req.prompt)} if chat else req.prompt
        outputs = self.engine.add_request(prompt, req.params, request_id=req.id, cache_salt=req.cache_salt,
                                          priority=req.priority)
        if req.stream:
            return EventStream(self._events(req, outputs), outputs)
        final: RequestOutput | None = None
        async for out in outputs:
            final = out
            if not out.finished and is_disconnected is not None and await is_disconnected():
                raise ClientGone  # leaving the loop aborts the request and frees its blocks
        return response(req, final, self.model)

    async def _events(self, req: ParsedRequest, outputs: RequestStream) -> AsyncIterator[bytes]:
        # A consumer that stops early (client gone) closes this generator; the request stream's own
        # cleanup then aborts the request, which frees its KV blocks before the next step.
        writer = ChunkWriter(req, self.model)
        first = writer.first()
        if first is not None:
            yield _sse(first)
        last = None
        try:
            async for out in outputs:
                last = out
                chunk = writer.update(out)
                if chunk is not None:
                    yield _sse(chunk)
        except RequestError as err:
            yield _sse(error_body(err, "openai"))
            return
        if req.include_usage and last is not None:
            yield _sse(writer.usage_chunk(last))
        yield b"data: [DONE]\n\n"


class InProcessTarget:
    """The gateway's `LocalTarget`: the bundled engine in this process, loaded on first use."""

    def __init__(self, model: str, **engine_options: Any) -> None:
        self.model, self.options = model, engine_options
        self._frontend: Frontend | None = None
        self._metrics: EngineMetrics | None = None
        self._failure: str | None = None

    def _load(self) -> Frontend:
        if self._frontend is None:
            engine = AsyncEngine.from_options(self.model, **self.options)
            # `prefixgate backend`'s own metrics, fed the same way: after each step, on the engine thread.
            self._metrics = EngineMetrics(engine.engine)
            engine.observer = self._metrics.observe
            engine.start()
            self._frontend = Frontend(engine)
        return self._frontend

    @property
    def status(self) -> str:
        """For `/health`: `loaded`, `not loaded` (before the gateway's start loads it) or `failed` (the log says why:
        the reason can name paths, and `/health` answers anyone)."""
        return "loaded" if self._frontend is not None else "failed" if self._failure else "not loaded"

    def collect(self) -> Iterator[Metric]:
        """For the gateway's `/metrics`: `prefixgate_local_backend_status` (one series per /health status, 1 on
        the current one) and, once loaded, the engine's `prefixgate_backend_*` as `prefixgate backend` serves them
        (counters and histograms are thread-safe; gauges read single values the engine thread keeps)."""
        status = GaugeMetricFamily("prefixgate_local_backend_status", "The in-process local model's state, as "
                                   "/health's local_backend.status says it (1 on the current one)",
                                   labels=["model_name", "status"])
        current = self.status
        for state in STATUSES:
            status.add_metric([self.model, state], float(state == current))
        yield status
        metrics = self._metrics
        if metrics is not None and current == "loaded":
            yield from metrics.registry.collect()

    async def start(self) -> None:
        """Load the model off the event loop (seconds from the converted cache, longer the first time).
        A model that cannot load leaves the gateway serving its other routes; local ones answer 503."""
        try:
            await asyncio.to_thread(self._load)
            self._failure = None
        except Exception as e:  # noqa: BLE001 (any load failure is reported the same way)
            self._failure = f"the local model {self.model!r} could not be loaded: {e}"
            log.error("%s", self._failure)

    async def chat(self, body: dict, *, stream: bool) -> dict | AsyncIterator[bytes]:
        if self._frontend is None and self._failure is None:
            await self.start()
        if self._frontend is None:
            raise RequestError(self._failure or "the local model is not loaded", status=503, kind="overloaded")
        # Routes may alias the model ("local", "smollm2"); the engine serves one model under its own name.
        return await self._frontend.chat({**body, "model": self._frontend.model}, stream=stream)

    def close(self) -> None:
        """Stop the engine and let go of it: whatever still holds this target after the gateway stopped
        (FastAPI keeps every endpoint it classified, closures included, in a process-wide cache) must not
        keep the weights and the KV pool, GBs for the bundled model, alive. A closed target answers 503."""
        frontend, self._frontend, self._metrics = self._frontend, None, None
        self._failure = f"the local model {self.model!r} was shut down with the gateway"
        if frontend is not None:
            frontend.engine.shutdown()


def local_target(model: str, **engine_options: Any) -> InProcessTarget:
    return InProcessTarget(model, **engine_options)
