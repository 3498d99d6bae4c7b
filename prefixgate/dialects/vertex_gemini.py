"""Gemini on Vertex AI: `publishers/google/models/{model}:generateContent` and `:streamGenerateContent`.

Bodies, answers, streams, usage and errors are the Gemini API's. What differs: the project/location paths
(`v1beta1`, as google-genai uses on Vertex), Google's OAuth token instead of an API key, and explicit caches
(`cachedContents`) that are resources of the project and location, created with the model's full resource
name (`projects/{p}/locations/{l}/publishers/google/models/{m}`: Vertex refuses `models/{m}`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from prefixgate.dialects import gemini
from prefixgate.dialects.vertex import GoogleSigned, is_vertex_path, model_call, split_root, versioned
from prefixgate.dialects.wire import Parse
from prefixgate.errors import RequestError, error_body
from prefixgate.ir import Conversation
from prefixgate.model_ids import path_model

NAME = "vertex_gemini"
VERSION = "v1beta1"
CACHE_FIELDS = ("cachedContent", "cached_content")
# A cache's name: `cachedContents/{id}`, with or without `projects/{p}/locations/{l}/` before it.
_CACHE_NAME = re.compile(r"(?:projects/[^/]+/locations/[^/]+/)?cachedContents/(?P<id>[^/]+)")


class VertexGemini(GoogleSigned, gemini.GeminiGenerate):
    name = NAME
    span_name = "POST /v1beta1/projects/{project}/locations/{location}/publishers/google/models/{model}"
    explicit_cache_path = "/cachedContents"

    def parser_for(self, path: str) -> Parse | None:
        call = model_call(path)
        if call is None or call.publisher != "google":
            return None
        parse = gemini.generate_parser(f"{call.model}:{call.method}")
        if parse is None:
            return None
        return lambda body: replace(parse(body), dialect=NAME)

    def owns_path(self, path: str) -> bool:
        # Every Vertex path but Claude's (claimed first) answers in Google's error shape: cachedContents too.
        return is_vertex_path(path)

    def parse_request(self, body: bytes | str | dict, *, model: str | None = None) -> Conversation:
        return replace(gemini.parse_request(body, model=model), dialect=NAME)

    def error_body(self, err: RequestError) -> dict:
        return error_body(err, gemini.NAME)

    def adopt(self, conv: Conversation, headers: Mapping[str, str]) -> Conversation | None:
        """A Gemini API request as Vertex takes it: the same body."""
        return replace(conv, dialect=NAME) if conv.dialect == gemini.NAME else None

    def upstream_url(self, base_url: str, model: str, stream: bool) -> str:
        action = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return f"{versioned(base_url, VERSION)}/publishers/google/models/{path_model(model)}:{action}"

    def resource_url(self, base_url: str, path: str) -> str:
        return versioned(base_url, VERSION) + path

    def at_upstream(self, conv: Conversation, base_url: str) -> Conversation:
        """A cache named under the caller's project and location (google-genai expands `cachedContents/{id}` with
        the client's own) named under the upstream's, where the gateway created it."""
        params = caches_at(conv.params, base_url)
        return conv if params is conv.params else replace(conv, params=params)

    def explicit_cache_body(self, base_url: str, body: dict) -> dict:
        model = str(body.get("model", "")).removeprefix("models/")
        if model.startswith("projects/"):
            return body
        return {**body, "model": f"{split_root(base_url)[1]}/publishers/google/models/{model}"}


def caches_at(fields: dict, base_url: str) -> dict:
    """`fields` (a generateContent or countTokens body, or its params) with the cache it names under the project and
    location of the upstream at `base_url`; `fields` itself when nothing changes."""
    out = dict(fields)
    for key in CACHE_FIELDS:
        if isinstance(out.get(key), str) and (match := _CACHE_NAME.fullmatch(out[key])):
            out[key] = f"{split_root(base_url)[1]}/cachedContents/{match['id']}"
    return fields if out == fields else out


WIRE = VertexGemini()
