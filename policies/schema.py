"""The routing policy as data: upstreams, routes with ordered fallbacks, caller keys with budgets.

Validated once at the edge (`Policy.from_dict`): a policy that loads is one the gateway can run,
and every error names the offending key path.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Literal, TypeVar

from prefixgate.cache_planner import (
    CACHE_KEY_MODES,
    CALLER_CHECKPOINTS,
    MODES,
    CacheKeyMode,
    CallerCheckpoints,
    Mode,
)
from prefixgate.cache_planner.variance import NO_RULE, Rule, rule_of
from prefixgate.config import SAMPLE_SECRETS, scheme_of, unknown_key
from prefixgate.cost import Price
from prefixgate.dialects import WIRE_FORMATS, vertex
from prefixgate.dialects.wire import WireFormat
from prefixgate.policies.alerting import Alerting, parse_alerting
from prefixgate.policies.balance import Balance, check_balance
from prefixgate.policies.keepalive import OFF, KeepAlivePolicy, parse_keepalive
from prefixgate.policies.kinds import KINDS, Kind, UpstreamKind
from prefixgate.policies.periods import PERIODS, zone_error
from prefixgate.policies.service_tiers import parse_service_tiers
from prefixgate.providers.compatible import PROFILES, Profile, profile_planner

OnRetired = Literal["warn", "replace", "refuse"]
ON_RETIRED: tuple[OnRetired, ...] = ("warn", "replace", "refuse")


RETRY_ON = ("429", "5xx", "timeout", "connect")


# A Google Cloud project id or location: lowercase letters, digits and hyphens (a path segment, never a URL).
VERTEX_NAME = re.compile(r"^[a-z][a-z0-9-]{1,62}$")


# Caller keys copied from examples (the docs' `key_sha256` is sha256("test")): refused at load.
SAMPLE_DIGESTS = {hashlib.sha256(s.encode()).hexdigest(): s for s in SAMPLE_SECRETS}


class PolicyError(ValueError):
    """A policy that cannot be used; the message starts with the key path at fault."""


# Scheduling classes, and the `priority` integer vLLM (and `prefixgate backend`) take for each: lower is admitted
# first and preempted last. vLLM only accepts a non-zero one under `--scheduling-policy priority`.
Priority = Literal["high", "normal", "low"]
ENGINE_PRIORITY: dict[str, int] = {"high": -1, "normal": 0, "low": 1}


@dataclass(frozen=True)
class KVEventSource:
    """A self-hosted replica's KV cache events (vLLM's ZMQ schema): the gateway routes on what it holds."""

    endpoint: str          # its PUB socket, connected to (vLLM's tcp://*:5557 binds there)
    tokenizer: str         # the served model's tokenizer (a bundled name or an HF folder), to hash prompts
    replay: str = ""       # its replay ROUTER, asked for missed sequence numbers; "": gaps reset the index
    topic: str = ""


@dataclass(frozen=True)
class Upstream:
    name: str
    kind: UpstreamKind
    url: str = ""
    # Environment variables holding the provider key; empty for servers that need none.
    api_key_env: tuple[str, ...] = ()
    # Extra headers sent upstream (e.g. an OpenRouter referer); never logged.
    headers: tuple[tuple[str, str], ...] = ()
    # The hosted provider behind an `openai_compatible` upstream (a name in compatible.PROFILES: deepseek,
    # openrouter, azure, ...): priced from its rows in providers.toml, never sent `cache_salt`. "" for a
    # self-hosted server (vLLM, SGLang, `prefixgate backend`).
    provider: str = ""
    # Azure OpenAI: the `api-version` query every request carries, and deployment name -> base model
    # (the URL names the deployment; prices are the base model's).
    api_version: str = ""
    deployments: tuple[tuple[str, str], ...] = ()
    kv_events: KVEventSource | None = None

    @property
    def kind_of(self) -> Kind:
        return KINDS[self.kind]

    @property
    def dialect(self) -> str:
        return self.kind_of.dialect

    def dialect_for(self, caller_dialect: str, model: str = "") -> str:
        """The format a caller's request goes out in: the caller's own where this upstream speaks it; on
        Vertex, the publisher's format that carries the caller's body (else the one serving `model`); at a compatible
        provider serving the Responses API itself (Azure, xAI), a Responses caller's."""
        if caller_dialect == "responses" and self.profile is not None and self.profile.responses:
            return caller_dialect
        return self.kind_of.speaks(caller_dialect, model)

    @property
    def own_credentials_only(self) -> bool:
        """Vertex takes Google OAuth tokens, which only the gateway can vouch for: a caller's bearer token is a
        gateway key (or nothing), never sent on to Google."""
        return self.kind_of.own_credentials_only

    @property
    def hosted(self) -> bool:
        """A provider's own API, which issues its own keys (not a self-hosted or OpenAI-compatible server)."""
        return self.kind_of.hosted

    @property
    def price_rows(self) -> str:
        """Whose rows in providers.toml price this upstream when not its format's provider's ("": those)."""
        return self.provider or self.kind_of.price_rows

    def planner_provider(self, wire: WireFormat, model: str = "") -> str:
        """Whose caching rules the planner applies when `wire` carries a request for `model` here: a hosted
        compatible provider's (by model, compatible.profile_planner), the kind's, else the format's provider's
        (Vertex: the publisher's, Claude's breakpoints or Gemini's explicit caches)."""
        if self.provider:
            return profile_planner(self.profile, model)
        return self.kind_of.planner_provider or wire.planner_provider

    def price_provider(self, wire: WireFormat) -> str:
        """Whose price rows bill this upstream: a compatible provider's own (deepseek, openrouter, ...), Vertex's,
        else its planner provider's."""
        return self.price_rows or self.planner_provider(wire)

    @property
    def profile(self) -> Profile | None:
        return PROFILES.get(self.provider)

    @property
    def names_deployments(self) -> bool:
        """Its requests name a deployment and its answers the model that ran (Azure OpenAI): the record is priced as
        that model (providers/deployments.py), `deployments` planning the request and pricing an answer naming none."""
        return self.profile is not None and self.profile.deployments

    @property
    def self_hosted(self) -> bool:
        """This project's engine, `prefixgate backend`, vLLM, SGLang: free per token, and sent the
        tenant's `cache_salt` (a hosted provider would reject or ignore it)."""
        return self.kind_of.in_process or (self.kind_of.takes_profile and not self.provider)

    def base_model(self, model: str) -> str:
        """The model whose price applies: an Azure deployment's base model; on Vertex the name it is priced
        under at this upstream's location (Claude costs more on regional endpoints); else `model` itself."""
        if self.kind_of.priced_as is not None:
            return self.kind_of.priced_as(model, self.url)
        return dict(self.deployments).get(model, model)

    def api_key(self) -> str | None:
        return next((os.environ[v] for v in self.api_key_env if os.environ.get(v)), None)


