"""A model request may build only on an explicit cache its own tenant created (`cachedContent`): another tenant's,
or one the gateway never saw created, is a 404, as Gemini answers a name it does not know; so is every other
provider-side id it names (containers, files, stored items: `provider_ids`); nor may it hand the choice of its
model to Vertex's model router. (A chained request's stored answer, `previous_response_id` and the like, is
`Proxy.check_chain`'s.)"""

from __future__ import annotations

from prefixgate.dialects.proto_json import field, one_spelling
from prefixgate.dialects.validate import load_body
from prefixgate.errors import RequestError
from prefixgate.gateway.auth import Caller
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.provider_ids import body_ids, check_owned, named_ids
from prefixgate.gateway.stored_ids import StoredIds
from prefixgate.ir import Conversation

CACHE = "cached_content"     # Gemini's and Vertex's cachedContents, by id (the provider's random ids)


def cache_id(name: object) -> str:
    """`cachedContents/{id}` or `projects/p/locations/l/cachedContents/{id}` -> id ("" when neither)."""
    _, found, ident = str(name).rpartition("cachedContents/")
    return ident if found and ident and "/" not in ident else ""


async def check_named(owners: StoredIds, caller: Caller, conv: Conversation) -> None:
    owner = principal(caller.key)
    if owner is not None:
        _routed_here(conv.params)
        await _own_cache(owners, owner, conv.params)
        await check_owned(owners, owner, named_ids(conv), caller.key.provider_ids)  # type: ignore[union-attr]


def _routed_here(params: dict) -> None:
    """Vertex's model router (`generationConfig.routingConfig`: `autoMode` lets Vertex pick the model, `manualMode`
    names one) answers with a model the URL does not name: a key whose route allows Flash would get Pro, held and
    priced as Flash. A keyed caller's model is its route's."""
    config = field(params, "generationConfig")
    if isinstance(config, dict) and field(config, "routingConfig") is not None:
        raise RequestError("generationConfig.routingConfig: this gateway sends a request to the model its route "
                           "chooses; name the model in the URL instead of routing it", field="generationConfig.routingConfig")


async def _own_cache(owners: StoredIds, owner: str, fields: dict) -> None:
    """The cache `fields` name (either spelling), if any, is `owner`'s; else the 404 Gemini answers an unknown one."""
    cache = field(fields, "cachedContent")
    if cache and not await owners.allows(CACHE, cache_id(cache), owner):
        raise RequestError(f"CachedContent not found: {cache}", field="cachedContent", status=404, kind="not_found")


async def check_counted(owners: StoredIds, caller: Caller, raw: bytes) -> None:
    """`countTokens` (Gemini's and Vertex's) may name a cache too, at its top level or in its
    `generateContentRequest`, and the count includes the cache's tokens: another tenant's cache is a 404 there
    as well, or the count would tell whether it exists and how large it is; so is an uploaded file it names."""
    body = load_body(raw)
    one_spelling(body, raw)     # forwarded as it came: checked as Google reads it
    owner = principal(caller.key)
    if owner is None:
        return
    for request in (body, field(body, "generateContentRequest")):
        if isinstance(request, dict):
            await _own_cache(owners, owner, request)
            await check_owned(owners, owner, body_ids(request), caller.key.provider_ids)  # type: ignore[union-attr]
