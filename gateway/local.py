"""The seam to the in-process local backend.

A `LocalTarget` takes an OpenAI Chat Completions body and answers like an OpenAI-compatible server:
the response JSON, or (streaming) an async iterator of SSE bytes ending in `data: [DONE]`, with a
usage chunk when `stream_options.include_usage` is set. Routes to `kind: local` call it without HTTP;
`kind: openai_compatible` reaches the same engine (or vLLM, SGLang) over HTTP instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from prefixgate.errors import RequestError


class LocalTarget(Protocol):
    async def chat(self, body: dict, *, stream: bool) -> dict | AsyncIterator[bytes]: ...


class UnavailableLocalTarget:
    """Stands in when no local model is configured, so a local route fails with a message that says what to do."""

    def __init__(self, model: str) -> None:
        self.model = model

    async def chat(self, body: dict, *, stream: bool) -> dict | AsyncIterator[bytes]:
        raise RequestError(
            "no local model is configured: set local_model (PREFIXGATE_LOCAL_MODEL, e.g. smollm2-135m) to run the "
            "bundled engine in-process, or point a route at an OpenAI-compatible server such as `prefixgate backend`",
            status=503, kind="overloaded")


def in_process_target(model: str) -> LocalTarget:
    """The bundled engine behind the LocalTarget interface, when the local backend provides one."""
    if not model:
        return UnavailableLocalTarget(model)
    from prefixgate import local_backend

    return local_backend.local_target(model)