@dataclass(frozen=True)
class TargetRef:
    """One step of a route: an upstream (or several replicas of one) and the model to ask it for."""

    upstreams: tuple[str, ...]
    # None: forward the model name the caller sent.
    model: str | None = None
    # Load guard for prefix affinity: a replica takes a prefix only while its in-flight load is
    # below load_factor x the average; above that the prefix spills to the next replica in its order.
    load_factor: float = 1.25


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 2            # tries per target before failing over to the next one
    backoff_s: float = 0.1       # base of the full-jitter exponential backoff
    max_backoff_s: float = 2.0
    timeout_s: float = 120.0     # to the first response byte; a stream may then run as long as it runs
    on: tuple[str, ...] = RETRY_ON


ResponseCacheMode = Literal["off", "shadow", "on"]
RESPONSE_CACHE_MODES: tuple[ResponseCacheMode, ...] = ("off", "shadow", "on")


@dataclass(frozen=True)
class ResponseCachePolicy:
    """A route's exact response cache (docs/response-cache.md). `shadow` stores and looks up but never serves."""

    mode: ResponseCacheMode = "off"
    ttl_s: float = 3600.0
    max_mb: float = 64.0            # this route's in-memory entries, in total; also the most one entry may take
    tool_calls: bool = False        # store answers that call tools (off: a tool call acts on the world again)

    @property
    def max_bytes(self) -> int:
        return int(self.max_mb * (1 << 20))


