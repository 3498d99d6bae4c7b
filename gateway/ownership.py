"""Who owns each piece of provider-side state the gateway relays: explicit caches (Gemini and Vertex
`cachedContents`), stored Responses, and anything stored later (kind is a free string: "cached_content",
"response", "interaction", ...).

Every such resource lives in the gateway's own provider account, so the provider cannot tell tenants apart:
the gateway records, when a resource is created through it, which tenant created it, and answers any other
tenant as if the resource did not exist. An id the gateway never saw created belongs to nobody and is refused
to every keyed caller (fail closed). On an open gateway (no keys) there is one party and nothing is checked.

The owners are kept, with each stored answer's home, by `stored_ids` (the ledger's SQLite file, and Redis
for every replica).
"""

from __future__ import annotations

from prefixgate.policies.schema import CallerKey


def principal(key: CallerKey | None) -> str | None:
    """The party that owns what `key` creates: its tenant, else the key itself (a key *named* like a tenant
    is not that tenant). None on an open gateway, where every caller is one party."""
    if key is None:
        return None
    return f"tenant:{key.tenant}" if key.tenant else f"key:{key.key_sha256}"
