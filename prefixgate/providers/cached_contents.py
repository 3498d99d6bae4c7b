"""Gemini explicit caches: the `cachedContents` resources of one workspace, with their lifetimes and storage.

A cached content holds contents, system instruction, tools and tool config for one model. Creating it
bills its tokens at the input rate; each request that names it reads them at the cached rate; while it
exists, it bills storage per token-hour (G1, G2, G5 in the fact sheet). Only `ttl`/`expireTime` can be
updated; a request that uses it may not send its own system instruction, tools or tool config.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from prefixgate.errors import RequestError

_DURATION = re.compile(r"^(\d+)(\.\d{1,9})?s$")
CONTENT_KEYS = ("contents", "systemInstruction", "system_instruction", "tools", "toolConfig", "tool_config")
_MUTABLE = {"ttl", "expireTime", "expire_time"}
_IMMUTABLE = {"model", "displayName", "display_name", "name", *CONTENT_KEYS}


@dataclass
class CachedContent:
    name: str
    model: str            # resolved model id
    model_path: str       # as the caller named it: models/{model}
    display_name: str
    tokens: int
    create_time: float
    update_time: float
    expire_time: float
    deleted_at: float | None = None

    def alive(self, now: float) -> bool:
        return self.deleted_at is None and now < self.expire_time

    def ended_at(self) -> float:
        """When storage billing stops: deletion, or expiry if it came first."""
        return self.expire_time if self.deleted_at is None else min(self.deleted_at, self.expire_time)

    def token_hours(self, until: float | None = None) -> Decimal:
        """Storage used: tokens x hours alive (up to `until` when given, for an interim bill)."""
        end = self.ended_at() if until is None else min(until, self.ended_at())
        seconds = Decimal(str(max(end - self.create_time, 0.0)))
        return Decimal(self.tokens) * seconds / Decimal(3600)

    def resource(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "model": self.model_path}
        if self.display_name:
            out["displayName"] = self.display_name
        out |= {
            "createTime": rfc3339(self.create_time),
            "updateTime": rfc3339(self.update_time),
            "expireTime": rfc3339(self.expire_time),
            "usageMetadata": {"totalTokenCount": self.tokens},
        }
        return out


class CachedContentRegistry:
    """Every tenant's cached contents; names are unique per tenant."""

    def __init__(self, default_ttl_s: float) -> None:
        self.default_ttl_s = default_ttl_s
        self._by_tenant: dict[str, dict[str, CachedContent]] = {}
        self._created = 0

    def create(self, tenant: str, body: dict, model_id: str, tokens: int, min_tokens: int, now: float) -> CachedContent:
        if tokens < min_tokens:
            raise RequestError(
                f"Cached content is too small. total_token_count={tokens}, min_total_token_count={min_tokens}",
                field="contents")
        expire = _expiry(body, now, self.default_ttl_s)
        name = body.get("name") or self._new_name(tenant, body, now)
        if not isinstance(name, str) or not name.startswith("cachedContents/"):
            raise RequestError(f"name: expected 'cachedContents/{{id}}', got {name!r}", field="name")
        self._created += 1
        display = body.get("displayName", body.get("display_name", ""))
        if not isinstance(display, str) or len(display) > 128:
            raise RequestError("displayName: expected a string of at most 128 characters", field="displayName")
        model_path = body["model"] if str(body["model"]).startswith("models/") else f"models/{body['model']}"
        content = CachedContent(name, model_id, model_path, display, tokens, now, now, expire)
        self._by_tenant.setdefault(tenant, {})[name] = content
        return content

    def get(self, tenant: str, name: str, now: float) -> CachedContent:
        content = self._by_tenant.get(tenant, {}).get(name)
        if content is None or not content.alive(now):
            # Gemini answers an unknown or expired cache this way, not with a 404.
            raise RequestError(f"CachedContent not found (or permission denied): {name}", field="cachedContent",
                               status=403, kind="permission")
        return content

    def list(self, tenant: str, now: float) -> list[CachedContent]:
        return sorted((c for c in self._by_tenant.get(tenant, {}).values() if c.alive(now)),
                      key=lambda c: (c.create_time, c.name))

    def update(self, tenant: str, name: str, body: dict, now: float) -> CachedContent:
        content = self.get(tenant, name, now)
        for key in body:
            if key in _IMMUTABLE:
                raise RequestError(f"{key}: only ttl or expireTime can be updated on a cached content", field=key)
            if key not in _MUTABLE:
                raise RequestError(f"Invalid JSON payload received. Unknown name \"{key}\"", field=key)
        if not set(body) & _MUTABLE:
            raise RequestError("ttl: an update must set ttl or expireTime", field="ttl")
        content.expire_time = _expiry(body, now, self.default_ttl_s)
        content.update_time = now
        return content

    def delete(self, tenant: str, name: str, now: float) -> CachedContent:
        content = self.get(tenant, name, now)
        content.deleted_at = now
        return content

    def by_tenant(self) -> dict[str, list[CachedContent]]:
        """Every cached content ever created, deleted and expired ones included (for storage accounting)."""
        return {t: sorted(c.values(), key=lambda c: (c.create_time, c.name)) for t, c in self._by_tenant.items()}

    def _new_name(self, tenant: str, body: dict, now: float) -> str:
        seed = f"{tenant}\0{now}\0{self._created}\0{sorted(body)}".encode()
        return "cachedContents/" + hashlib.sha256(seed).hexdigest()[:24]


def _expiry(body: dict, now: float, default_ttl_s: float) -> float:
    ttl = body.get("ttl")
    expire = body.get("expireTime", body.get("expire_time"))
    if ttl is not None and expire is not None:
        raise RequestError("ttl: set either ttl or expireTime, not both", field="ttl")
    if ttl is not None:
        match = _DURATION.match(ttl) if isinstance(ttl, str) else None
        if match is None:
            raise RequestError(f"ttl: expected a duration such as \"3600s\", got {ttl!r}", field="ttl")
        return now + float(ttl[:-1])
    if expire is not None:
        at = parse_rfc3339(expire, "expireTime")
        if at <= now:
            raise RequestError("expireTime: must be in the future", field="expireTime")
        return at
    return now + default_ttl_s


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(value: Any, field: str) -> float:
    if not isinstance(value, str):
        raise RequestError(f"{field}: expected an RFC 3339 timestamp", field=field)
    text = value.replace("Z", "+00:00")
    # Python 3.11 parses at most 6 fractional digits; RFC 3339 allows up to 9.
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise RequestError(f"{field}: {value!r} is not an RFC 3339 timestamp", field=field) from None