@dataclass(frozen=True)
class Route:
    name: str
    models: tuple[str, ...]
    targets: tuple[TargetRef, ...]
    planner: Mode = "rewrite"
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # Keep request bodies (prompts) in the ledger for this route; None follows the `ledger_bodies` setting.
    ledger_bodies: bool | None = None
    # What the planner does with cache markers the caller placed itself (cache_planner.caller_markers).
    caller_checkpoints: CallerCheckpoints = "keep"
    # The callers' wire formats this route serves (e.g. vertex_anthropic, vertex_gemini); empty: every format.
    formats: tuple[str, ...] = ()
    # Text the rewrite always moves out of the static prefix (`volatile`) or never moves (`never_move`).
    rewrite: Rule = NO_RULE
    response_cache: ResponseCachePolicy = field(default_factory=ResponseCachePolicy)
    # Ask the provider why its cache missed (gateway/diagnostics.py), on at most this many requests a minute.
    diagnostics: bool = True
    diagnostics_per_minute: int = 600
    # What the planner does with OpenAI's prompt_cache_key (cache_planner/cache_key.py): derive, keep or off.
    prompt_cache_key: CacheKeyMode = "keep"
    # USD per million tokens for models the price table does not know (a budgeted key may then use them).
    price: Price | None = None
    # The most one request may cost: what admission reserves against a budget instead of its own estimate.
    max_request_usd: float | None = None
    # "tenant": hosted upstreams' prefix caches are per tenant too (gateway/isolation.py); "shared": tenants of
    # one provider key share its cache (self-hosted upstreams are salted per tenant either way).
    isolation: Literal["shared", "tenant"] = "shared"
    # A request for a model its provider has retired: send it as asked, with a warning ("warn"), send it to the
    # catalogue's replacement ("replace") or refuse it with a 400 ("refuse"). See gateway/lifecycle.py.
    on_retired: OnRetired = "warn"
    # Scheduling class carried to self-hosted engines (vLLM's `priority`); None: normal, unless the key says.
    priority: Priority | None = None
    # "": the targets are ordered fallbacks; cost or round_robin: one pool serving one model, where a prefix
    # sticks to the target its cache is warm on (policies/balance.py, gateway/sticky.py).
    balance: Balance = ""
    # Refresh idle sessions' prompt caches when it pays, within caps (policies/keepalive.py); off by default.
    keepalive: KeepAlivePolicy = OFF
    # (class, hosted service tier) pairs the route sends (policies/service_tiers.py); (): none, ever.
    service_tiers: tuple[tuple[str, str], ...] = ()

    def serves(self, dialect: str) -> bool:
        return not self.formats or dialect in self.formats

    def keeps_bodies(self, default: bool) -> bool:
        return default if self.ledger_bodies is None else self.ledger_bodies


@dataclass(frozen=True)
class Budget:
    usd: float
    period: str = "month"
    warn_at: float | None = None    # the soft budget, as a share of usd: an alert, never a refusal
    timezone: str = "UTC"           # whose calendar a day or month is (the policy's `timezone` unless the key's own)


@dataclass(frozen=True)
class RateLimit:
    requests_per_minute: int = 0   # 0: unlimited
    tokens_per_minute: int = 0


@dataclass(frozen=True)
class UploadLimit:
    """What the key's party (its tenant, else the key) may keep stored through the Files endpoints (0: no limit)."""

    max_mb: float = 0.0
    max_files: int = 0


@dataclass(frozen=True)
class CallerKey:
    name: str
    key_sha256: str
    tenant: str = ""
    planner: Mode | None = None          # overrides the route's mode for this key
    routes: tuple[str, ...] = ()         # empty: every route
    budget: Budget | None = None
    rate_limit: RateLimit | None = None
    # "read": the key also opens the dashboard and GET /api/* (never the admin-only parts); "": it does not.
    dashboard: Literal["", "read"] = ""
    caller_checkpoints: CallerCheckpoints | None = None   # overrides the route's for this key
    priority: Priority | None = None     # overrides the route's for this key
    # Provider-side ids (files, vector stores, ...) the operator made outside the gateway for this key's holder:
    # it may name them in requests; every other id the gateway never saw created is a 404 (gateway/provider_ids).
    provider_ids: frozenset[str] = frozenset()
    uploads: UploadLimit | None = None   # its tenant's stored files, checked at each upload (gateway/file_quota)


@dataclass(frozen=True)
class Policy:
    upstreams: dict[str, Upstream]
    routes: tuple[Route, ...]
    keys: tuple[CallerKey, ...] = ()
    # Pushed alerts: destinations, rules' thresholds and the gateway's own budget (policies/alerting.py).
    alerting: Alerting = field(default_factory=Alerting)
    # The calendar days and months are counted on (an IANA zone): the gateway budget's, keep-alive caps', and each
    # key budget's that names none of its own.
    timezone: str = "UTC"

    @classmethod
    def from_dict(cls, data: dict[str, Any], builtins: dict[str, Upstream]) -> Policy:
        _only(_mapping(data, ""), "", {"upstreams", "routes", "keys", "alert_webhooks", "alerts", "budget", "timezone"})
        zone = _zone(data.get("timezone", "UTC"), "timezone")
        upstreams = dict(builtins)
        for name, spec in _mapping(data.get("upstreams") or {}, "upstreams").items():
            upstreams[name] = _upstream(name, spec, f"upstreams.{name}", builtins)
        routes = tuple(_route(r, f"routes.{i}", upstreams, zone) for i, r in enumerate(_list(data.get("routes") or [], "routes")))
        if not routes:
            raise PolicyError("routes: at least one route is required")
        names = [r.name for r in routes]
        if len(set(names)) != len(names):
            raise PolicyError(f"routes: route names must be unique, got {names}")
        keys = tuple(_key(k, f"keys.{i}", set(names), zone) for i, k in enumerate(_list(data.get("keys") or [], "keys")))
        # Budgets and rate limits count per key name: two keys of one name would share (and double) one counter.
        key_names = [k.name for k in keys]
        twice = sorted({n for n in key_names if key_names.count(n) > 1})
        if twice:
            raise PolicyError(f"keys: key names must be unique (budgets and rate limits count by name); repeated: {twice}")
        try:
            alerting = parse_alerting(data, PERIODS)
        except ValueError as e:
            raise PolicyError(str(e)) from None
        return cls(upstreams, routes, keys, alerting, zone)


