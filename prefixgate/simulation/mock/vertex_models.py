"""Which publisher models mock Vertex AI serves, and Vertex's 404 for one it does not.

The mock knows the models its catalogue knows, as its Claude and Gemini APIs do; Vertex names them its own way:
- Claude by Anthropic's id, and the models Vertex lists with a version (Sonnet 4.5, Haiku 4.5, Opus 4.5 and older)
  also as `{id}@{snapshot date}` (`claude-haiku-4-5@20251001`). A date is valid only as that model's own snapshot
  (the catalogue's `{id}-{date}` alias); newer models have none, so any `@date` on them is unknown. Vertex's pages
  do not say whether an older model's undated id is refused, so it is served (responses-bedrock-vertex.md §3.1).
- Gemini as the Gemini API resolves it.
An unknown model is Google's 404 from its front end, in Google's shape whichever publisher the path names:
"Publisher Model `projects/{p}/locations/{l}/publishers/{publisher}/models/{model}` was not found or your project
does not have access to it. ..." (verbatim in genkit-ai/genkit#4688, truefoundry/models#946).
"""

from __future__ import annotations

from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.providers.rules import Catalog, ModelRules
from prefixgate.simulation.mock.server import GoogleFrontEndError

_MODEL_VERSIONS = "https://cloud.google.com/vertex-ai/generative-ai/docs/learn/model-versions"


def claude_id(catalog: Catalog, name: str, scope: str) -> str:
    """The Anthropic id Vertex's Claude `name` answers as (`claude-haiku-4-5-20251001`); `scope`:
    `projects/{p}/locations/{l}`."""
    base, at, date = name.partition("@")
    if at and not (len(date) == 8 and date.isdigit()):
        raise not_found(scope, "anthropic", name)
    found = catalog.names("anthropic").get(f"{base}-{date}" if at else name)
    if found is None or found.id != base:
        raise not_found(scope, "anthropic", name)
    return f"{base}-{date}" if at else base


def gemini_rules(catalog: Catalog, name: str, scope: str) -> ModelRules:
    """The rules of Vertex's Gemini `name`."""
    try:
        return resolve_model("gemini", name, catalog)
    except UnknownModel:
        raise not_found(scope, "google", name) from None


def not_found(scope: str, publisher: str, model: str) -> GoogleFrontEndError:
    return GoogleFrontEndError(
        f"Publisher Model `{scope}/publishers/{publisher}/models/{model}` was not found or your project does not "
        f"have access to it. Please ensure you are using a valid model version. For more information, see: "
        f"{_MODEL_VERSIONS}", status=404, kind="not_found")
