"""A route's `keepalive` policy, validated at load: off by default, and on only with both caps (the gateway spends
on the callers' behalf when it refreshes, so an operator must say how much)."""

from __future__ import annotations

import pytest
import yaml

from prefixgate.config import Settings
from prefixgate.policies import Policy, PolicyError, builtin_upstreams
from prefixgate.policies.keepalive import KeepAlivePolicy

BUILTINS = builtin_upstreams(Settings(ledger_path=":memory:"))


def route_with(keepalive: object) -> Policy:
    route = {"name": "agent", "models": ["m"], "targets": [{"upstream": "anthropic"}]}
    if keepalive is not ...:
        route["keepalive"] = keepalive
    return Policy.from_dict({"routes": [route]}, BUILTINS)


def test_keepalive_is_off_unless_a_route_turns_it_on_with_caps():
    assert route_with(...).routes[0].keepalive == KeepAlivePolicy(on=False)
    assert route_with("off").routes[0].keepalive.on is False
    # YAML reads a bare `off` / `on` as false / true.
    assert route_with(yaml.safe_load("off")).routes[0].keepalive.on is False
    on = route_with(yaml.safe_load("{mode: on, route_usd: 5, key_usd: 0.5, period: hour}")).routes[0].keepalive
    assert on == KeepAlivePolicy(on=True, route_usd=5.0, key_usd=0.5, period="hour")
    assert route_with({"mode": "on", "route_usd": 5, "key_usd": 1}).routes[0].keepalive.period == "day"


@pytest.mark.parametrize("keepalive,message", [
    ("on", r"routes\.0\.keepalive: keep-alive spends on the caller's behalf, so it needs its caps"),
    (True, r"routes\.0\.keepalive: keep-alive spends"),
    ({"mode": "on", "key_usd": 1}, r"routes\.0\.keepalive\.route_usd: required with mode on"),
    ({"mode": "on", "route_usd": 1}, r"routes\.0\.keepalive\.key_usd: required with mode on"),
    ({"mode": "on", "route_usd": 0, "key_usd": 1}, r"routes\.0\.keepalive\.route_usd: a positive number of USD per day"),
    ({"mode": "on", "route_usd": 1, "key_usd": -2}, r"routes\.0\.keepalive\.key_usd: a positive number"),
    ({"mode": "on", "route_usd": "5", "key_usd": 1}, r"routes\.0\.keepalive\.route_usd: a positive number"),
    ({"mode": "on", "route_usd": 1, "key_usd": 1, "period": "week"}, r"routes\.0\.keepalive\.period: must be one of"),
    ({"mode": "sometimes"}, r"routes\.0\.keepalive\.mode: must be on or off"),
    ({"mode": "on", "route_usd": 1, "key_usd": 1, "cap": 3}, r"routes\.0\.keepalive\.cap: unknown key"),
    (3, r"routes\.0\.keepalive: on, off, or a mapping"),
])
def test_bad_keepalive_policies_name_the_key(keepalive, message):
    with pytest.raises(PolicyError, match=message):
        route_with(keepalive)