def _upstream(name: str, spec: Any, path: str, builtins: dict[str, Upstream]) -> Upstream:
    spec = _mapping(spec, path)
    _no_plain_secret(spec, path, ("api_key", "key"), "api_key_env (the variable holding the provider key)")
    _only(spec, path, {"kind", "url", "api_key_env", "headers", "region", "provider", "api_version", "deployments",
                       "project", "location", "kv_events"})
    kind = spec.get("kind", builtins[name].kind if name in builtins else None)
    if not _named(kind, KINDS):
        raise PolicyError(f"{path}.kind: must be one of {', '.join(KINDS)}, got {kind!r}")
    record = KINDS[kind]
    if record.placed:
        return _vertex_upstream(name, spec, path)
    if "project" in spec or "location" in spec:
        raise PolicyError(f"{path}: project and location are for kind vertex only")
    region = spec.get("region")
    regional = [k for k in KINDS.values() if k.regional_url]
    if region is not None and (record.regional_url is None or not isinstance(region, str)
                               or not region.replace("-", "").isalnum()):
        raise PolicyError(f"{path}.region: an AWS region such as us-east-1, for kind {' or '.join(k.name for k in regional)} "
                          f"only; got {region!r}")
    provider = spec.get("provider", "")
    if provider and not record.takes_profile:
        raise PolicyError(f"{path}.provider: only an openai_compatible upstream takes a provider profile")
    if provider and not _named(provider, PROFILES):
        raise PolicyError(f"{path}.provider: must be one of {', '.join(PROFILES)}, got {provider!r}")
    api_version = spec.get("api_version", "")
    deployments = _mapping(spec.get("deployments") or {}, f"{path}.deployments")
    deploys = bool(provider) and PROFILES[provider].deployments     # Azure: deployment names in the URL
    if deploys and not (isinstance(api_version, str) and api_version):
        raise PolicyError(f"{path}.api_version: Azure OpenAI needs an api-version, e.g. 2024-10-21")
    if not deploys and (api_version or deployments):
        raise PolicyError(f"{path}: api_version and deployments are for provider: azure only")
    if region and record.regional_url is not None:
        default_url = record.regional_url(region)
    else:
        default_url = builtins[name].url if name in builtins else PROFILES[provider].default_url if provider else ""
    url = spec.get("url", default_url)
    if not record.in_process and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        raise PolicyError(f"{path}.url: an http(s) URL is required for kind {kind}, got {scheme_of(url)}")
    env = spec.get("api_key_env", list(PROFILES[provider].key_env if provider else record.key_envs))
    env = (env,) if isinstance(env, str) else tuple(_list(env, f"{path}.api_key_env"))
    headers = _mapping(spec.get("headers") or {}, f"{path}.headers")
    upstream = Upstream(name, kind, (url or "").rstrip("/"), env, tuple((str(k), str(v)) for k, v in headers.items()),
                        provider, api_version, tuple((str(k), str(v)) for k, v in deployments.items()))
    if "kv_events" in spec:
        upstream = replace(upstream, kv_events=_kv_events(spec["kv_events"], f"{path}.kv_events", upstream))
    return upstream


def _kv_events(spec: Any, path: str, upstream: Upstream) -> KVEventSource:
    spec = _mapping(spec, path)
    _only(spec, path, {"endpoint", "replay", "topic", "tokenizer"})
    if not upstream.self_hosted or upstream.kind_of.in_process:
        raise PolicyError(f"{path}: KV events come from a self-hosted server (openai_compatible, no provider)")
    values = {k: spec.get(k, "") for k in ("endpoint", "replay", "topic", "tokenizer")}
    if not all(isinstance(v, str) for v in values.values()):
        raise PolicyError(f"{path}: endpoint, replay, topic and tokenizer are strings")
    for key in ("endpoint", "replay"):
        if values[key] and "://" not in values[key]:
            raise PolicyError(f"{path}.{key}: a ZMQ address such as tcp://10.0.0.5:5557, got {values[key]!r}")
    if not values["endpoint"] or not values["tokenizer"]:
        raise PolicyError(f"{path}: endpoint and tokenizer are required (the tokenizer hashes prompts as the "
                          "replica does)")
    return KVEventSource(**values)


