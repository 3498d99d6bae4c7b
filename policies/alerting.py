"""Alerts that push, as policy: where they go (`alert_webhooks`), when they fire (`alerts`), and the
gateway's own budget (`budget`). Validated at the edge like the rest of the policy; every error names its key.

    alert_webhooks:
      - https://hooks.slack.com/services/T000/B000/XXXX          # a URL: the structured JSON body (with `text`)
      - {url: https://chat.example.com/hook, format: slack}      # only {"text": ...}
    alerts: {interval_s: 60, cooldown_s: 3600, ttl_expiry_share: 0.5, retiring_within_days: 30}
    budget: {usd: 2000, warn_at: 0.8, period: month}
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, fields
from typing import Any, Literal
from urllib.parse import urlsplit

FORMATS = ("json", "slack")


@dataclass(frozen=True)
class Destination:
    url: str
    format: Literal["json", "slack"] = "json"

    @property
    def shown(self) -> str:
        """The URL as logs, metrics and the CLI show it: scheme and host only. Webhook URLs carry their secret in
        the path or query (Slack's /services/T/B/secret), so those never leave the process."""
        parts = urlsplit(self.url)
        host = parts.hostname or "?"
        return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}/…"


@dataclass(frozen=True)
class AlertSettings:
    interval_s: float = 60.0            # how often the rules are evaluated
    cooldown_s: float = 3600.0          # an alert (rule and subject) is sent at most once per this
    window_s: float = 3600.0            # what the route rules look back over
    min_requests: int = 5               # a route with fewer requests in the window is not judged
    ttl_expiry_share: float = 0.5       # TTL expiries' share of a route's misses that fires
    min_misses: int = 5
    error_window_s: float = 300.0       # an upstream error burst: this many errors, this share, in this window
    error_count: int = 10
    error_share: float = 0.2
    retiring_within_days: int = 30      # a model in use retiring this soon fires
    forecast_after_s: float = 86400.0   # a period's spend is forecast only once this much of it has passed
    delivery_attempts: int = 4          # per destination, with exponential backoff from delivery_backoff_s
    delivery_backoff_s: float = 1.0
    delivery_timeout_s: float = 5.0


@dataclass(frozen=True)
class GatewayBudget:
    usd: float
    warn_at: float | None = None        # the soft line, as a share of usd
    period: str = "month"


@dataclass(frozen=True)
class Alerting:
    destinations: tuple[Destination, ...] = ()
    settings: AlertSettings = field(default_factory=AlertSettings)
    budget: GatewayBudget | None = None

    def with_urls(self, urls: str) -> Alerting:
        """Plus the comma-separated URLs of PREFIXGATE_ALERT_WEBHOOKS (each one once)."""
        known = {d.url for d in self.destinations}
        extra = tuple(Destination(destination_url(u.strip(), "PREFIXGATE_ALERT_WEBHOOKS"))
                      for u in urls.split(",") if u.strip() and u.strip() not in known)
        return Alerting(self.destinations + extra, self.settings, self.budget)


def destination_url(url: Any, path: str) -> str:
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        shown = url.split("/")[2] if isinstance(url, str) and url.count("/") >= 2 else type(url).__name__
        raise ValueError(f"{path}: an http(s) URL is required (got one for {shown!r})")
    return url


def parse_alerting(data: dict, periods: Collection[str]) -> Alerting:
    """The policy's `alert_webhooks`, `alerts` and `budget` keys (ValueError naming the key at fault)."""
    hooks = data.get("alert_webhooks") or []
    if not isinstance(hooks, list):
        raise ValueError("alert_webhooks: expected a list of URLs or {url, format} mappings")
    destinations = tuple(_destination(h, f"alert_webhooks.{i}") for i, h in enumerate(hooks))
    return Alerting(destinations, _settings(data.get("alerts") or {}), parse_budget(data.get("budget"), "budget", periods))


def _destination(spec: Any, path: str) -> Destination:
    if isinstance(spec, str):
        return Destination(destination_url(spec, path))
    if not isinstance(spec, dict) or set(spec) - {"url", "format"}:
        raise ValueError(f"{path}: a URL, or a mapping with url and format ({' or '.join(FORMATS)})")
    fmt = spec.get("format", "json")
    if fmt not in FORMATS:
        raise ValueError(f"{path}.format: must be {' or '.join(FORMATS)}, got {fmt!r}")
    return Destination(destination_url(spec.get("url"), f"{path}.url"), fmt)


def _settings(spec: Any) -> AlertSettings:
    if not isinstance(spec, dict):
        raise ValueError("alerts: expected a mapping")
    known = {f.name: f for f in fields(AlertSettings)}
    values: dict[str, Any] = {}
    for key, value in spec.items():
        if key not in known:
            raise ValueError(f"alerts.{key}: unknown key; known keys: {', '.join(known)}")
        is_int = known[key].type == "int"
        if isinstance(value, bool) or not isinstance(value, int if is_int else (int, float)) or value < 0:
            raise ValueError(f"alerts.{key}: expected a non-negative {'integer' if is_int else 'number'}, got {value!r}")
        values[key] = value
    out = AlertSettings(**values)
    if out.interval_s <= 0 or out.window_s <= 0 or out.error_window_s <= 0 or out.delivery_timeout_s <= 0:
        raise ValueError("alerts: interval_s, window_s, error_window_s and delivery_timeout_s must be > 0")
    if out.ttl_expiry_share > 1 or out.error_share > 1:
        raise ValueError("alerts: ttl_expiry_share and error_share are shares, from 0 to 1")
    if out.delivery_attempts < 1:
        raise ValueError("alerts.delivery_attempts: must be at least 1")
    return out


def parse_budget(spec: Any, path: str, periods: Collection[str]) -> GatewayBudget | None:
    if spec is None:
        return None
    if not isinstance(spec, dict) or set(spec) - {"usd", "warn_at", "period"}:
        raise ValueError(f"{path}: a mapping with usd, and optionally warn_at and period")
    usd = spec.get("usd")
    if isinstance(usd, bool) or not isinstance(usd, (int, float)) or usd <= 0:
        raise ValueError(f"{path}.usd: expected a positive number, got {usd!r}")
    warn_at = spec.get("warn_at")
    if warn_at is not None and (isinstance(warn_at, bool) or not isinstance(warn_at, (int, float)) or not 0 < warn_at < 1):
        raise ValueError(f"{path}.warn_at: a share of usd between 0 and 1 (0.8: warn at 80%), got {warn_at!r}")
    period = spec.get("period", "month")
    if not isinstance(period, str) or period not in periods:
        raise ValueError(f"{path}.period: must be one of {', '.join(periods)}, got {period!r}")
    return GatewayBudget(float(usd), None if warn_at is None else float(warn_at), period)
