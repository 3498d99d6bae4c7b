"""A route's keep-alive policy: whether the gateway may refresh an idle session's prompt cache, and the caps on
what those refreshes may spend (gateway/keepalive.py is the mechanism; cache_planner decides when one pays).

    keepalive:
      mode: on            # default off
      route_usd: 5        # all keys' refreshes on this route, per period
      key_usd: 0.5        # each key's refreshes on this route, per period
      period: day         # minute, hour, day, month or total
      upgrade: true       # default true: a Claude chat's entry may be rewritten 1h through its reply

The gateway spends money nobody asked for when it refreshes, so a route that turns keep-alive on must cap it:
both caps are required. Refreshes are billed to the session's key like its requests (its budget applies too).
`upgrade: false` keeps refreshes to re-reads of the prefix: no reply is held or re-sent
(`cache_planner.keepalive.upgrade_body`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class KeepAlivePolicy:
    on: bool = False
    route_usd: float = 0.0
    key_usd: float = 0.0
    period: str = "day"
    upgrade: bool = True
    timezone: str = "UTC"       # the policy's: whose calendar the caps' day or month is


OFF = KeepAlivePolicy()


def parse_keepalive(spec: Any, path: str, periods: Collection[str]) -> KeepAlivePolicy:
    """`spec` as written under a route's `keepalive` (absent: off); a ValueError names what is wrong."""
    if spec is None or spec is False or spec == "off":
        return OFF
    if spec is True or spec == "on":
        raise ValueError(f"{path}: keep-alive spends on the caller's behalf, so it needs its caps: "
                         "{mode: on, route_usd: ..., key_usd: ..., period: day}")
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: on, off, or a mapping {{mode, route_usd, key_usd, period, upgrade}}; got {spec!r}")
    extra = sorted(set(spec) - {"mode", "route_usd", "key_usd", "period", "upgrade"})
    if extra:
        raise ValueError(f"{path}.{extra[0]}: unknown key; known keys: key_usd, mode, period, route_usd, upgrade")
    upgrade = spec.get("upgrade", True)
    if not isinstance(upgrade, bool):
        raise ValueError(f"{path}.upgrade: true or false, got {upgrade!r}")
    mode = spec.get("mode", "off")
    mode = {True: "on", False: "off"}[mode] if isinstance(mode, bool) else mode    # YAML reads on/off as bools
    if mode not in ("on", "off"):
        raise ValueError(f"{path}.mode: must be on or off, got {spec.get('mode')!r}")
    period = spec.get("period", "day")
    if not isinstance(period, str) or period not in periods:
        raise ValueError(f"{path}.period: must be one of {', '.join(periods)}, got {period!r}")
    caps = {}
    for name in ("route_usd", "key_usd"):
        value = spec.get(name)
        if mode == "on" and value is None:
            raise ValueError(f"{path}.{name}: required with mode on (USD per {period})")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
            raise ValueError(f"{path}.{name}: a positive number of USD per {period}, got {value!r}")
        caps[name] = float(value or 0)
    return KeepAlivePolicy(mode == "on", caps["route_usd"], caps["key_usd"], period, upgrade)