def _vertex_upstream(name: str, spec: dict, path: str) -> Upstream:
    """`{kind: vertex, project, location}`: project and location default to the gateway's (GOOGLE_CLOUD_PROJECT or
    its service-account key's) and GOOGLE_CLOUD_LOCATION, the URL (Vertex's host, or a proxy's) to
    PREFIXGATE_VERTEX_BASE_URL."""
    extra = sorted(set(spec) - {"kind", "url", "api_key_env", "headers", "project", "location"})
    if extra:
        raise PolicyError(f"{path}.{extra[0]}: not a key of a vertex upstream (project, location, url, api_key_env, "
                          "headers)")
    project, location = _vertex_place(spec, path)
    url = spec.get("url") or vertex.base_url_for(location)
    if not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        raise PolicyError(f"{path}.url: an http(s) URL (Vertex's host) is required, got {scheme_of(url)}")
    env = spec.get("api_key_env", list(KINDS["vertex"].key_envs))
    env = (env,) if isinstance(env, str) else tuple(_list(env, f"{path}.api_key_env"))
    headers = _mapping(spec.get("headers") or {}, f"{path}.headers")
    return Upstream(name, "vertex", vertex.resource_root(url, project, location), env,
                    tuple((str(k), str(v)) for k, v in headers.items()))


def _vertex_place(spec: dict, path: str) -> tuple[str, str]:
    place = {"project": spec.get("project") or vertex.gateway_project(),
             "location": spec.get("location") or os.environ.get("GOOGLE_CLOUD_LOCATION")}
    for key, env in (("project", "GOOGLE_CLOUD_PROJECT"), ("location", "GOOGLE_CLOUD_LOCATION")):
        value = place[key]
        if not value:
            raise PolicyError(f"{path}.{key}: required for a vertex upstream (or set {env})")
        if not isinstance(value, str) or not VERTEX_NAME.match(value):
            raise PolicyError(f"{path}.{key}: a Google Cloud {key} id such as "
                              f"{'my-project' if key == 'project' else 'us-east5 or global'}, got {value!r}")
    return place["project"], place["location"]


def _route(spec: Any, path: str, upstreams: dict[str, Upstream], zone: str = "UTC") -> Route:
    spec = _mapping(spec, path)
    _only(spec, path, {"name", "models", "targets", "planner", "retry", "ledger_bodies", "caller_checkpoints", "formats",
                       "volatile", "never_move", "response_cache", "diagnostics", "diagnostics_per_minute",
                       "price", "max_request_usd", "isolation",
                       "on_retired", "prompt_cache_key", "priority", "keepalive", "balance",
                       "service_tiers"})
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise PolicyError(f"{path}.name: a non-empty string is required")
    models = spec.get("models")
    models = (models,) if isinstance(models, str) else tuple(_list(models, f"{path}.models"))
    if not models or not all(isinstance(m, str) and m for m in models):
        raise PolicyError(f"{path}.models: a list of model names or patterns is required")
    targets = tuple(_target(t, f"{path}.targets.{i}", upstreams)
                    for i, t in enumerate(_list(spec.get("targets"), f"{path}.targets")))
    if not targets:
        raise PolicyError(f"{path}.targets: at least one target is required")
    planner = spec.get("planner", "rewrite")
    if planner not in MODES:
        raise PolicyError(f"{path}.planner: must be one of {', '.join(MODES)}, got {planner!r}")
    bodies = spec.get("ledger_bodies")
    if bodies is not None and not isinstance(bodies, bool):
        raise PolicyError(f"{path}.ledger_bodies: must be true or false, got {bodies!r}")
    formats = spec.get("formats") or []
    formats = (formats,) if isinstance(formats, str) else tuple(_list(formats, f"{path}.formats"))
    unknown = [f for f in formats if not _named(f, WIRE_FORMATS)]
    if unknown:
        raise PolicyError(f"{path}.formats: unknown wire formats {unknown}; known: {', '.join(WIRE_FORMATS)}")
    isolation = spec.get("isolation", "shared")
    if isolation not in ("shared", "tenant"):
        raise PolicyError(f"{path}.isolation: must be shared or tenant, got {isolation!r}")
    diagnostics = spec.get("diagnostics", "on")
    # YAML reads a bare on/off as true/false.
    diagnostics = {True: "on", False: "off"}.get(diagnostics, diagnostics) if isinstance(diagnostics, bool) else diagnostics
    if diagnostics not in ("on", "off"):
        raise PolicyError(f"{path}.diagnostics: must be on or off, got {diagnostics!r}")
    per_minute = spec.get("diagnostics_per_minute", 600)
    cap = spec.get("max_request_usd")
    if not isinstance(per_minute, int) or isinstance(per_minute, bool) or per_minute < 1:
        raise PolicyError(f"{path}.diagnostics_per_minute: must be a positive integer, got {per_minute!r}")
    cache_key = spec.get("prompt_cache_key", "keep")
    cache_key = "off" if cache_key is False else cache_key     # YAML reads a bare off as false
    if cache_key not in CACHE_KEY_MODES:
        raise PolicyError(f"{path}.prompt_cache_key: must be one of {', '.join(CACHE_KEY_MODES)}, got {cache_key!r}")
    try:
        balance = check_balance(spec.get("balance"), targets, upstreams, path)
    except ValueError as e:
        raise PolicyError(str(e)) from None
    on_retired = spec.get("on_retired", "warn")
    if on_retired not in ON_RETIRED:
        raise PolicyError(f"{path}.on_retired: must be one of {', '.join(ON_RETIRED)}, got {on_retired!r}")
    hosted = {n: upstreams[n].kind for t in targets for n in t.upstreams if not upstreams[n].self_hosted}
    try:
        keepalive = replace(parse_keepalive(spec.get("keepalive"), f"{path}.keepalive", PERIODS), timezone=zone)
        tiers = parse_service_tiers(spec.get("service_tiers"), f"{path}.service_tiers", hosted)
    except ValueError as e:
        raise PolicyError(str(e)) from None
    return _prioritised(Route(name, models, targets, planner, _retry(spec.get("retry") or {}, f"{path}.retry"), bodies,
                 _caller_checkpoints(spec.get("caller_checkpoints", "keep"), path), formats, _rewrite_rule(spec, path),
                 _response_cache(spec.get("response_cache") or {}, f"{path}.response_cache"),
                 diagnostics=diagnostics == "on", diagnostics_per_minute=per_minute, isolation=isolation,
                 price=_price(spec.get("price"), f"{path}.price"),
                 max_request_usd=None if cap is None else _number(cap, f"{path}.max_request_usd"),
                 on_retired=on_retired, prompt_cache_key=cache_key, keepalive=keepalive, balance=balance,
                 service_tiers=tiers), spec, path)


