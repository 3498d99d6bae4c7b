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
    """Stands in when no engine is wired in, so a local route fails with a message that says what to do."""

    def __init__(self, model: str) -> None:
        self.model = model

    async def chat(self, body: dict, *, stream: bool) -> dict | AsyncIterator[bytes]:
        raise RequestError(
            f"the in-process local backend for {self.model or 'the local model'!r} is not available in this build; "
            "set backend_url (PREFIXGATE_BACKEND_URL) to an OpenAI-compatible server such as `prefixgate backend`",
            status=503, kind="overloaded")


def in_process_target(model: str) -> LocalTarget:
    """The bundled engine behind the LocalTarget interface, when the local backend provides one."""
    from prefixgate import local_backend

    factory = getattr(local_backend, "local_target", None)
    return factory(model) if factory is not None else UnavailableLocalTarget(model)
