"""Provider caching rules and prices, loaded from `providers.toml` (plus a user's overrides) and validated.

Everything here is data: the simulator, pricing and planner read these dataclasses and never hard-code a
provider number. A bad file stops loading with a message naming the file, the table and the key.
"""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from prefixgate.cost import Price
from prefixgate.providers import genai_catalog
from prefixgate.providers.compatible import PROFILES
from prefixgate.providers.schedule import PricePeriod, PriceSpec, period_at
from prefixgate.yaml_file import YamlFileError, read_mapping

PROVIDERS = ("anthropic", "openai", "gemini", "bedrock")
# Hosted OpenAI-compatible providers (compatible.PROFILES) have price rows but no rules table of their own:
# they cache by prefix automatically, under OpenAI's rules as far as the planner is concerned.
MODEL_PROVIDERS = PROVIDERS + tuple(PROFILES)
OPENAI_REGIMES = ("implicit", "breakpoints")


class RulesError(ValueError):
    """A providers file that cannot be used; the message names the file and the offending key."""


@dataclass(frozen=True)
class AnthropicRules:
    """Claude's prompt cache: on Anthropic's API, and on Bedrock with Bedrock's own table."""

    max_breakpoints: int
    # Whether the provider writes (and bills) a cache entry no marker in the request asks for (`writes_unmarked`).
    writes_unmarked: bool
    lookback_positions: int
    ttls: dict[str, int]
    default_ttl: str
    entry_visible_after_s: float
    image_tokens: int
    document_tokens: int
    message_overhead_tokens: int
    source: str


@dataclass(frozen=True)
class OpenAIRules:
    min_cache_tokens: int
    increment_tokens: int
    writes_unmarked: bool
    routing_prefix_tokens: int
    overflow_rpm: int
    in_memory_idle_s: int
    default_retention: str
    extended_retention_s: int
    max_breakpoint_writes: int
    breakpoint_match_window: int
    breakpoint_ttls: dict[str, int]
    default_breakpoint_ttl: str
    message_overhead_tokens: int
    reply_priming_tokens: int
    image_tokens: int
    source: str


@dataclass(frozen=True)
class GeminiRules:
    implicit_ttl_s: int
    writes_unmarked: bool
    default_explicit_ttl_s: int
    input_token_limit: int      # the most a request (and so a cache) of a current Gemini model holds
    image_tokens: int
    source: str


@dataclass(frozen=True)
class VertexRules:
    """Vertex AI's rules table: no price rows of its own, as it bills each publisher's models at the
    publisher's list price (providers/vertex_prices.py), except for this premium."""

    # Claude from Sonnet 4.5 on costs this much more on regional and multi-region endpoints than on the
    # global endpoint; the older models (base ids, without the @date) cost the same everywhere.
    regional_premium_percent: int
    same_everywhere: tuple[str, ...]
    # Vertex caches no Gemini prompt under this many tokens, implicit or explicit, whatever the model's own
    # minimum on the Gemini API.
    gemini_min_cache_tokens: int
    source: str


@dataclass(frozen=True)
class ModelRules:
    provider: str
    id: str
    # The price schedule (schedule.py): most rows from genai-prices, the rest from providers.toml.
    periods: tuple[PricePeriod, ...]
    min_cache_tokens: int
    aliases: tuple[str, ...] = ()
    released: str = ""
    # OpenAI only: "implicit" (free writes, 128-token steps) or "breakpoints" (GPT-5.6+ paid writes).
    regime: str = ""
    # OpenAI only: accepted prompt_cache_retention values.
    retention: tuple[str, ...] = ("in_memory", "24h")
    # Prefix caches in steps (OpenAI and the compatible providers): a read covers a whole number of steps
    # past the minimum; 0 takes [openai].increment_tokens.
    increment_tokens: int = 0
    # The TTLs an explicit marker may ask for on this model (OpenAI prompt_cache_options.ttl; Claude's
    # cache_control / cachePoint ttl); empty: the model cannot cache at all (some Bedrock models).
    breakpoint_ttls: tuple[str, ...] = ("30m",)
    # The most output tokens one answer may have (the provider's model page); 0: not in the catalogue.
    max_output_tokens: int = 0
    # Lifecycle: the provider's shutdown date (None: none announced) and the model it points callers to.
    # A retired row stays, so that old records still price.
    retires: date | None = None
    replacement: str = ""
    retires_source: str = ""
    # Where the prices come from: "genai-prices", "override" (our row over a model genai-prices knows) or
    # "catalogue" (a model genai-prices lacks); `genai_ref` names the genai-prices model, if any.
    origin: str = "catalogue"
    genai_ref: str = ""

    @property
    def price(self) -> PriceSpec:
        """Today's standard base row (no time-of-day window): what a catalogue lists and the planner plans with."""
        return period_at(self.periods, None, windows=False).base

    @property
    def long_context(self) -> tuple[PriceSpec, ...]:
        return period_at(self.periods, None, windows=False).long_context

    def row_for(self, prompt_tokens: int, at: datetime | None = None) -> PriceSpec:
        """The row for a request at `at` (now when None) whose whole prompt (uncached + read + written) has
        this many tokens: the period in force then (dated and time-of-day prices), then its long-context tier."""
        return period_at(self.periods, at).row_for(prompt_tokens)

    def price_for(self, prompt_tokens: int, at: datetime | None = None) -> Price:
        return self.row_for(prompt_tokens, at).price

    def retired(self, on: date | None = None) -> bool:
        return self.retires is not None and self.retires <= (on or datetime.now(UTC).date())

    def retires_within(self, days: int, on: date | None = None) -> bool:
        """Retired already, or retiring within `days` of `on` (today when None)."""
        today = on or datetime.now(UTC).date()
        return self.retires is not None and (self.retires - today).days <= days