def _rewrite_rule(spec: dict, path: str) -> Rule:
    patterns: dict[str, list[str]] = {}
    for key in ("volatile", "never_move"):
        value = spec.get(key) or []
        value = [value] if isinstance(value, str) else _list(value, f"{path}.{key}")
        if not all(isinstance(v, str) and v for v in value):
            raise PolicyError(f"{path}.{key}: a list of regular expressions is required")
        for v in value:
            try:
                re.compile(v)
            except re.error as e:
                raise PolicyError(f"{path}.{key}: {v!r} is not a valid regular expression ({e})") from None
        patterns[key] = value
    return rule_of(patterns["volatile"], patterns["never_move"])


def _response_cache(spec: Any, path: str) -> ResponseCachePolicy:
    spec = _mapping(spec, path)
    _only(spec, path, {"mode", "ttl_s", "max_mb", "tool_calls"})
    d = ResponseCachePolicy()
    mode = spec.get("mode", d.mode)
    if isinstance(mode, bool):      # YAML 1.1 (PyYAML) reads a bare `on` / `off` as true / false
        mode = "on" if mode else "off"
    if mode not in RESPONSE_CACHE_MODES:
        raise PolicyError(f"{path}.mode: must be one of {', '.join(RESPONSE_CACHE_MODES)}, got {mode!r}")
    ttl_s = _number(spec.get("ttl_s", d.ttl_s), f"{path}.ttl_s")
    max_mb = _number(spec.get("max_mb", d.max_mb), f"{path}.max_mb")
    if ttl_s < 1 or max_mb <= 0:
        raise PolicyError(f"{path}: ttl_s must be at least 1 second and max_mb above 0, got {ttl_s} and {max_mb}")
    tool_calls = spec.get("tool_calls", d.tool_calls)
    if not isinstance(tool_calls, bool):
        raise PolicyError(f"{path}.tool_calls: must be true or false, got {tool_calls!r}")
    return ResponseCachePolicy(mode, ttl_s, max_mb, tool_calls)


def _price(spec: Any, path: str) -> Price | None:
    """A route's declared price, USD per million tokens: input and output (cache reads and writes as input
    unless given)."""
    if spec is None:
        return None
    spec = _mapping(spec, path)
    _only(spec, path, {"input", "output", "cache_read"})
    if "input" not in spec or "output" not in spec:
        raise PolicyError(f"{path}: give input and output (USD per million tokens)")
    usd = {k: Decimal(str(_number(v, f"{path}.{k}"))) for k, v in spec.items()}
    return Price(usd["input"], usd["output"], usd.get("cache_read", usd["input"]))


