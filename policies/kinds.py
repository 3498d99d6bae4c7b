"""Upstream kinds (a policy's `kind:`), each declared once: the wire format it speaks, the other formats it
answers natively, its key variables, whose price rows bill it, how its URL is built, whose credentials it
takes, and whose caching rules plan for it.

Adding a kind is one `Kind` here (plus its dialect, if the format is new); `schema.py` validates a policy's
upstreams against `KINDS`, and `Upstream` reads everything kind-specific from the record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

from prefixgate.dialects import vertex, wire_format
from prefixgate.providers.vertex_prices import price_name

UpstreamKind = Literal["anthropic", "openai", "openai_responses", "gemini", "gemini_interactions", "bedrock", "vertex",
                       "openai_compatible", "local"]


def bedrock_url(region: str) -> str:
    return f"https://bedrock-runtime.{region}.amazonaws.com"


# Vertex serves Claude (rawPredict: Anthropic's body) and Gemini (the Gemini API's body): a caller goes out in
# the one that carries its body untranslated; a caller of another format by the model it names.
VERTEX_FORMAT_OF = {"anthropic": "vertex_anthropic", "vertex_anthropic": "vertex_anthropic",
                    "bedrock_invoke": "vertex_anthropic", "gemini": "vertex_gemini", "vertex_gemini": "vertex_gemini"}


def _vertex_format(caller_dialect: str, model: str) -> str:
    return VERTEX_FORMAT_OF.get(caller_dialect) or ("vertex_anthropic" if "claude" in model else "vertex_gemini")


def _vertex_priced_as(model: str, url: str) -> str:
    """The name a model is priced under at this location (Claude costs more on regional endpoints)."""
    return price_name(model, vertex.location_of(url))


@dataclass(frozen=True)
class Kind:
    name: UpstreamKind
    dialect: str                            # the wire format it speaks by default
    # Other formats it answers natively: a caller of one of them goes out untranslated.
    also_speaks: tuple[str, ...] = ()
    # The usual environment variables of its key (the first one set wins); none: the server needs no key.
    key_envs: tuple[str, ...] = ()
    # Price rows of its own in providers.toml, whatever format a request goes out in ("": its format's provider's).
    price_rows: str = ""
    # The bundled engine, in the gateway's process (no URL): free per token, sent the tenant's `cache_salt`.
    in_process: bool = False
    # OpenAI-compatible servers: self-hosted unless a provider profile (compatible.PROFILES) names the company.
    takes_profile: bool = False
    # Answers its format's miss diagnostics (dialects/diagnosis.py); Bedrock and Vertex do not document the fields.
    diagnoses_misses: bool = False
    # Takes only the gateway's own credentials (Google OAuth on Vertex): a caller's bearer token is never sent on.
    own_credentials_only: bool = False
    # Lives in a Google Cloud project and location (the policy's `project:` and `location:`).
    placed: bool = False
    # Builds the default URL from an AWS region (the policy's `region:`).
    regional_url: Callable[[str], str] | None = None
    # The format a caller's request goes out in when it depends on the caller's format and the model (Vertex).
    format_for: Callable[[str, str], str] | None = None
    # The name a model is priced under at this upstream's URL, when not its own (Vertex's locations).
    priced_as: Callable[[str, str], str] | None = None

    def speaks(self, caller_dialect: str, model: str = "") -> str:
        """The format a caller's request goes out in: the caller's own where this kind speaks it natively."""
        if self.format_for is not None:
            return self.format_for(caller_dialect, model)
        return caller_dialect if caller_dialect in self.also_speaks else self.dialect

    @property
    def hosted(self) -> bool:
        """A provider's own API, whose keys it issues (not a self-hosted or compatible server)."""
        return not self.in_process and not self.takes_profile

    @property
    def planner_provider(self) -> str | None:
        """Whose caching rules and prices apply: the self-hosted engine's, or its format's provider's; None for a
        kind with price rows of its own (Vertex), planned by the format each request goes out in."""
        if self.price_rows:
            return None
        return "local" if not self.hosted else wire_format(self.dialect).planner_provider


# `openai_responses` is OpenAI for models served only by the Responses API: Chat Completions callers routed there
# are translated; `gemini_interactions` likewise is the Gemini API for models and agents served only by the
# Interactions API. OpenAI serves Responses callers on the Responses API (stored state, reasoning items and cache
# keys survive); Bedrock takes Claude as InvokeModel (Anthropic's body) or as Converse; the Gemini API serves
# Interactions callers on the Interactions API, where their stored interactions live. Bedrock signs with the AWS
# credential chain unless a Bedrock API key is set.
KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("anthropic", "anthropic", key_envs=("ANTHROPIC_API_KEY",), diagnoses_misses=True),
    Kind("openai", "openai", also_speaks=("responses",), key_envs=("OPENAI_API_KEY",), diagnoses_misses=True),
    Kind("openai_responses", "responses", key_envs=("OPENAI_API_KEY",), diagnoses_misses=True),
    Kind("gemini", "gemini", also_speaks=("interactions",), key_envs=("GEMINI_API_KEY", "GOOGLE_API_KEY")),
    Kind("gemini_interactions", "interactions", key_envs=("GEMINI_API_KEY", "GOOGLE_API_KEY")),
    Kind("bedrock", "bedrock_invoke", also_speaks=("bedrock_converse",), key_envs=("AWS_BEARER_TOKEN_BEDROCK",),
         regional_url=bedrock_url),
    Kind("vertex", "vertex_gemini", key_envs=("PREFIXGATE_VERTEX_ACCESS_TOKEN",), price_rows="vertex",
         own_credentials_only=True, placed=True, format_for=_vertex_format, priced_as=_vertex_priced_as),
    # Every self-hosted server speaks OpenAI's format.
    Kind("openai_compatible", "openai", takes_profile=True),
    Kind("local", "openai", in_process=True),
)}
if set(KINDS) != set(get_args(UpstreamKind)):
    raise RuntimeError(f"UpstreamKind and KINDS must name the same kinds: {sorted(set(KINDS) ^ set(get_args(UpstreamKind)))}")

# A ledger record's provider (an upstream's kind, or a compatible provider's name) -> the catalogue provider whose
# rows describe its models; a name absent here (vertex, deepseek, ...) is its own.
PLANNER_PROVIDER: dict[str, str] = {k.name: k.planner_provider for k in KINDS.values() if k.planner_provider}


def catalogue_provider(recorded: str) -> str:
    """The catalogue provider of a ledger record's `provider` (see PLANNER_PROVIDER)."""
    return PLANNER_PROVIDER.get(recorded, recorded)