@dataclass(frozen=True)
class Catalog:
    anthropic: AnthropicRules
    openai: OpenAIRules
    gemini: GeminiRules
    bedrock: AnthropicRules
    vertex: VertexRules
    models: dict[tuple[str, str], ModelRules] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    # provider -> {id or alias: model}, built on first use: every priced request looks a model up.
    _names: dict[str, dict[str, ModelRules]] = field(default_factory=dict, compare=False, repr=False)

    def models_of(self, provider: str) -> list[ModelRules]:
        return [m for (p, _), m in self.models.items() if p == provider]

    def names(self, provider: str) -> dict[str, ModelRules]:
        index = self._names.get(provider)
        if index is None:
            index = self._names[provider] = {a: m for m in self.models_of(provider) for a in (m.id, *m.aliases)}
        return index

    def writes_unmarked(self, provider: str) -> bool:
        """Whether `provider` (a planner provider) may write, and bill, a cache entry for a prompt whose request
        marks nothing (its automatic prefix caching); a provider with no rules table here (the local engine,
        which bills nothing) is taken to."""
        return provider not in PROVIDERS or getattr(self, provider).writes_unmarked


# ----------------------------------------------------------------------------------------------- loading


def load_catalog(providers_file: str | Path | None = None) -> Catalog:
    """The packaged rules, with `providers_file` (TOML or YAML, same shape) merged over them."""
    if not providers_file:
        return default_catalog()
    return _build(_merge(_packaged(), _read_user(Path(providers_file))), ("providers.toml", str(providers_file)))


@lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    return _build(_packaged(), ("providers.toml",))


@lru_cache(maxsize=1)
def _packaged_cached() -> dict[str, Any]:
    text = resources.files("prefixgate.providers").joinpath("providers.toml").read_text()
    return tomllib.loads(text)


def _packaged() -> dict[str, Any]:
    return copy.deepcopy(_packaged_cached())


def _read_user(path: Path) -> dict[str, Any]:
    if path.suffix in (".yaml", ".yml"):
        try:
            return read_mapping(path, "providers file")
        except YamlFileError as e:
            raise RulesError(str(e)) from None
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise RulesError(f"cannot read providers file {path}: {e.strerror}") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise RulesError(f"providers file {path} is not UTF-8 text: byte 0x{raw[e.start]:02x} at offset {e.start}") from None
    except tomllib.TOMLDecodeError as e:
        raise RulesError(f"providers file {path} does not parse: {e}") from None