def _target(spec: Any, path: str, upstreams: dict[str, Upstream]) -> TargetRef:
    spec = _mapping(spec, path)
    _only(spec, path, {"upstream", "replicas", "model", "load_factor"})
    if ("upstream" in spec) == ("replicas" in spec):
        raise PolicyError(f"{path}: give exactly one of 'upstream' or 'replicas'")
    names = (spec["upstream"],) if "upstream" in spec else tuple(_list(spec["replicas"], f"{path}.replicas"))
    for n in names:
        if not _named(n, upstreams):
            raise PolicyError(f"{path}: unknown upstream {n!r}; defined: {', '.join(sorted(upstreams))}")
    if len({upstreams[n].dialect for n in names}) > 1:
        raise PolicyError(f"{path}.replicas: replicas must speak one dialect")
    model = spec.get("model")
    if model is not None and (not isinstance(model, str) or not model):
        raise PolicyError(f"{path}.model: must be a non-empty string")
    load_factor = _number(spec.get("load_factor", 1.25), f"{path}.load_factor")
    if load_factor < 1:
        raise PolicyError(f"{path}.load_factor: must be >= 1, got {load_factor}")
    return TargetRef(names, model, load_factor)


def _retry(spec: Any, path: str) -> RetryPolicy:
    # YAML 1.1 (PyYAML) reads a bare `on:` key as true: the documented `retry: {on: [...]}` means `on`.
    spec = {("on" if k is True else k): v for k, v in _mapping(spec, path).items()}
    _only(spec, path, {"attempts", "backoff_s", "max_backoff_s", "timeout_s", "on"})
    d = RetryPolicy()
    attempts = spec.get("attempts", d.attempts)
    if not isinstance(attempts, int) or isinstance(attempts, bool) or not 1 <= attempts <= 10:
        raise PolicyError(f"{path}.attempts: must be an integer from 1 to 10, got {attempts!r}")
    on = tuple(str(x) for x in _list(spec.get("on", list(d.on)), f"{path}.on"))
    bad = [x for x in on if x not in RETRY_ON]
    if bad:
        raise PolicyError(f"{path}.on: unknown conditions {bad}; known: {', '.join(RETRY_ON)}")
    values = {k: _number(spec.get(k, getattr(d, k)), f"{path}.{k}") for k in ("backoff_s", "max_backoff_s", "timeout_s")}
    if values["timeout_s"] <= 0:
        raise PolicyError(f"{path}.timeout_s: must be > 0")
    if values["backoff_s"] > values["max_backoff_s"]:     # every wait would be the cap: a typo, not a choice
        raise PolicyError(f"{path}.backoff_s: {values['backoff_s']:g} is more than max_backoff_s "
                          f"({values['max_backoff_s']:g}), which caps every wait")
    return RetryPolicy(attempts, values["backoff_s"], values["max_backoff_s"], values["timeout_s"], on)


def _key(spec: Any, path: str, routes: set[str], zone: str = "UTC") -> CallerKey:
    spec = _mapping(spec, path)
    _no_plain_secret(spec, path, ("key", "api_key", "secret"), "key_env (a variable holding the key) or key_sha256")
    _only(spec, path, {"name", "key_env", "key_sha256", "tenant", "planner", "routes", "budget", "rate_limit",
                       "dashboard", "caller_checkpoints", "priority", "provider_ids", "uploads"})
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise PolicyError(f"{path}.name: a non-empty string is required")
    if ("key_env" in spec) == ("key_sha256" in spec):
        raise PolicyError(f"{path}: give exactly one of 'key_env' (a variable holding the key) or 'key_sha256'")
    if "key_env" in spec:
        secret = os.environ.get(str(spec["key_env"]))
        if not secret:
            raise PolicyError(f"{path}.key_env: environment variable {spec['key_env']} is not set")
        digest = hash_key(secret)
    else:
        digest = str(spec["key_sha256"]).lower()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise PolicyError(f"{path}.key_sha256: must be 64 hex digits (sha256 of the key)")
    if digest in SAMPLE_DIGESTS:
        raise PolicyError(f"{path}: this key is a sample value from examples (sha256 of {SAMPLE_DIGESTS[digest]!r}); "
                          "use a long random key")
    planner = spec.get("planner")
    if planner is not None and planner not in MODES:
        raise PolicyError(f"{path}.planner: must be one of {', '.join(MODES)}, got {planner!r}")
    allowed = tuple(_list(spec.get("routes") or [], f"{path}.routes"))
    unknown = [r for r in allowed if not _named(r, routes)]
    if unknown:
        raise PolicyError(f"{path}.routes: unknown routes {unknown}")
    budget = None
    if spec.get("budget") is not None:
        b = _mapping(spec["budget"], f"{path}.budget")
        _only(b, f"{path}.budget", {"usd", "period", "warn_at", "timezone"})
        period = b.get("period", "month")
        if not _named(period, PERIODS):
            raise PolicyError(f"{path}.budget.period: must be one of {', '.join(PERIODS)}, got {period!r}")
        warn_at = b.get("warn_at")
        if warn_at is not None and not 0 < _number(warn_at, f"{path}.budget.warn_at") < 1:
            raise PolicyError(f"{path}.budget.warn_at: a share of usd between 0 and 1 (0.8: warn at 80%), got {warn_at!r}")
        budget = Budget(_number(b.get("usd"), f"{path}.budget.usd"), period, warn_at,
                        _zone(b.get("timezone", zone), f"{path}.budget.timezone"))
    limit = None
    if spec.get("rate_limit") is not None:
        r = _mapping(spec["rate_limit"], f"{path}.rate_limit")
        _only(r, f"{path}.rate_limit", {"requests_per_minute", "tokens_per_minute"})
        limit = RateLimit(*(_count(r.get(k, 0), f"{path}.rate_limit.{k}") for k in ("requests_per_minute", "tokens_per_minute")))
    dashboard = spec.get("dashboard", "")
    if dashboard not in ("", "read"):
        raise PolicyError(f"{path}.dashboard: must be 'read' (read-only dashboard access) or absent, got {dashboard!r}")
    caller = spec.get("caller_checkpoints")
    granted = _list(spec.get("provider_ids") or [], f"{path}.provider_ids")
    bad = [i for i in granted if not isinstance(i, str) or not i or i != i.strip()]
    if bad:
        raise PolicyError(f"{path}.provider_ids: each entry is a provider-side id as requests name it "
                          f"(vs_..., file-..., files/..., gs://...), got {bad[0]!r}")
    return _prioritised(CallerKey(name, digest, str(spec.get("tenant", "")), planner, allowed, budget, limit, dashboard,
                     None if caller is None else _caller_checkpoints(caller, path), provider_ids=frozenset(granted),
                     uploads=_uploads(spec.get("uploads"), f"{path}.uploads")),
                        spec, path)


