"""The provider cache simulator: native requests in, the usage each provider would report out.

One `Simulator` holds the caches of all three providers, scoped per provider + model + tenant (the
Anthropic workspace, the OpenAI organisation, the Gemini project), and Gemini's cachedContents. Time is
the caller's: replay passes trace timestamps, the mock server passes the wall clock. A request the
provider would reject raises `RequestError` with the provider's status and wording.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from prefixgate.dialects import anthropic as anthropic_dialect
from prefixgate.dialects import converse, request_dialect
from prefixgate.dialects.validate import load_body
from prefixgate.errors import RequestError
from prefixgate.ir import Conversation
from prefixgate.providers.cached_contents import CachedContent, CachedContentRegistry
from prefixgate.providers.pricing import resolve_model
from prefixgate.providers.rules import PROVIDERS, Catalog, ModelRules, default_catalog
from prefixgate.simulation.anthropic_cache import AnthropicCache
from prefixgate.simulation.gemini_cache import GeminiCache
from prefixgate.simulation.openai_cache import OpenAICache
from prefixgate.simulation.store import CacheStore
from prefixgate.usage import Usage


@dataclass(frozen=True)
class SimResult:
    usage: Usage
    model: ModelRules
    conversation: Conversation


class Simulator:
    """`entry_visible_after_s` overrides how long a new Anthropic entry stays unreadable: replay uses the
    rules' estimate of time to first token; the mock server, whose responses start at once, uses 0."""

    def __init__(self, catalog: Catalog | None = None, *, entry_visible_after_s: float | None = None) -> None:
        self.catalog = catalog or default_catalog()
        self.store = CacheStore()
        self.anthropic = AnthropicCache(self.catalog.anthropic, self.store, entry_visible_after_s)
        self.bedrock = AnthropicCache(self.catalog.bedrock, self.store, entry_visible_after_s, provider="bedrock")
        # Converse and InvokeModel requests share Bedrock's cache; only the errors name the marker differently.
        self._converse = AnthropicCache(self.catalog.bedrock, self.store, entry_visible_after_s, provider="bedrock",
                                        marker="cachePoint")
        self.openai = OpenAICache(self.catalog.openai, self.store)
        self.cached_contents = CachedContentRegistry(self.catalog.gemini.default_explicit_ttl_s)
        self.gemini = GeminiCache(self.catalog.gemini, self.store, self.cached_contents)

    def respond(
        self,
        provider: str,
        body: bytes | str | dict,
        *,
        now: float,
        tenant: str = "default",
        model: str | None = None,
        output_tokens: int = 0,
        rules: ModelRules | None = None,
    ) -> SimResult:
        """Run one generate request (Messages, Chat Completions, Responses, generateContent) through the cache.

        `model` is required for Gemini and Bedrock, whose model is in the URL, and overrides the body's otherwise.
        Bedrock bodies are InvokeModel (Anthropic's, with `anthropic_version`) or Converse bodies. `rules` are
        the model's caching rules where they are not `provider`'s own row (a compatible provider's model run
        through OpenAI's cache).
        """
        conv = self.parse(provider, body, model)
        rules = rules or resolve_model(provider, model or conv.model or "", self.catalog)
        if provider == "anthropic":
            usage = self.anthropic.request(conv, rules, tenant, now)
        elif provider == "bedrock":
            cache = self._converse if conv.dialect == converse.NAME else self.bedrock
            usage = cache.request(conv, rules, tenant, now)
        elif provider == "openai":
            usage = self.openai.request(conv, rules, tenant, now)
        else:
            usage = self.gemini.request(conv, rules, tenant, now)
        return SimResult(replace(usage, output=output_tokens), rules, conv)

    def count_tokens(self, provider: str, body: bytes | str | dict, *, model: str | None = None,
                     tenant: str = "default", now: float = 0.0) -> int:
        """What the provider's token-counting endpoint answers (no cache is read or written)."""
        if provider == "anthropic":
            return self.anthropic.count(anthropic_dialect.parse_request(body, count_tokens=True))
        conv = self.parse(provider, body, model)
        if provider == "bedrock":
            return (self._converse if conv.dialect == converse.NAME else self.bedrock).count(conv)
        rules = resolve_model(provider, model or conv.model or "", self.catalog)
        if provider == "openai":
            return self.openai.count(conv, rules)
        total = self.gemini.count(conv)
        named = conv.params.get("cachedContent", conv.params.get("cached_content"))
        if named is not None:
            total += self.gemini.cached_content_for(conv, named, rules, tenant, now).tokens
        return total

    def parse(self, provider: str, body: bytes | str | dict, model: str | None = None) -> Conversation:
        if provider not in PROVIDERS:
            raise RequestError(f"provider: expected one of {', '.join(PROVIDERS)}, got {provider!r}", field="provider")
        # One provider, two APIs: an OpenAI body's shape says which (Chat always has `messages`).
        wire = request_dialect(provider, load_body(body))
        if not wire.model_in_body and not model:
            raise RequestError(f"model: a {provider} request names its model in the URL", field="model")
        return wire.parse_request(body, model=model)

    # ---- Gemini cachedContents --------------------------------------------------------------------

    def create_cached_content(self, body: bytes | str | dict, *, now: float, tenant: str = "default") -> CachedContent:
        data = load_body(body)
        model_name = data.get("model")
        if not isinstance(model_name, str) or not model_name:
            raise RequestError("model: field required (models/{model})", field="model")
        rules = resolve_model("gemini", model_name, self.catalog)
        tokens = self.gemini.content_tokens(data)
        return self.cached_contents.create(tenant, data, rules.id, tokens, rules.min_cache_tokens, now)

    def get_cached_content(self, name: str, *, now: float, tenant: str = "default") -> CachedContent:
        return self.cached_contents.get(tenant, name, now)

    def list_cached_contents(self, *, now: float, tenant: str = "default") -> list[CachedContent]:
        return self.cached_contents.list(tenant, now)

    def update_cached_content(self, name: str, body: bytes | str | dict, *, now: float,
                              tenant: str = "default") -> CachedContent:
        return self.cached_contents.update(tenant, name, load_body(body), now)

    def delete_cached_content(self, name: str, *, now: float, tenant: str = "default") -> CachedContent:
        return self.cached_contents.delete(tenant, name, now)

