"""Models a policy names that the catalogue cannot price, or that their provider has retired: said once at start.

Neither stops the gateway (a model newer than the catalogue is served; a retired one follows the route's
`on_retired`), but each changes what a request costs or gets, so the operator hears of it before traffic does:
an unpriced model's cost is recorded as unknown, and a budgeted key cannot spend on it without the route's
`price`."""

from __future__ import annotations

from datetime import date

from prefixgate.dialects import wire_format
from prefixgate.policies.router import is_pattern
from prefixgate.policies.schema import Policy
from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.providers.rules import Catalog


def model_warnings(policy: Policy, catalog: Catalog, today: date) -> list[str]:
    """One line per (route target, model) whose hosted upstream's catalogue lacks or has retired the model:
    a target's own `model`, else each model name (not pattern) the route lists."""
    out: list[str] = []
    for i, route in enumerate(policy.routes):
        named = [m for m in route.models if not is_pattern(m)]
        for j, target in enumerate(route.targets):
            where = f"routes.{i}.targets.{j}" + (".model" if target.model else "")
            for model in [target.model] if target.model else named:
                for name in target.upstreams:
                    upstream = policy.upstreams[name]
                    if upstream.self_hosted:
                        continue
                    provider = upstream.price_provider(wire_format(upstream.dialect))
                    try:
                        row = resolve_model(provider, upstream.base_model(model), catalog)
                    except UnknownModel:
                        if route.price is None:
                            refused = "" if route.max_request_usd is not None else (
                                f", and budgeted keys are refused it unless route {route.name!r} declares a price "
                                "or max_request_usd")
                            out.append(f"{where}: {_unknown(provider, model, name, upstream.names_deployments)}{refused}")
                        continue
                    if row.retired(today):
                        out.append(f"{where}: {provider} retired {model!r} on {row.retires}; route {route.name!r} "
                                   f"{_ON_RETIRED[route.on_retired]}"
                                   + (f" (replacement: {row.replacement})" if row.replacement else ""))
    return list(dict.fromkeys(out))


def _unknown(provider: str, model: str, upstream: str, deployment: bool) -> str:
    if deployment:      # Azure: the answer names the model that ran, and prices the call
        return (f"{provider} deployment {model!r} is neither a model's name nor in the deployments: of upstream "
                f"{upstream!r}: it is planned without its model's caching rules, and priced only as the model its "
                "answers name")
    return f"{provider} model {model!r} is not in the catalogue (prefixgate models): its cost is recorded as unknown"


_ON_RETIRED = {"warn": "sends it as asked (on_retired: warn)", "replace": "sends its replacement (on_retired: replace)",
               "refuse": "refuses it with a 400 (on_retired: refuse)"}
