"""Azure OpenAI through the wrapper: a call names a deployment, not a model.

The deployment is in the URL (`/openai/deployments/{deployment}/chat/completions`) or, on Azure's Responses and v1
paths, in the body's `model`. Azure's answers name the model that ran (`gpt-5.4-2026-03-05`): that is what a
record is priced as, from Azure's price rows, as the gateway prices an Azure upstream. Where an answer names none
(an error, a stream cut before a chunk that names it, a read timeout), `wrap(deployments={deployment: model})` says
which model a deployment runs, as an Azure upstream's `deployments:` does in a gateway policy; a deployment it
does not map is priced by its own name, so one named after its model (the Azure portal's default) still prices.
The gateway decides the same way (prefixgate/providers/deployments.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prefixgate.providers.deployments import PRICE_ROWS
from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.providers.rules import default_catalog

MAPPED_BY = "wrap(deployments=...)"     # the mapping's name in a record's explanation line
# Azure OpenAI's endpoints (v1 API included, where a plain `openai.OpenAI` is the documented client).
_HOSTS = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")


def is_azure(client: Any, openai: Any) -> bool:
    """An `AzureOpenAI` / `AsyncAzureOpenAI` client, or an OpenAI client whose base URL is an Azure endpoint."""
    if isinstance(client, (openai.AzureOpenAI, openai.AsyncAzureOpenAI)):
        return True
    if not isinstance(client, (openai.OpenAI, openai.AsyncOpenAI)):
        return False
    host = getattr(getattr(client, "base_url", None), "host", "") or ""
    return isinstance(host, str) and host.lower().endswith(_HOSTS)


def check_deployments(value: Any) -> tuple[tuple[str, str], ...]:
    """`wrap(deployments=...)` checked: deployment name -> a model id Azure's price rows know."""
    if not isinstance(value, Mapping):
        raise TypeError(f"wrap(deployments=...) must map deployment names to model ids, e.g. "
                        f"{{'chat-prod': 'gpt-5.4'}}; got {type(value).__name__}")
    checked = []
    for name, model in value.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"wrap(deployments=...): a deployment name must be a non-empty string, got {name!r}")
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"wrap(deployments=...): deployment {name!r} must map to a model id such as 'gpt-5.4', "
                             f"got {model!r}")
        try:
            resolve_model(PRICE_ROWS, model)
        except UnknownModel:
            known = ", ".join(sorted(m.id for m in default_catalog().models_of(PRICE_ROWS)))
            raise ValueError(f"wrap(deployments=...): deployment {name!r} maps to {model!r}, which has no Azure price "
                             f"row (known: {known})") from None
        checked.append((name, model))
    return tuple(checked)
