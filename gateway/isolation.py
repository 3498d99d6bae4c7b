"""Keeping one tenant's cache state unobservable to another.

Every tenant behind one provider key shares that provider's prefix cache: a tenant that guesses another's
prompt exactly reads it from the cache (usage, latency), which confirms the guess. Two remedies:

- Self-hosted upstreams get a `cache_salt` on every keyed request (`tenant_cache_isolation`): an HMAC of the
  caller's party (`ownership.principal`: its tenant, else the key itself) under a server secret, so a salt
  cannot be computed from a tenant's name, nor is a key named like a tenant that tenant.
- A route with `isolation: tenant` makes hosted upstreams' caches per tenant too: the first block of the
  prompt in its provider's cache order (the first tool's description, else the system prompt: each format's
  `WireFormat.tag_prompt`) starts with a short tag derived the same way, so every prefix one tenant caches differs from every other tenant's from its
  first tokens. The cost: tenants no longer share cache entries (each pays its own cache writes and misses a
  prefix another tenant warmed), and each request carries the tag's ~10 tokens.

The secret is `tenant_secret` when set, else one drawn once and kept in the ledger's SQLite file (and, with
Redis, the one every replica agrees on), so salts and tags are stable across restarts and replicas.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import sqlite3

from redis.exceptions import RedisError

log = logging.getLogger("prefixgate.gateway")
REDIS_KEY = "prefixgate:tenant-secret"


def server_secret(configured: str, sqlite_path: str, redis_url: str = "") -> bytes:
    if configured:
        return configured.encode()
    value = _kept(sqlite_path)
    if redis_url:
        import redis

        try:
            client = redis.Redis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
            client.set(REDIS_KEY, value, nx=True)
            fleet = client.get(REDIS_KEY).decode()
            client.close()
        except (RedisError, OSError):
            log.warning("redis unreachable at start: tenant salts are this replica's until it restarts with redis")
        else:
            # Kept in the file too: a restart while Redis is down (or after it lost its data) keeps the fleet's.
            value = _kept(sqlite_path, fleet) if fleet != value else value
    return value.encode()


def _kept(sqlite_path: str, fleet: str = "") -> str:
    """The secret in the ledger's file: drawn once, or replaced by the `fleet`'s."""
    db = sqlite3.connect(sqlite_path, timeout=10, uri=True)
    try:
        with db:
            db.execute("CREATE TABLE IF NOT EXISTS gateway_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("INSERT OR IGNORE INTO gateway_secrets VALUES ('tenant', ?)", (secrets.token_hex(32),))
            if fleet:
                db.execute("UPDATE gateway_secrets SET value = ? WHERE name = 'tenant'", (fleet,))
        return db.execute("SELECT value FROM gateway_secrets WHERE name = 'tenant'").fetchone()[0]
    finally:
        db.close()


def tenant_salt(secret: bytes, party: str) -> str:
    """A self-hosted upstream's `cache_salt` for `party` (a principal)."""
    return hmac.new(secret, f"salt:{party}".encode(), hashlib.sha256).hexdigest()[:32]


def tenant_tag(secret: bytes, party: str) -> str:
    return f"[tenant {hmac.new(secret, f'tag:{party}'.encode(), hashlib.sha256).hexdigest()[:12]}]"