def _uploads(value: Any, path: str) -> UploadLimit | None:
    if value is None:
        return None
    spec = _mapping(value, path)
    _only(spec, path, {"max_mb", "max_files"})
    if not spec:
        raise PolicyError(f"{path}: give max_mb (MiB stored) and/or max_files (files stored)")
    return UploadLimit(_number(spec.get("max_mb", 0), f"{path}.max_mb"),
                       _count(spec.get("max_files", 0), f"{path}.max_files"))


def _caller_checkpoints(value: Any, path: str) -> CallerCheckpoints:
    if value not in CALLER_CHECKPOINTS:
        raise PolicyError(f"{path}.caller_checkpoints: must be one of {', '.join(CALLER_CHECKPOINTS)}, got {value!r}")
    return value


def hash_key(secret: str) -> str:
    """How caller keys are stored and compared: never in plain text."""
    return hashlib.sha256(secret.encode()).hexdigest()


def _mapping(value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise PolicyError(f"{path or 'policy'}: expected a mapping, got {type(value).__name__}")
    return value


def _list(value: Any, path: str) -> list:
    if not isinstance(value, list):
        raise PolicyError(f"{path}: expected a list, got {type(value).__name__}")
    return value


def _number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise PolicyError(f"{path}: expected a non-negative number, got {value!r}")
    return float(value)


def _zone(value: Any, path: str) -> str:
    why = zone_error(value)
    if why:
        raise PolicyError(f"{path}: {why}")
    return value


def _named(value: Any, names: Collection[str]) -> bool:
    """`value` is one of `names`: a list or mapping written where a name belongs is simply not one (`in` on a
    dict or set would raise TypeError, a traceback instead of the key path)."""
    return isinstance(value, str) and value in names


def _count(value: Any, path: str) -> int:
    # A whole number: int() would make 0.5 requests a minute 0, which is no limit at all.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PolicyError(f"{path}: expected a whole number of 0 or more (0: no limit), got {value!r}")
    return value


def _no_plain_secret(spec: dict, path: str, names: tuple[str, ...], instead: str) -> None:
    # A policy file is checked in and copied around: a key in it is a leaked key, so the file only ever
    # names where the key lives (an environment variable) or holds its hash.
    for name in names:
        if name in spec:
            raise PolicyError(f"{path}.{name}: keys are not accepted in plain text in the policy file; use {instead}")


def _only(spec: dict, path: str, allowed: set[str]) -> None:
    extra = sorted(set(spec) - allowed)
    if extra:
        raise PolicyError(f"{path + '.' if path else ''}{extra[0]}: {unknown_key(str(extra[0]), allowed)}")



_Prioritised = TypeVar("_Prioritised", Route, CallerKey)


def _prioritised(item: _Prioritised, spec: dict, path: str) -> _Prioritised:
    priority = spec.get("priority")
    if priority is not None and not _named(priority, ENGINE_PRIORITY):
        raise PolicyError(f"{path}.priority: must be one of {', '.join(ENGINE_PRIORITY)}, got {priority!r}")
    return replace(item, priority=priority)
