"""The provider's own miss reasons (gateway/diagnostics.py) joined with the ones the misses view infers.

Per route: dollars lost by provider reason (its missed tokens priced at the input rate less the cache-read
rate), and how often the inference agreed with the provider on the misses both diagnosed. Where both speak,
the provider wins the "why": the disagreements are where the inference has something to learn.
"""

from __future__ import annotations

from decimal import Decimal

from prefixgate.cost import MTOK
from prefixgate.gateway.pricing import price_for
from prefixgate.ledger import LedgerRecord
from prefixgate.policies.kinds import catalogue_provider
from prefixgate.providers.rules import Catalog

LABELS = {
    # Anthropic (diagnostics.cache_miss_reason.type)
    "model_changed": "model changed",
    "system_changed": "system prompt changed",
    "tools_changed": "tools changed",
    "messages_changed": "an earlier message changed",
    "previous_message_not_found": "previous message not found: expired or unknown",
    # OpenAI Responses (prompt_cache_diagnostics.reason / type)
    "prompt_cache_key_changed": "prompt_cache_key changed",
    "text_format_changed": "text format changed",
    "reasoning_effort_changed": "reasoning effort changed",
    "verbosity_changed": "verbosity changed",
    "service_tier_changed": "service tier changed",
    "context_compacted": "context compacted",
    "input_changed": "input changed",
    "comparison_response_not_found": "comparison response not found: expired or unknown",
}
# Verdicts that say nothing about why: never shown as a reason, never compared.
SILENT = {"", "unavailable", "pending", "cache_hit"}
PREFIX_EDITS = {"prefix_changed", "volatile_span", "blocks_reordered"}
# The inferred reasons (misses.LABELS) that say what the provider's reason says.
AGREES = {
    "tools_changed": {"tools_changed", "tools_reordered"},
    "system_changed": PREFIX_EDITS,
    "messages_changed": PREFIX_EDITS,
    "input_changed": PREFIX_EDITS,
    "previous_message_not_found": {"ttl_expired", "provider"},
    "comparison_response_not_found": {"ttl_expired", "provider"},
    "model_changed": {"cold"},      # the inference chains requests per model: a new model reads as cold
}


def speaks(rec: LedgerRecord) -> bool:
    # Rows an older version wrote read the column as NULL: said nothing.
    return (rec.provider_miss_reason or "") not in SILENT


def provider_lost_usd(rec: LedgerRecord, catalog: Catalog | None = None) -> Decimal:
    """What the tokens the provider says it missed would have saved, read from cache instead."""
    if not rec.provider_missed_tokens:
        return Decimal(0)
    price = price_for(catalogue_provider(rec.provider), rec.model, rec.usage, catalog)
    if price is None:
        return Decimal(0)
    return max(Decimal(0), rec.provider_missed_tokens * (price.input - price.cache_read) / MTOK)


class ProviderJoin:
    """One route's provider reasons, fed record by record with the inferred reason where there is one."""

    def __init__(self) -> None:
        self.reasons: dict[str, dict] = {}
        self.compared = 0
        self.agreed = 0

    def add(self, rec: LedgerRecord, inferred: str | None, catalog: Catalog | None) -> None:
        reason = rec.provider_miss_reason
        entry = self.reasons.setdefault(reason, {"reason": reason, "label": LABELS.get(reason, reason),
                                                 "count": 0, "missed_tokens": 0, "missed_usd": Decimal(0),
                                                 "compared": 0, "agreed": 0})
        entry["count"] += 1
        entry["missed_tokens"] += rec.provider_missed_tokens or 0
        entry["missed_usd"] += provider_lost_usd(rec, catalog)
        entry.update(request_id=rec.id, inferred=inferred)
        if inferred is not None:
            agreed = inferred in AGREES.get(reason, ())
            entry["compared"] += 1
            entry["agreed"] += agreed
            self.compared += 1
            self.agreed += agreed

    def summary(self) -> dict | None:
        if not self.reasons:
            return None
        ranked = sorted(self.reasons.values(), key=lambda e: (-e["missed_usd"], -e["count"]))
        for e in ranked:
            e["missed_usd"] = str(e["missed_usd"])
        return {"reasons": ranked, "top": ranked[0], "compared": self.compared, "agreed": self.agreed,
                "agreement": self.agreed / self.compared if self.compared else None}


def why(rec: LedgerRecord) -> dict:
    """A record's "why": the provider's reason where it gave one, else the gateway's own."""
    if speaks(rec):
        return {"source": "provider", "reason": rec.provider_miss_reason,
                "label": LABELS.get(rec.provider_miss_reason, rec.provider_miss_reason),
                "missed_tokens": rec.provider_missed_tokens, "inferred": rec.miss_reason}
    return {"source": "gateway", "reason": rec.miss_reason, "label": rec.miss_reason, "missed_tokens": None,
            "inferred": rec.miss_reason}
