"""A retired model's call that its provider ran as another model: priced as the model that ran, gateway and SDK alike.

From a model's shutdown Google routes calls to it to the replacement it names and bills them at that model's rates
(gemini-2.5-pro to gemini-3.8-flash and gemini-2.5-flash to gemini-3.5-flash-lite from 2026-12-01,
https://ai.google.dev/gemini-api/docs/deprecations); the answer's `modelVersion` names the model that ran. Such a
call is recorded and priced as the model its answer names when that is another catalogue row than the asked one
and the asked one is retired (its row's `retires`, on the rows of the platform that served it) by `today`. Any
other answer prices as asked, whatever snapshot it names.
"""

from __future__ import annotations

from datetime import date

from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.providers.rules import Catalog, ModelRules


def routed_model(provider: str, asked: str, answered: str, today: date,
                 catalog: Catalog | None = None) -> tuple[str, str] | None:
    """(the model that ran, the explanation line) when `provider` ran a call for retired `asked` as another
    catalogued model `answered`; None when the call is priced as asked."""
    if not answered or answered == asked:
        return None
    asked_row = _row(provider, asked, catalog)
    if asked_row is None or not asked_row.retired(today):
        return None
    ran = _row(provider, answered, catalog)
    if ran is None or ran.id == asked_row.id:
        return None
    return answered, (f"{provider}: {asked} retired on {asked_row.retires}; the answer names {answered}, "
                      f"which ran and is billed: priced as that model")


def _row(provider: str, model: str, catalog: Catalog | None) -> ModelRules | None:
    try:
        return resolve_model(provider, model, catalog)
    except UnknownModel:
        return None
