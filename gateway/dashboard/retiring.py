"""Routes still sending requests to models their provider retires within 30 days (or has retired): from the
window's ledger records, priced rows looked up in the gateway's catalogue."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime

from prefixgate.gateway.lifecycle import WARN_DAYS
from prefixgate.ledger import LedgerRecord
from prefixgate.policies.kinds import catalogue_provider
from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.providers.rules import Catalog


def retiring_routes(records: list[LedgerRecord], catalog: Catalog, today: date | None = None) -> list[dict]:
    """[{route, provider, model, retires, replacement, requests}], soonest retirement first."""
    today = today or datetime.now(UTC).date()
    counts = Counter((r.route, r.provider, r.model) for r in records if r.model)
    out = []
    for (route, provider, model), n in counts.items():
        try:
            row = resolve_model(catalogue_provider(provider), model, catalog)
        except UnknownModel:
            continue
        if row.retires_within(WARN_DAYS, today):
            out.append({"route": route, "provider": provider, "model": model, "retires": row.retires.isoformat(),  # type: ignore[union-attr]
                        "replacement": row.replacement or None, "requests": n})
    return sorted(out, key=lambda r: (r["retires"], r["route"], r["model"]))
