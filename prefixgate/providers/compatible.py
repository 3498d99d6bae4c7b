"""Hosted providers that speak OpenAI's Chat Completions API, and what sets each apart from OpenAI.

Their bodies and streams are OpenAI's (the `openai` wire format, and the `responses` one where a provider serves
the Responses API itself: Azure's v1 API, xAI); what differs is data kept here: where
the key goes, how the URL is built (Azure names a deployment, not a model, and wants `api-version`), the
usual key variable, how the provider reports cache use (parsed in `dialects/openai.parse_usage`:
DeepSeek's hit/miss split, OpenRouter's `usage.cost`, the others' `prompt_tokens_details.cached_tokens`),
and which of its models cache only where Anthropic-style `cache_control` markers say (OpenRouter passes
them through to Claude and Gemini models; every other model there, and every other provider, caches by
prefix automatically).
Sources: /work/shared/reference/responses-bedrock-vertex.md section 4 (P1-P9).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from prefixgate.model_ids import path_model


@dataclass(frozen=True)
class Profile:
    name: str
    default_url: str                 # the provider's documented base URL (with its /v1, where it has one)
    key_env: tuple[str, ...]         # the usual environment variable of its key
    key_header: str = "authorization"   # "api-key": Azure's key header (sent bare, not as a Bearer token)
    deployments: bool = False        # Azure: /openai/deployments/{deployment}/chat/completions?api-version=
    # Model-name prefixes whose models the provider caches by `cache_control` breakpoints on content parts
    # (Claude's rules: up to 4, 5-minute TTL, writes billed), not automatically.
    marker_models: tuple[str, ...] = ()
    # Serves the Responses API itself: a Responses caller goes out untranslated (its stored responses,
    # `previous_response_id` chains, reasoning items and server-side tools survive), at `responses_url`.
    responses: bool = False


# Router slugs of the models that cache at Anthropic-style `cache_control` breakpoints on Chat Completions
# content parts (Claude's, and Gemini's, which take them too): OpenRouter's naming, which other routers copy.
MARKER_MODELS = ("anthropic/", "google/gemini")

PROFILES: dict[str, Profile] = {p.name: p for p in (
    # https://openrouter.ai/docs/features/prompt-caching: Anthropic models need cache_control to cache at
    # all; Gemini models take it too. Other models there cache automatically.
    Profile("openrouter", "https://openrouter.ai/api/v1", ("OPENROUTER_API_KEY",),
            marker_models=MARKER_MODELS),
    Profile("deepseek", "https://api.deepseek.com", ("DEEPSEEK_API_KEY",)),
    Profile("xai", "https://api.x.ai/v1", ("XAI_API_KEY",), responses=True),
    Profile("mistral", "https://api.mistral.ai/v1", ("MISTRAL_API_KEY",)),
    Profile("groq", "https://api.groq.com/openai/v1", ("GROQ_API_KEY",)),
    Profile("together", "https://api.together.xyz/v1", ("TOGETHER_API_KEY",)),
    Profile("fireworks", "https://api.fireworks.ai/inference/v1", ("FIREWORKS_API_KEY",)),
    # https://{resource}.openai.azure.com; there is no default resource. Its v1 API (/openai/v1/responses, no
    # api-version) serves the Responses API with the deployment in the body's model.
    Profile("azure", "", ("AZURE_OPENAI_API_KEY",), key_header="api-key", deployments=True, responses=True),
)}


def chat_url(profile: Profile, base_url: str, model: str, api_version: str = "") -> str:
    """The Chat Completions URL for `model` (an Azure deployment name on Azure)."""
    if profile.deployments:
        return (f"{base_url}/openai/deployments/{path_model(model)}/chat/completions"
                f"?api-version={quote(api_version, safe='')}")
    return base_url + api_path(profile, base_url, "/chat/completions")


def responses_url(profile: Profile, base_url: str) -> str:
    """The Responses API's URL at a provider that serves it (the body's `model` names an Azure deployment)."""
    return base_url + api_path(profile, base_url, "/responses")


def api_path(profile: Profile | None, base_url: str, tail: str) -> str:
    """`tail` (`/responses/{id}`, `/files`) under the OpenAI-style API root at `base_url`: Azure's v1 API
    (`/openai/v1`, which takes no `api-version`), else the URL's own /v1."""
    if profile is not None and profile.deployments:
        return f"/openai/v1{tail}"
    return tail if base_url.endswith("/v1") else f"/v1{tail}"


def auth_headers(profile: Profile, key: str) -> dict[str, str]:
    if profile.key_header == "authorization":
        return {"authorization": f"Bearer {key}"}
    return {profile.key_header: key}


def caches_by_markers(profile: Profile | None, model: str) -> bool:
    """Whether `model` on this provider caches only at the `cache_control` breakpoints a request carries,
    so the planner places them by Claude's rules (else the provider caches by prefix, as OpenAI does)."""
    return bool(profile and profile.marker_models and model.startswith(profile.marker_models))


def profile_planner(profile: Profile | None, model: str) -> str:
    """Whose caching rules plan a request for `model` on this provider: Claude's at the breakpoints the request
    carries for a marker model, else OpenAI's automatic prefix caching."""
    return "anthropic" if caches_by_markers(profile, model) else "openai"


def writes_cache_control(model: str) -> bool:
    """Whether a Chat Completions request for `model` marks its breakpoints Anthropic's way (`cache_control`
    on content parts) rather than OpenAI's (`prompt_cache_breakpoint`)."""
    return model.startswith(MARKER_MODELS)
