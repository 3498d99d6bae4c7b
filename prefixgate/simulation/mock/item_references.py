"""Responses input items of type `item_reference`: `{"type": "item_reference", "id": "msg_..."}` names an item
the organisation stored (an output item of a stored response, or one of its listed input items) and stands for
it in the input. An id the organisation does not hold is a 404 naming it, as OpenAI answers (`param: input`)."""

from __future__ import annotations

from collections.abc import Callable

from prefixgate.errors import RequestError
from prefixgate.providers.response_store import ResponseStore, StoredResponse


def resolved(items: list[dict], store: ResponseStore, tenant: str,
             listed: Callable[[StoredResponse], list[dict]]) -> list[dict]:
    """`items` with each reference replaced by the stored item it names (`items` itself when none refers)."""
    if not any(isinstance(i, dict) and i.get("type") == "item_reference" for i in items):
        return items
    return [_stored_item(item["id"], store, tenant, listed)
            if isinstance(item, dict) and item.get("type") == "item_reference" else item for item in items]


def _stored_item(item_id: object, store: ResponseStore, tenant: str,
                 listed: Callable[[StoredResponse], list[dict]]) -> dict:
    for stored in store.of(tenant):
        for item in (*stored.response.get("output", []), *listed(stored)):
            if item.get("id") == item_id:
                return item
    raise RequestError(f"Item with id '{item_id}' not found.", field="input", status=404, kind="not_found")
