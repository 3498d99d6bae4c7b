"""What a response cost: the provider pricing table (`prefixgate.providers`), by provider and model as
the caller spells it. Self-hosted targets cost nothing per token."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from prefixgate.cost import Price
from prefixgate.errors import RequestError
from prefixgate.providers import pricing
from prefixgate.providers.rules import Catalog
from prefixgate.usage import Usage

FREE = Price(Decimal(0), Decimal(0), Decimal(0))


def price_for(provider: str, model: str, usage: Usage, catalog: Catalog | None = None,
              at: datetime | None = None) -> Price | None:
    """The price row for this response (long-context tiers apply to the whole request), FREE for
    self-hosted models, None for a model the table does not know (its cost is then recorded as unknown)."""
    if provider == "local":
        return FREE
    try:
        return pricing.price_for(provider, model, usage, catalog, at)
    except RequestError:
        return None
