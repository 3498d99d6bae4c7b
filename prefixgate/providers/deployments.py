"""Azure OpenAI's deployments: the model a call to one is recorded and priced as.

A request names a deployment (`chat-prod`), not a model; Azure's answer names the model that ran
(`gpt-5.4-2026-03-05`, a stream's from its first chunk that names one). That is what the call is priced as, from
Azure's price rows. Where the answer names none (an error, a stream cut before it said), the operator's mapping
(a gateway upstream's `deployments:`, the SDK's `wrap(deployments=...)`) says which model the deployment runs; an
unmapped deployment is priced by its own name, so one named after its model (the Azure portal's default) still
prices and any other is unpriced. The gateway and the SDK wrapper both decide here, so their records agree.
"""

from __future__ import annotations

from collections.abc import Mapping

from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.providers.rules import Catalog

PRICE_ROWS = "azure"


def priced_model(deployment: str, answered: str, mapping: Mapping[str, str], mapped_by: str,
                 catalog: Catalog | None = None) -> tuple[str, str]:
    """The model a call to `deployment` is priced and recorded as, and the explanation line that says why.
    `mapped_by` names the mapping in that line (`wrap(deployments=...)`, an upstream's `deployments:`)."""
    mapped = mapping.get(deployment)
    # What admission reserved the call at: the mapping's model, else the deployment's name if that is a model's.
    fallback = mapped or deployment
    if answered and _price_row(answered, catalog) is None and _price_row(fallback, catalog) is not None:
        # A model Azure's rows do not list yet (a new snapshot family): priced as admission reserved it, not unpriced
        # (an unpriced call settles a budget at $0).
        return fallback, (f"azure: deployment {deployment!r} answered as {answered}, which has no Azure price row; "
                          f"priced as {fallback} ({mapped_by if mapped else 'the deployment name'})")
    if answered:
        note = f"azure: deployment {deployment!r} answered as {answered}, priced as that model"
        if mapped and not _same(mapped, answered, catalog):
            note += f" ({mapped_by} maps it to {mapped})"
        return answered, note
    if mapped:
        return mapped, f"azure: the answer named no model; deployment {deployment!r} priced as {mapped} ({mapped_by})"
    return deployment, (f"azure: the answer named no model and {mapped_by} does not map deployment "
                        f"{deployment!r}; priced by its name if that is a model's")


def _price_row(model: str, catalog: Catalog | None) -> str | None:
    try:
        return resolve_model(PRICE_ROWS, model, catalog).id
    except UnknownModel:
        return None


def _same(mapped: str, answered: str, catalog: Catalog | None) -> bool:
    found = _price_row(answered, catalog)
    return found is not None and found == _price_row(mapped, catalog)
