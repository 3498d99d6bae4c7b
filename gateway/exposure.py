"""What a gateway exposes to whoever can reach its port, and which of that counts as an exposure.

This is the policy only: `protected_mode.py` decides what start-up does about it. An exposure is something
anyone reaching a non-loopback bind could do that costs or reveals the operator's: spend the gateway's
provider keys or self-hosted compute without a caller key (an open relay), or read the dashboard and its
API (spend, routes, plan explanations; prompts too with ledger bodies) without the admin token. A loopback
bind exposes nothing: only this machine reaches it.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

from prefixgate.bind import is_loopback
from prefixgate.config import Settings
from prefixgate.dialects import wire_format
from prefixgate.policies import Policy

CALLER_KEY_SETTING = "caller keys: `keys:` in the policy file (policy_file), each with key_env or key_sha256"


@dataclass(frozen=True)
class Exposure:
    what: str      # what anyone reaching the port can do
    closes: str    # the setting that closes it


@dataclass(frozen=True)
class Summary:
    bind: str
    loopback: bool
    caller_keys: str      # none (open) / virtual (the policy's keys) / forwarded (callers' own provider keys)
    dashboard_auth: str
    ledger_bodies: str
    redis: str
    otel: str
    exposures: tuple[Exposure, ...]
    open_gateway: bool

    def line(self) -> str:
        """The one start-up log line."""
        accepted = " (accepted: open_gateway)" if self.exposures and self.open_gateway else ""
        return (f"bind {self.bind}; caller keys: {self.caller_keys}; dashboard auth: {self.dashboard_auth}; "
                f"ledger bodies: {self.ledger_bodies}; redis: {self.redis}; otel export: {self.otel}; "
                f"exposures: {len(self.exposures)}{accepted}")

    def to_dict(self) -> dict:
        return asdict(self)

    def render(self) -> str:
        """The `prefixgate serve --check` report: one item per line, then each exposure and what closes it."""
        rows = [("bind", self.bind), ("caller keys", self.caller_keys), ("dashboard auth", self.dashboard_auth),
                ("ledger bodies", self.ledger_bodies), ("redis", self.redis), ("otel export", self.otel)]
        out = [f"{name + ':':<16}{value}" for name, value in rows]
        if not self.exposures:
            out.append("exposures:      none")
        for e in self.exposures:
            out.append(f"EXPOSED: {e.what}\n  close it with {e.closes}")
        if self.exposures:
            out.append("accepted with open_gateway: true (--open)" if self.open_gateway else
                       "or bind to 127.0.0.1 (host), or accept with open_gateway: true (--open)")
        return "\n".join(out)


def summarize(settings: Settings, policy: Policy) -> Summary:
    loopback = is_loopback(settings.host)
    used = {name for route in policy.routes for ref in route.targets for name in ref.upstreams}
    upstreams = [policy.upstreams[n] for n in sorted(used)]
    # The environment variable each hosted upstream's own key comes from, where it is set.
    held = sorted({next(v for v in u.api_key_env if os.environ.get(v)) for u in upstreams
                   if not u.self_hosted and u.api_key()})
    self_hosted = sorted(u.name for u in upstreams if u.self_hosted)
    # A signing upstream (Bedrock's SigV4, Vertex's OAuth) signs with whatever credentials the gateway can
    # resolve, and an instance role or ADC resolves lazily from metadata with nothing set in the environment:
    # reachable at all, it spends the operator's cloud account.
    signers = sorted(u.name for u in upstreams if not u.self_hosted and wire_format(u.dialect).signs)
    exposures = []
    if policy.keys:
        readers = sum(k.dashboard == "read" for k in policy.keys)
        mode = f"virtual ({_count(len(policy.keys), 'key')}, {readers} with read-only dashboard access)"
    elif held or self_hosted or signers:
        spends = ([f"this gateway's provider keys ({', '.join(held)})"] if held else []) + \
                 ([f"this gateway's cloud credentials, signed for upstreams {', '.join(signers)} "
                   "(environment, instance role or ADC)"] if signers else []) + \
                 ([f"self-hosted upstreams ({', '.join(self_hosted)})"] if self_hosted else [])
        mode = "none (anyone may send model requests; they spend " + " and ".join(spends) + ")"
        exposures.append(Exposure(f"model requests from callers with no key spend {' and '.join(spends)}",
                                  CALLER_KEY_SETTING))
    else:
        mode = "forwarded (callers' own provider keys go to the same provider; the gateway holds none)"
    if settings.admin_token:
        dashboard = "admin_token"
    else:
        dashboard = "none (/dashboard and /api/* open to anyone who reaches the port)"
        exposures.append(Exposure("the dashboard and /api/* (spend, routes, plan explanations) are open to anyone",
                                  "admin_token (PREFIXGATE_ADMIN_TOKEN)"))
    return Summary(
        bind=f"{settings.host}:{settings.port} ({'loopback' if loopback else 'reachable beyond this machine'})",
        loopback=loopback, caller_keys=mode, dashboard_auth=dashboard, ledger_bodies=_bodies(settings, policy),
        redis=_redis(settings.redis_url), otel=_otel(settings.otel),
        exposures=() if loopback else tuple(exposures), open_gateway=settings.open_gateway)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _bodies(settings: Settings, policy: Policy) -> str:
    kept = [r.name for r in policy.routes if r.keeps_bodies(settings.ledger_bodies)]
    if not kept:
        return "off (the ledger holds usage, cost and plan explanations, no prompts)"
    scope = "every route" if len(kept) == len(policy.routes) else "routes " + ", ".join(kept)
    return f"on for {scope} (the ledger holds those prompts)"


def _redis(url: str) -> str:
    if not url:
        return "not used"
    parts = urlsplit(url)
    where = parts.hostname or parts.path or "?"
    if parts.scheme == "rediss":
        return f"TLS ({where})"
    if parts.scheme == "unix" or is_loopback(where):
        return f"no TLS, local ({where})"
    return f"no TLS ({where}: ledger records cross the network in the clear; use rediss://)"


def _otel(mode: str) -> str:
    if mode == "off":
        return "off"
    if mode == "auto":
        return "auto (spans go wherever the process's tracer provider sends them; none unless one is set)"
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    if exporter != "otlp":
        return f"on (OTEL_TRACES_EXPORTER={exporter}; spans carry no keys or prompt text)"
    # The OTLP exporter's own variables and default (opentelemetry-exporter-otlp-proto-http).
    target = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
              or "http://localhost:4318")
    return f"on (OTLP to {target}; spans carry no keys or prompt text)"
