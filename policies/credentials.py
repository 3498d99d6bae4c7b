"""Upstreams a policy routes to that will answer every request 401, for want of the gateway's own key: said at
start, not found out one request at a time."""

from __future__ import annotations

from prefixgate.dialects import wire_format
from prefixgate.policies.schema import Policy


def missing_credentials(policy: Policy) -> list[str]:
    """One line per routed hosted upstream whose key variables are all unset where no caller's key can stand
    in: a compatible provider (another company than the caller's SDK's), Vertex, or any hosted upstream once the
    gateway has caller keys (then callers send gateway keys, never provider keys). Signed formats (Bedrock)
    find their credentials in the AWS chain, and an open gateway forwards a caller's own provider key."""
    routed = dict.fromkeys(n for route in policy.routes for target in route.targets for n in target.upstreams)
    out = []
    for name in routed:
        upstream = policy.upstreams[name]
        if upstream.self_hosted or wire_format(upstream.dialect).signs or upstream.api_key():
            continue
        if upstream.provider or upstream.own_credentials_only or policy.keys:
            env = " or ".join(upstream.api_key_env) or "an api_key_env"
            out.append(f"upstreams.{name}: {env} is not set, so every request routed to {name!r} is answered 401 "
                       "(no credentials for the upstream)")
    return out
