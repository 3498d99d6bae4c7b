"""Who is calling, and which credential goes upstream.

Callers authenticate the way their SDK does (`Authorization: Bearer`, `x-api-key`, `x-goog-api-key`,
Azure's `api-key`, `?key=`). With `keys` in the policy, that credential must be one of them (stored as
sha256). Without keys the gateway is open, and a caller's own provider key is forwarded to that same
provider when the gateway has none of its own: a drop-in proxy that needs no configuration.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from prefixgate.dialects import wire_format
from prefixgate.errors import RequestError
from prefixgate.gateway.ownership import principal
from prefixgate.policies.schema import CallerKey, Upstream, hash_key


@dataclass(frozen=True)
class Caller:
    key: CallerKey | None      # the policy key matched; None on an open gateway
    credential: str | None     # what the caller sent; never logged


def credential(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization")
    if auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return (headers.get("x-api-key") or headers.get("x-goog-api-key") or headers.get("api-key") or query.get("key")
            or None)


def authenticate(headers: Mapping[str, str], query: Mapping[str, str], keys: Mapping[str, CallerKey]) -> Caller:
    cred = credential(headers, query)
    if not keys:
        return Caller(None, cred)
    if cred is None:
        raise RequestError("missing API key: send the gateway key as your SDK's api_key", status=401, kind="authentication")
    key = keys.get(hash_key(cred))
    if key is None:
        raise RequestError("invalid API key for this gateway", status=401, kind="authentication")
    return Caller(key, cred)


def upstream_credential(upstream: Upstream, caller: Caller, caller_dialect: str) -> str | None:
    """The key to send `upstream`: the gateway's own, else (open gateway, same provider) the caller's.
    None where no key is needed: a self-hosted server, or a provider whose requests the gateway signs with
    its own credentials (Bedrock's SigV4)."""
    own = upstream.api_key()
    if own:
        return own
    if caller.key is None and issued_by(upstream, caller_dialect):
        return caller.credential
    if upstream.self_hosted or wire_format(upstream.dialect).signs:
        return None     # self-hosted servers need no key; signing formats sign with the gateway's own credentials
    env = " or ".join(upstream.api_key_env) or "an api_key_env"
    # The gateway is not set up for this, whatever key the caller sent: not a 401, which its SDK (and Claude
    # Code's "run /login") would read as the caller's own key refused.
    raise RequestError(f"no credentials for upstream {upstream.name!r}: set {env} on the gateway",
                       status=501, kind="not_configured")


def party_of(caller: Caller, upstream: Upstream, caller_dialect: str) -> str:
    """The party whose learned state a request joins (the planner's routes, keep-alive's sessions): the key's
    tenant or the key itself; on an open gateway, where each caller's own provider key goes upstream, a hash of
    that key (what the provider caches for it, explicit caches included, lives in that key's account, and one
    caller's must never be planned into or credited to another's requests); else "-", the one open party."""
    party = principal(caller.key)
    if party is not None:
        return party
    if caller.credential and not upstream.api_key() and issued_by(upstream, caller_dialect):
        return "credential:" + hashlib.sha256(caller.credential.encode()).hexdigest()[:16]
    return "-"


def issued_by(upstream: Upstream, caller_dialect: str) -> bool:
    """Whether a caller's key, sent the way `caller_dialect`'s SDK sends it, was issued by `upstream`'s provider
    itself: never a compatible provider (OpenRouter, DeepSeek, Azure: another company, however alike their API),
    a self-hosted server, or an upstream that takes only the gateway's own credentials (Vertex)."""
    return upstream.hosted and not upstream.own_credentials_only and same_provider(upstream.dialect, caller_dialect)


def same_provider(upstream_dialect: str, caller_dialect: str) -> bool:
    """Whether a caller's key is good upstream: one provider's formats (Chat Completions and Responses,
    InvokeModel and Converse) share keys."""
    return wire_format(upstream_dialect).planner_provider == wire_format(caller_dialect).planner_provider
