"""A retired model's call that its provider ran as another model: priced as the model that ran, gateway and SDK alike.

From a model's shutdown Google routes calls to it to the replacement it names and bills them at that model's rates
(gemini-2.5-pro to gemini-3.8-flash and gemini-2.5-flash to gemini-3.5-flash-lite from 2026-12-01,
https://ai.google.dev/gemini-api/docs/deprecations); the answer's `modelVersion` names the model that ran. Such a
call is recorded and priced as the model its answer names when that is another catalogue row than the asked one
and the asked one is retired (its row's `retires`, on the rows of the platform that served it) by `today`. Any
other answer prices as asked, whatever snapshot it names.

`ran_as` is the one rule for "the model the answer names", gateway and SDK alike: an Azure deployment's call is
recorded and priced as its answer's model (providers/deployments.py), a retired model's routed call as above.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

from prefixgate.providers.deployments import priced_model
from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.providers.rules import Catalog, ModelRules


def ran_as(rows: str, asked: str, answered: str, today: date, deployments: Mapping[str, str] | None = None,
           mapped_by: str = "", catalog: Catalog | None = None) -> tuple[str, str] | None:
    """(the model a call for `asked` is recorded and priced as, the explanation line) where its answer decides that;
    None where it is priced as asked. `answered`: the model the answer names ("" where none). `deployments`: where
    `asked` names a deployment, not a model (Azure), the operator's mapping of them, which `mapped_by` names; such a
    call is always priced as its answer says (or, naming none, as mapped)."""
    if deployments is not None:
        return priced_model(asked, answered, deployments, mapped_by, catalog)
    return routed_model(rows, asked, answered, today, catalog)


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