def _merge(base: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """Provider tables: keys replace; [[model]]: same provider+id deep-merges, new ones are appended."""
    for key, value in user.items():
        if key == "model":
            if not isinstance(value, list):
                raise RulesError("providers file: 'model' must be a list of tables ([[model]])")
            index = {(m.get("provider"), m.get("id")): m for m in base.setdefault("model", [])}
            for m in value:
                if not isinstance(m, dict):
                    raise RulesError("providers file: every [[model]] entry must be a table")
                target = index.get((m.get("provider"), m.get("id")))
                if target is None:
                    base["model"].append(m)
                else:
                    _deep_update(target, m)
        elif key in (*PROVIDERS, "vertex"):
            if not isinstance(value, dict):
                raise RulesError(f"providers file: [{key}] must be a table")
            base.setdefault(key, {}).update(value)
        else:
            raise RulesError(f"providers file: unknown top-level key {key!r} (expected {', '.join(PROVIDERS)}, vertex, model)")
    return base


def _deep_update(target: dict[str, Any], new: dict[str, Any]) -> None:
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(target.get(k), dict):
            _deep_update(target[k], v)
        else:
            target[k] = v


def _build(data: dict[str, Any], files: tuple[str, ...]) -> Catalog:
    where = " + ".join(files)
    provider_rules = {}
    for name, cls in (("anthropic", AnthropicRules), ("openai", OpenAIRules), ("gemini", GeminiRules),
                      ("bedrock", AnthropicRules), ("vertex", VertexRules)):
        provider_rules[name] = _dataclass_from(cls, data.get(name), f"{where}: [{name}]")
    models: dict[tuple[str, str], ModelRules] = {}
    for i, raw in enumerate(data.get("model", [])):
        m = _model_from(raw, f"{where}: [[model]] #{i + 1}", provider_rules)
        if (m.provider, m.id) in models:
            raise RulesError(f"{where}: model {m.provider}/{m.id} is listed twice")
        models[(m.provider, m.id)] = m
    _check_provider_rules(provider_rules, where)
    return Catalog(**provider_rules, models=models, sources=files)


def _known_table(raw: Any, where: str, known: set[str] | dict[str, Any], not_a_table: str) -> dict:
    """`raw` as a TOML table with only `known` keys, else a RulesError naming the first stray key."""
    if not isinstance(raw, dict):
        raise RulesError(f"{where}: {not_a_table}")
    unknown = set(raw) - set(known)
    if unknown:
        raise RulesError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    return raw


def _dataclass_from(cls: type, raw: Any, where: str) -> Any:
    names = {f.name: f for f in fields(cls)}
    raw = _known_table(raw, where, names, "missing or not a table")
    values = {}
    for name, f in names.items():
        if name not in raw:
            raise RulesError(f"{where}: missing key {name!r}")
        values[name] = _typed(raw[name], f.type, f"{where}.{name}")
    return cls(**values)


def _typed(value: Any, type_name: Any, where: str) -> Any:
    t = str(type_name)
    if t == "bool":
        if not isinstance(value, bool):
            raise RulesError(f"{where}: expected true or false, got {value!r}")
        return value
    if t == "int":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise RulesError(f"{where}: expected a non-negative integer, got {value!r}")
        return value
    if t == "float":
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise RulesError(f"{where}: expected a non-negative number, got {value!r}")
        return float(value)
    if t == "str":
        if not isinstance(value, str):
            raise RulesError(f"{where}: expected a string, got {value!r}")
        return value
    if t == "tuple[str, ...]":
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise RulesError(f"{where}: expected a list of strings")
        return tuple(value)
    if t == "dict[str, int]":
        if not isinstance(value, dict) or not value:
            raise RulesError(f"{where}: expected a table of TTL name -> seconds")
        return {str(k): _typed(v, "int", f"{where}.{k}") for k, v in value.items()}
    raise AssertionError(f"no loader for {t}")  # a new field type in this file needs a branch here


def _decimal(value: Any, where: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise RulesError(f"{where}: expected a price such as \"2.50\", got {value!r}")
    try:
        d = Decimal(str(value))
    except InvalidOperation:
        raise RulesError(f"{where}: {value!r} is not a number") from None
    if not d.is_finite() or d < 0:
        raise RulesError(f"{where}: a price must be a non-negative number, got {value!r}")
    return d


_PRICE_KEYS = {"input", "output", "cache_read", "cache_write", "storage_per_hour", "source", "as_of", "note", "above",
               "why"}


def _price_spec(raw: Any, where: str, tier: bool) -> PriceSpec:
    raw = _known_table(raw, where, _PRICE_KEYS, "expected a price table")
    for key in ("input", "output", "source", "as_of") + (("above",) if tier else ()):
        if key not in raw:
            raise RulesError(f"{where}: missing key {key!r} (every price carries its source URL and date)")
    if not str(raw["source"]).startswith("http"):
        raise RulesError(f"{where}.source: expected a URL, got {raw['source']!r}")
    writes = raw.get("cache_write", {})
    if not isinstance(writes, dict):
        raise RulesError(f"{where}.cache_write: expected a table of TTL -> price")
    inp = _decimal(raw["input"], f"{where}.input")
    price = Price(
        input=inp,
        output=_decimal(raw["output"], f"{where}.output"),
        # A model without a cache discount bills reads as plain input.
        cache_read=_decimal(raw.get("cache_read", raw["input"]), f"{where}.cache_read"),
        cache_write={str(k): _decimal(v, f"{where}.cache_write.{k}") for k, v in writes.items()},
        storage_per_hour=_decimal(raw.get("storage_per_hour", 0), f"{where}.storage_per_hour"),
    )
    above = _typed(raw.get("above", 0), "int", f"{where}.above")
    # `why`: an override of a price genai-prices also has says why ours differs (tests hold every row to it).
    note = "; ".join(str(raw[k]) for k in ("note", "why") if raw.get(k))
    return PriceSpec(price, str(raw["source"]), str(raw["as_of"]), note, above)


_MODEL_KEYS = {"provider", "id", "aliases", "min_cache_tokens", "price", "long_context", "released", "regime",
               "retention", "breakpoint_ttls", "genai_prices", "storage_per_hour", "discount_percent", "retires", "increment_tokens",
               "replacement", "retires_source", "max_output_tokens"}


def _model_from(raw: Any, where: str, provider_rules: dict[str, Any]) -> ModelRules:
    raw = _known_table(raw, where, _MODEL_KEYS, "expected a table")
    provider, mid = raw.get("provider"), raw.get("id")
    if provider not in MODEL_PROVIDERS:
        raise RulesError(f"{where}.provider: expected one of {MODEL_PROVIDERS}, got {provider!r}")
    if not isinstance(mid, str) or not mid:
        raise RulesError(f"{where}.id: expected a model id string")
    where = f"{where} ({provider}/{mid})"
    regime = raw.get("regime", "")
    openai: OpenAIRules = provider_rules["openai"]
    # What a marker's ttl may be: OpenAI's breakpoint TTLs; Claude's cache TTLs (every one by default on
    # Anthropic's API, the model's own list on Bedrock); Gemini has no markers.
    # A hosted OpenAI-compatible provider has no rules table: OpenAI's apply.
    openai_like = provider == "openai" or provider not in provider_rules
    marker_ttls = openai.breakpoint_ttls if openai_like else getattr(provider_rules[provider], "ttls", {})
    if provider in PROFILES and PROFILES[provider].marker_models:
        # Its Claude and Gemini models take Anthropic's markers (OpenRouter): their rows list Claude's TTLs.
        marker_ttls = {**marker_ttls, **provider_rules["anthropic"].ttls}
    default_ttls = ["30m"] if openai_like else (["5m"] if provider == "bedrock" else list(marker_ttls))
    if provider == "openai":
        if regime not in OPENAI_REGIMES:
            raise RulesError(f"{where}.regime: expected one of {OPENAI_REGIMES}, got {regime!r}")
        min_tokens = raw.get("min_cache_tokens", openai.min_cache_tokens)
    else:
        if regime:
            raise RulesError(f"{where}.regime: only OpenAI models have a caching regime")
        if "min_cache_tokens" not in raw:
            raise RulesError(f"{where}: missing key 'min_cache_tokens'")
        min_tokens = raw["min_cache_tokens"]
    write_ttl = "5m" if "5m" in marker_ttls else "30m"
    periods, origin, genai_ref = _periods(raw, provider, mid, where, write_ttl)
    model = ModelRules(
        provider=provider,
        id=mid,
        periods=periods,
        min_cache_tokens=_typed(min_tokens, "int", f"{where}.min_cache_tokens"),
        aliases=tuple(_str_list(raw.get("aliases", []), f"{where}.aliases")),
        released=str(raw.get("released", "")),
        regime=regime,
        retention=tuple(_str_list(raw.get("retention", ["in_memory", "24h"]), f"{where}.retention")),
        increment_tokens=_typed(raw.get("increment_tokens", 0), "int", f"{where}.increment_tokens"),
        breakpoint_ttls=tuple(_str_list(raw.get("breakpoint_ttls", default_ttls), f"{where}.breakpoint_ttls")),
        max_output_tokens=_typed(raw.get("max_output_tokens", 0), "int", f"{where}.max_output_tokens"),
        retires=_date(raw.get("retires"), f"{where}.retires"),
        replacement=str(raw.get("replacement", "")),
        retires_source=str(raw.get("retires_source", "")),
        origin=origin,
        genai_ref=genai_ref,
    )
    for ttl in model.breakpoint_ttls:
        if ttl not in marker_ttls:
            raise RulesError(f"{where}.breakpoint_ttls: {ttl!r} has no duration in [{provider}]'s TTLs")
    bad = set(model.retention) - {"in_memory", "24h"}
    if bad:
        raise RulesError(f"{where}.retention: unknown value {sorted(bad)[0]!r} (in_memory, 24h)")
    return model


def _periods(raw: dict[str, Any], provider: str, mid: str, where: str,
             write_ttl: str) -> tuple[tuple[PricePeriod, ...], str, str]:
    """(price periods, origin, genai-prices ref): our own `price` table where the row has one (an override
    when genai-prices knows the model too), else genai-prices' schedule; an operator's `discount_percent`
    scales every price."""
    ref = raw.get("genai_prices", "")
    if not isinstance(ref, str) or (ref and ":" not in ref):
        raise RulesError(f"{where}.genai_prices: expected \"provider:model\" as genai-prices names it")
    gp = genai_catalog.ref_for(provider, mid, ref)
    found = genai_catalog.lookup(*gp, write_ttl) if gp else None
    genai_ref = f"{found.provider_id}/{found.model_id}" if found else ""
    if "price" in raw and found is not None and isinstance(raw["price"], dict) and "source" not in raw["price"]:
        # An operator's partial override (a private price for some token classes) over genai-prices' row.
        periods, origin = tuple(_patched(p, raw["price"], f"{where}.price") for p in found.periods), "override"
    elif "price" in raw:
        tiers = raw.get("long_context", [])
        if not isinstance(tiers, list):
            raise RulesError(f"{where}.long_context: expected a list of price tables")
        period = PricePeriod(_price_spec(raw["price"], f"{where}.price", tier=False),
                             tuple(_price_spec(t, f"{where}.long_context[{i}]", tier=True) for i, t in enumerate(tiers)))
        periods, origin = (period,), "override" if found else "catalogue"
    elif found is not None:
        periods, origin = found.periods, "genai-prices"
        if "storage_per_hour" in raw:  # explicit-cache storage (Gemini): genai-prices has no such price
            storage = _decimal(raw["storage_per_hour"], f"{where}.storage_per_hour")
            periods = tuple(_with_storage(p, storage) for p in periods)
    else:
        raise RulesError(f"{where}: no 'price' table, and genai-prices {genai_catalog.VERSION} has no model "
                         f"{gp[0] + '/' + gp[1] if gp else mid!r}: add a price table with its source and date")
    if "discount_percent" in raw:
        d = _decimal(raw["discount_percent"], f"{where}.discount_percent")
        if d > 100:
            raise RulesError(f"{where}.discount_percent: expected 0..100, got {d}")
        periods = tuple(p.scaled(1 - d / 100, f"operator discount {d}%") for p in periods)
    return periods, origin, genai_ref


def _patched(period: PricePeriod, raw: dict[str, Any], where: str) -> PricePeriod:
    raw = _known_table(raw, where, {"input", "output", "cache_read", "cache_write", "storage_per_hour", "note"},
                       "expected a price table")
    values: dict[str, Any] = {k: _decimal(raw[k], f"{where}.{k}") for k in
                              ("input", "output", "cache_read", "storage_per_hour") if k in raw}
    if "cache_write" in raw:
        if not isinstance(raw["cache_write"], dict):
            raise RulesError(f"{where}.cache_write: expected a table of TTL -> price")
        values["cache_write"] = {str(k): _decimal(v, f"{where}.cache_write.{k}") for k, v in raw["cache_write"].items()}
    base = period.base
    note = f"{base.note}; operator override of {', '.join(sorted(values))}"
    return replace(period, base=replace(base, price=replace(base.price, **values), note=note))


def _with_storage(period: PricePeriod, storage: Decimal) -> PricePeriod:
    def spec(s: PriceSpec) -> PriceSpec:
        return replace(s, price=replace(s.price, storage_per_hour=storage))
    return replace(period, base=spec(period.base), long_context=tuple(spec(t) for t in period.long_context))


def _date(value: Any, where: str) -> date | None:
    if value is None or isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise RulesError(f"{where}: expected a date such as 2026-11-30, got {value!r}") from None


def _str_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise RulesError(f"{where}: expected a list of strings")
    return value


def _check_provider_rules(rules: dict[str, Any], where: str) -> None:
    for name in ("anthropic", "bedrock"):
        claude: AnthropicRules = rules[name]
        if claude.default_ttl not in claude.ttls:
            raise RulesError(f"{where}: [{name}].default_ttl {claude.default_ttl!r} is not in ttls")
    o: OpenAIRules = rules["openai"]
    if o.default_breakpoint_ttl not in o.breakpoint_ttls:
        raise RulesError(f"{where}: [openai].default_breakpoint_ttl {o.default_breakpoint_ttl!r} is not in breakpoint_ttls")
    if o.default_retention not in ("in_memory", "24h"):
        raise RulesError(f"{where}: [openai].default_retention must be 'in_memory' or '24h'")
    if o.increment_tokens == 0:
        raise RulesError(f"{where}: [openai].increment_tokens must be > 0")
