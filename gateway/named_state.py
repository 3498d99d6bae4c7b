"""A model request may build only on stored state its own tenant created: the explicit cache it names
(`cachedContent`) and the stored response it continues (`previous_response_id`). Another tenant's, or one the
gateway never saw created, is answered as the provider answers a name it does not know (Gemini: 404; OpenAI: 400 naming
`previous_response_id`)."""

from __future__ import annotations

from prefixgate.errors import RequestError
from prefixgate.gateway.auth import Caller
from prefixgate.gateway.ownership import Owners, principal
from prefixgate.ir import Conversation

CACHE = "cached_content"     # Gemini's and Vertex's cachedContents, by id (the provider's random ids)
RESPONSE = "response"        # OpenAI's stored Responses, by resp_ id


def cache_id(name: object) -> str:
    """`cachedContents/{id}` or `projects/p/locations/l/cachedContents/{id}` -> id ("" when neither)."""
    _, found, ident = str(name).rpartition("cachedContents/")
    return ident if found and ident and "/" not in ident else ""


async def check_named(owners: Owners, caller: Caller, conv: Conversation) -> None:
    owner = principal(caller.key)
    if owner is None:
        return
    cache = conv.params.get("cachedContent") or conv.params.get("cached_content")
    if cache and not await owners.allows(CACHE, cache_id(cache), owner):
        raise RequestError(f"CachedContent not found: {cache}", field="cachedContent", status=404, kind="not_found")
    previous = conv.params.get("previous_response_id")
    if previous and not await owners.allows(RESPONSE, str(previous), owner):
        # OpenAI answers an unknown previous_response_id with a 400 naming the field, not a 404.
        raise RequestError(f"Previous response with id '{previous}' not found.", field="previous_response_id")
