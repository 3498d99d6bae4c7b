"""OpenAI's `prompt_cache_key`: what a route does with the caller's, and the key the planner derives.

OpenAI routes a request to a cache machine by a hash of its first ~256 tokens plus `prompt_cache_key`
(provider-caching.md O2/O3): the key is meant to group requests that share a prefix. Clients often send
one per session (Codex CLI), which splits sessions that share their instructions across machines, each
paying the whole prefix. A route chooses:

- `derive`: replace the caller's key with one derived from the static prefix the planner settled (tools,
  instructions, system; after the static-first rewrite) and the tenant, so one tenant's sessions with the
  same instructions share a machine, different prefixes never share a key, and tenants never share one;
- `keep`: send the caller's key; where it sent none, one derived from the static prefix alone, the same for
  every tenant (tenants of one provider key share its cache unless the route's `isolation` is `tenant`);
- `off`: send no key at all.

The derived key is a hash: it reveals neither the tenant nor the prompt. The gateway passes the tenant as an
opaque value only it can compute (an HMAC of the caller's party under its server secret, gateway/isolation.py).
"""

from __future__ import annotations

import hashlib
from typing import Literal

from prefixgate.dialects.body import DROP
from prefixgate.ir import Conversation

CacheKeyMode = Literal["derive", "keep", "off"]
CACHE_KEY_MODES: tuple[CacheKeyMode, ...] = ("derive", "keep", "off")
FIELD = "prompt_cache_key"


def derived_key(tenant: str, static_key: str) -> str:
    """The key for `static_key` (the static prefix's chained hash) within `tenant`: 24 hex digits after `pg-`."""
    digest = hashlib.blake2b(static_key.encode(), digest_size=12, person=b"pg-cache-key",
                             key=hashlib.sha256(f"prefixgate-tenant:{tenant}".encode()).digest())
    return "pg-" + digest.hexdigest()


def settle_cache_key(conv: Conversation, static_key: str, mode: CacheKeyMode, tenant: str, notes: list[str]) -> str:
    """Set `prompt_cache_key` on `conv` (in `cache_params`) under `mode`; returns the key sent ("" for none)."""
    caller = conv.params.get(FIELD)
    if mode == "off":
        if caller is not None:
            conv.cache_params[FIELD] = DROP
            notes.append("cache: prompt_cache_key off for this route; the caller's key was removed")
        return ""
    if mode == "keep" and caller is not None:
        notes.append("cache: prompt_cache_key kept as the caller sent it")
        return caller if isinstance(caller, str) else ""
    if not static_key:
        return ""
    key = derived_key(tenant if mode == "derive" else "", static_key)
    conv.cache_params[FIELD] = key
    if caller is not None:
        notes.append(f"cache: prompt_cache_key {key} derived from the static prefix replaces the caller's, so "
                     "sessions sharing these instructions share one cache machine")
    else:
        notes.append(f"cache: prompt_cache_key {key} from the static prefix hash keeps its requests on one cache machine")
    return key
