"""Building the policy the gateway runs: the built-in upstreams, a YAML file, or the zero-config default."""

from __future__ import annotations

import os

from prefixgate.config import Settings
from prefixgate.dialects import vertex
from prefixgate.policies.kinds import KINDS
from prefixgate.policies.schema import Policy, PolicyError, Upstream
from prefixgate.sigv4 import aws_region
from prefixgate.yaml_file import YamlFileError, read_mapping

# Model families the zero-config policy recognises, by provider.
FAMILIES: dict[str, list[str]] = {
    "openai": ["gpt-*", "chatgpt-*", "o1*", "o3*", "o4*", "codex-*", "ft:*", "text-embedding-*"],
    "anthropic": ["claude-*"],
    "gemini": ["gemini-*", "gemma-*", "learnlm-*"],
    # Bedrock model ids: a provider prefix, optionally an inference profile's geography, or an ARN.
    "bedrock": ["anthropic.*", "*.anthropic.*", "arn:aws*:bedrock:**"],
}


def builtin_upstreams(settings: Settings) -> dict[str, Upstream]:
    """`anthropic`, `openai`, `gemini`, `bedrock`, `vertex` at the configured base URLs, and `local`: the in-process engine,
    or the OpenAI-compatible server at `backend_url` when one is set."""
    ups = {
        "anthropic": Upstream("anthropic", "anthropic", settings.anthropic_base_url.rstrip("/"), ("ANTHROPIC_API_KEY",)),
        "openai": Upstream("openai", "openai", settings.openai_base_url.rstrip("/"), ("OPENAI_API_KEY",)),
        "gemini": Upstream("gemini", "gemini", settings.gemini_base_url.rstrip("/"), ("GEMINI_API_KEY", "GOOGLE_API_KEY")),
        "bedrock": Upstream("bedrock", "bedrock", settings.bedrock_base_url.format(region=aws_region()).rstrip("/"),
                            KINDS["bedrock"].key_envs),
    }
    # Vertex AI in the gateway's own project (GOOGLE_CLOUD_PROJECT or its service-account key's; without one, a
    # policy routing here does not load, and zero config's Vertex paths answer what to set).
    location = os.environ.get("GOOGLE_CLOUD_LOCATION") or "global"
    base = settings.vertex_base_url or vertex.default_base_url(location)
    ups["vertex"] = Upstream("vertex", "vertex", vertex.resource_root(base, vertex.gateway_project(), location),
                             KINDS["vertex"].key_envs)
    if settings.backend_url:
        # The key `prefixgate backend --api-key` reads, so the pair works with one variable set for both.
        ups["local"] = Upstream("local", "openai_compatible", settings.backend_url.rstrip("/"),
                                api_key_env=("PREFIXGATE_BACKEND_API_KEY",))
    else:
        ups["local"] = Upstream("local", "local")
    return ups


def default_policy_data(settings: Settings) -> dict:
    """Zero config: requests on Vertex's paths go to Vertex, each model family to its provider, the local model
    to the local backend, and
    (with a backend URL) every other name to that backend."""
    # Vertex's own paths go to Vertex, whatever the model (Claude and Gemini names are the same as elsewhere).
    routes: list[dict] = [{"name": "vertex", "models": ["**"], "formats": ["vertex_anthropic", "vertex_gemini"],
                           "targets": [{"upstream": "vertex"}]}]
    if settings.local_model:
        routes.append({"name": "local", "models": [settings.local_model], "targets": [{"upstream": "local"}]})
    for provider, patterns in FAMILIES.items():
        routes.append({"name": provider, "models": patterns, "targets": [{"upstream": provider}]})
    if settings.backend_url:
        routes.append({"name": "backend", "models": ["**"], "targets": [{"upstream": "local"}]})
    return {"routes": routes}


def load_policy(settings: Settings) -> Policy:
    builtins = builtin_upstreams(settings)
    if not settings.policy_file:
        return Policy.from_dict(default_policy_data(settings), builtins)
    path = settings.policy_file
    try:
        data = read_mapping(path, "policy file")
    except YamlFileError as e:
        raise PolicyError(str(e)) from None
    try:
        policy = Policy.from_dict(data, builtins)
        _vertex_placed(policy)
    except PolicyError as e:
        raise PolicyError(f"policy file {path}: {e}") from None
    return policy


def _vertex_placed(policy: Policy) -> None:
    """A policy's routes send nothing to a Vertex upstream with no project (the built-in one, when the gateway
    found none): known now, so the gateway does not start rather than answer every such request with an error."""
    for i, route in enumerate(policy.routes):
        for j, target in enumerate(route.targets):
            for name in target.upstreams:
                if policy.upstreams[name].kind == "vertex" and not vertex.has_project(policy.upstreams[name].url):
                    raise PolicyError(f"routes.{i}.targets.{j}: upstream {name!r} has no Google Cloud project: set "
                                      "GOOGLE_CLOUD_PROJECT (or GOOGLE_APPLICATION_CREDENTIALS to a service-account "
                                      "key), or declare a vertex upstream with its project")
