"""Which HTTP calls of a wrapped client the SDK wrapper plans and prices, told from method and URL path.

Everything else (model lists, files, batches, token counting) passes through untouched and unrecorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from prefixgate.dialects.openai import AZURE_PATH

Provider = Literal["openai", "anthropic", "gemini"]
Kind = Literal["generate", "cache_create", "cache_update", "cache_delete"]

# `.../models/{model}:generateContent` on the Gemini API and on Vertex (`.../publishers/google/models/...`).
_GEMINI_GENERATE = re.compile(r"/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$")
_GEMINI_CACHES = re.compile(r"/cachedContents(?:/(?P<id>[^/:]+))?$")


@dataclass(frozen=True)
class Endpoint:
    provider: Provider
    kind: Kind
    # Gemini puts the model and the streaming choice in the path; the other two put them in the body.
    model: str | None = None
    streams: bool = False
    name: str | None = None       # a cachedContents resource name
    api: str | None = None        # the wire format when the provider has more than one ("responses")
    deployment: str | None = None  # Azure OpenAI's deployment, where the path names one

    @property
    def dialect(self) -> str:
        return self.api or self.provider


def endpoint_of(provider: Provider, method: str, path: str) -> Endpoint | None:
    """The planned endpoint a request goes to, or None when the wrapper should let it pass."""
    method = method.upper()
    if provider == "openai":
        if method != "POST":
            return None
        if path.endswith("/chat/completions"):
            azure = AZURE_PATH.search(path)
            return Endpoint("openai", "generate", deployment=unquote(azure.group(1)) if azure else None)
        # `responses.create`, `.stream` and `.parse` all POST `/responses` (its sub-paths pass through).
        return Endpoint("openai", "generate", api="responses") if path.endswith("/responses") else None
    if provider == "anthropic":
        return Endpoint("anthropic", "generate") if method == "POST" and path.endswith("/v1/messages") else None
    if method == "POST" and path.endswith("/interactions"):
        # `client.interactions.create` (google-genai 3.6+), whole or streamed (a body field); the model is in the body.
        return Endpoint("gemini", "generate", api="interactions")
    found = _GEMINI_GENERATE.search(path)
    if found and method == "POST":
        return Endpoint("gemini", "generate", model=found["model"], streams=found["method"] == "streamGenerateContent")
    found = _GEMINI_CACHES.search(path)
    if found is None:
        return None
    cache_id = found["id"]
    if cache_id is None:
        return Endpoint("gemini", "cache_create") if method == "POST" else None
    kinds: dict[str, Kind] = {"PATCH": "cache_update", "DELETE": "cache_delete"}
    return Endpoint("gemini", kinds[method], name=f"cachedContents/{cache_id}") if method in kinds else None


def gemini_cache_url(path: str) -> str | None:
    """Where `cachedContents.create` lives for a Gemini API generate path (`/v1beta/models/m:...` ->
    `/v1beta/cachedContents`); None on Vertex, whose cache resources need a project and location."""
    found = _GEMINI_GENERATE.search(path)
    if found is None or "/publishers/" in path:
        return None
    return path[:found.start()] + "/cachedContents"
