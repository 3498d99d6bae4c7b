"""Price lookup by provider and model name, as callers spell it, and pricing of a response's usage.

Callers send model names in many spellings: date-pinned snapshots (`claude-haiku-4-5-20251001`,
`gpt-4o-2024-08-06`), `-latest` pointers, Gemini's `models/` resource prefix and `-001` versions, router
prefixes (`anthropic/...`) and dotted Claude versions (`claude-sonnet-5.5`). All of them resolve to one row.
"""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal

from prefixgate.cost import ZERO, Cost, Price, price_usage
from prefixgate.errors import RequestError
from prefixgate.providers import genai_catalog
from prefixgate.providers.rules import Catalog, ModelRules, default_catalog
from prefixgate.providers.vertex_prices import publisher_of, split_name, vertex_rules
from prefixgate.reuse import memo, weigh
from prefixgate.usage import Usage

_SUFFIXES = (
    re.compile(r"-\d{8}$"),              # Anthropic snapshot: -20251001
    re.compile(r"-\d{4}-\d{2}-\d{2}$"),  # OpenAI snapshot: -2024-08-06
    re.compile(r"-\d{2}-\d{4}$"),        # Gemini preview date: -05-2025
    re.compile(r"-\d{3}$"),              # Gemini version: -001
    re.compile(r"-latest$"),
)
_ROUTER_PREFIXES = ("models/", "anthropic/", "openai/", "google/", "gemini/")
# Bedrock model ids: an ARN (foundation model or inference profile), a geographic inference-profile prefix
# (regional price), and a version suffix (-v1:0) around the model's name; `global.` is kept (its own price).
_BEDROCK_ARN = re.compile(r"^arn:aws[\w-]*:bedrock:[\w-]*:\d*:(?:foundation-model|inference-profile|"
                          r"application-inference-profile|provisioned-model)/")
_BEDROCK_GEO = re.compile(r"^(?:us|eu|jp|apac|au|ca|us-gov)\.")
_BEDROCK_VERSION = re.compile(r"-v\d+(?::\d+)?$")


# Tiers an answer names that are the model's list prices: OpenAI's "default", Anthropic's "standard" ("" where
# it names none). Anthropic's "priority" (capacity committed ahead, priced by contract) has no published rate
# in genai-prices either, so it is priced at the list rows too, and recorded as such (ledger service_tier).
STANDARD_TIERS = frozenset({"", "default", "standard", "auto"})


class UnknownModel(RequestError):
    """No price row for a model; rendered as the provider's 404 for an unknown model."""

    def __init__(self, provider: str, model: str) -> None:
        super().__init__(f"model: {model} is not a known {provider} model", field="model", status=404,
                         kind="not_found")
        self.provider = provider
        self.model = model


def resolve_model(provider: str, model: str, catalog: Catalog | None = None) -> ModelRules:
    """The rules and prices for `model` of `provider`, whatever snapshot or prefix spelling it carries."""
    catalog = catalog or default_catalog()
    found = _lookup(catalog, provider, model)
    if found is None:
        raise UnknownModel(provider, model)
    return found


def _lookup(catalog: Catalog, provider: str, model: str) -> ModelRules | None:
    if provider == "vertex":
        return _vertex_lookup(catalog, model)
    aliases = catalog.names(provider)
    for name in _spellings(provider, model):
        if name in aliases:
            return aliases[name]
    return None


def _vertex_lookup(catalog: Catalog, name: str) -> ModelRules | None:
    # Memoised beside the catalog's name indexes: every priced Vertex request asks.
    known = catalog.names("vertex")
    if name not in known:
        model, regional = split_name(name)
        publisher = _lookup(catalog, publisher_of(model), model)
        if publisher is None:
            return None
        known[name] = vertex_rules(publisher, regional, catalog)
    return known[name]


def _spellings(provider: str, model: str) -> tuple[str, ...]:
    """The names `model` may be listed under (as sent, without a router prefix or a snapshot suffix, dotted
    versions dashed); memoised in the reuse store: every priced request asks two or three times."""
    key = (provider, model)
    found = _SPELLINGS.get(key)
    if found is None:
        found = _spelled(provider, model)
        _SPELLINGS.put(key, found, weigh((key, found)))
    return found


def _spelled(provider: str, model: str) -> tuple[str, ...]:
    name = model.strip()
    if provider == "bedrock":
        name = _BEDROCK_VERSION.sub("", _BEDROCK_GEO.sub("", _BEDROCK_ARN.sub("", name)))
    for prefix in _ROUTER_PREFIXES:
        name = name.removeprefix(prefix)
    out = [name]
    stripped = name
    for pattern in _SUFFIXES:
        stripped = pattern.sub("", stripped)
    out.append(stripped)
    if provider in ("anthropic", "bedrock"):
        # claude-sonnet-5.5 -> claude-sonnet-5-5 (router and console spellings).
        out += [n.replace(".", "-") for n in out]
    return tuple(out)


_SPELLINGS = memo("model_spellings")


def price_for(provider: str, model: str, usage: Usage, catalog: Catalog | None = None,
              at: datetime | None = None) -> Price:
    """The price of this response: THE one place every price is taken from (the gateway's ledger, the
    planner, replay, the SDK, lint and the mocks all come here or to `ModelRules.price_for` of a model resolved
    here). The row is the one in force at `at` (the request's time, now when None: dated and time-of-day
    prices), and a long-context tier prices the whole request. A response served at a hosted service tier
    (`usage.service_tier`: OpenAI flex or priority) is priced at that tier's published rates."""
    rules = resolve_model(provider, model, catalog)
    price = rules.price_for(usage.input_total, at)
    if usage.service_tier in STANDARD_TIERS or not rules.genai_ref:
        return price
    return genai_catalog.at_tier(price, rules.genai_ref, usage.service_tier, usage.input_total, at) or price


def cost_of(
    provider: str,
    model: str,
    usage: Usage,
    storage_token_hours: Decimal = ZERO,
    catalog: Catalog | None = None,
    at: datetime | None = None,
) -> Cost:
    """What `usage` cost on `model` at `at`, with the counterfactual cost without caching and the savings."""
    return price_usage(usage, price_for(provider, model, usage, catalog, at), storage_token_hours)


def storage_cost(provider: str, model: str, token_hours: Decimal, catalog: Catalog | None = None,
                 at: datetime | None = None) -> Cost:
    """Storage of an explicit cache (Gemini cachedContents) alone: no tokens, only the storage line."""
    return price_usage(Usage(), price_for(provider, model, Usage(), catalog, at), token_hours)
