"""What Vertex AI's wire formats (Claude's rawPredict, Gemini's generateContent) share: the project/location
paths, the upstream's resource root, and the gateway's Google OAuth2 token on every upstream request.

A Vertex upstream's URL is its resource root, `{base}/v1/projects/{project}/locations/{location}` (the
base is `https://{location}-aiplatform.googleapis.com`, or `https://aiplatform.googleapis.com` for
`global`). Claude is served under `v1`; Gemini under `v1beta1`, the version google-genai uses on Vertex.
Callers reach the gateway on the same paths (also under `/vertex_ai`, the prefix Claude Code setups name
in ANTHROPIC_VERTEX_BASE_URL); the project and location a caller names are its own business: the gateway
calls Vertex in its upstream's project, with its own credentials.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from prefixgate.errors import RequestError
from prefixgate.google_token import GoogleAuthError, GoogleToken

# [/vertex_ai]/{v1|v1beta1}/projects/{p}/locations/{l}/publishers/{publisher}/models/{model}:{method}
_MODEL_PATH = re.compile(r"^(?:/vertex_ai)?/(?:v1|v1beta1)/projects/[^/]+/locations/[^/]+/publishers/"
                         r"(?P<publisher>anthropic|google)/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$")
# [/vertex_ai]/{v1|v1beta1}/projects/{p}/locations/{l}/{rest}: any Vertex resource path.
_RESOURCE_PATH = re.compile(r"^(?:/vertex_ai)?/(?:v1|v1beta1)/projects/[^/]+/locations/[^/]+(?P<rest>/.*)?$")
_ROOT = re.compile(r"^(?P<base>.*)/v1/(?P<scope>projects/[^/]+/locations/[^/]+)$")


@dataclass(frozen=True)
class ModelCall:
    publisher: str      # "anthropic" or "google"
    model: str          # as the caller named it, decoded (claude-haiku-4-5@20251001)
    method: str         # rawPredict, streamRawPredict, generateContent, streamGenerateContent, countTokens


def model_call(path: str) -> ModelCall | None:
    """The publisher model method a Vertex path names, or None when it is not one."""
    if "/publishers/" not in path:
        return None         # every model request of another format asks this: a substring test, no regex
    match = _MODEL_PATH.match(path)
    return ModelCall(match["publisher"], unquote(match["model"]), match["method"]) if match else None


def resource_rest(path: str) -> str | None:
    """The part of a Vertex resource path after `projects/{p}/locations/{l}` ("" for the location itself),
    or None when `path` is not a Vertex resource path."""
    match = _RESOURCE_PATH.match(path)
    return (match["rest"] or "") if match else None


def is_vertex_path(path: str) -> bool:
    return _RESOURCE_PATH.match(path) is not None


def default_base_url(location: str) -> str:
    """Vertex's endpoint for a location: regional hosts, one global host."""
    return "https://aiplatform.googleapis.com" if location == "global" else f"https://{location}-aiplatform.googleapis.com"


def resource_root(base_url: str, project: str, location: str) -> str:
    """A Vertex upstream's URL: where its publisher models and cachedContents live."""
    return f"{base_url.rstrip('/')}/v1/projects/{project}/locations/{location}"


def base_url_for(location: str) -> str:
    """PREFIXGATE_VERTEX_BASE_URL (a mock, a proxy), else Vertex's own host for `location`."""
    return os.environ.get("PREFIXGATE_VERTEX_BASE_URL") or default_base_url(location)


def gateway_project() -> str:
    """The gateway's own Google Cloud project as google-auth's `default()` finds it without a network call:
    GOOGLE_CLOUD_PROJECT (or the legacy GCLOUD_PROJECT), else the `project_id` of the service-account key in
    GOOGLE_APPLICATION_CREDENTIALS; "" when none names one (a VM's metadata server is not asked: a start-up would
    wait on it)."""
    named = os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("GCLOUD_PROJECT")
    if named:
        return named
    try:
        with open(os.environ.get("GOOGLE_APPLICATION_CREDENTIALS") or os.devnull, encoding="utf-8") as f:
            key = json.loads(f.read() or "{}")
    except (OSError, ValueError):
        return ""       # the token's lookup reports an unusable file, per request
    project = key.get("project_id") if isinstance(key, dict) and key.get("type") == "service_account" else None
    return project if isinstance(project, str) else ""


def has_project(root: str) -> bool:
    """Whether a resource root names a project (the built-in upstream's lacks one when none was found)."""
    return _ROOT.match(root) is not None


def split_root(root: str) -> tuple[str, str]:
    """(base URL, `projects/{p}/locations/{l}`) of a resource root; a clear error for the built-in upstream
    when the gateway was given no project: the operator's to fix, so no SDK is led to retry it (501, with
    `x-should-retry: false`; Google's UNIMPLEMENTED, which google-genai's retries skip)."""
    match = _ROOT.match(root)
    if match is None:
        raise RequestError("the gateway has no Google Cloud project for Vertex AI: set GOOGLE_CLOUD_PROJECT (and "
                           "GOOGLE_CLOUD_LOCATION) on the gateway, or name them on a vertex upstream in the policy",
                           status=501, kind="not_configured")
    return match["base"], match["scope"]


def location_of(root: str) -> str:
    """The location of a resource root (`global` where it names none: a root with no project serves nothing)."""
    match = _ROOT.match(root)
    return match["scope"].rsplit("/", 1)[1] if match else "global"


def versioned(root: str, version: str) -> str:
    """The resource root under another API version (`v1beta1`)."""
    base, scope = split_root(root)
    return f"{base}/{version}/{scope}"


class GoogleSigned:
    """Vertex's upstream auth, for a WireFormat: a static bearer token when the gateway has one
    (PREFIXGATE_VERTEX_ACCESS_TOKEN, sent by `auth_headers`), else the process's application default
    credentials' access token, kept in the upstream client's signing state and refreshed before expiry."""

    signs = True

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"}

    async def sign(self, method: str, url: str, headers: dict[str, str], body: bytes | None,
                   state: dict[str, Any]) -> dict[str, str]:
        if "authorization" in headers:
            return headers          # the gateway's static token
        return {**headers, "authorization": f"Bearer {await _token(state)}"}

    async def reauthenticate(self, state: dict[str, Any]) -> bool:
        await _token(state, force=True)
        return True


async def _token(state: dict[str, Any], *, force: bool = False) -> str:
    google: GoogleToken = state.setdefault("google", GoogleToken())
    try:
        return await google.token(force=force)
    except GoogleAuthError as e:
        raise RequestError(str(e), status=401, kind="authentication") from None
