"""Stored Responses (`store: true`): what `previous_response_id`, GET, DELETE and `input_items` read.

Each response keeps the context it was answered from (the chain's earlier items, its own input) and its
output, so a follow-up expands to the whole conversation as OpenAI rebuilds it, and bills it that way.
`instructions` are not part of the context: OpenAI does not carry them over to a chained response.
Responses are scoped per tenant (an organisation's ids are not another's) and bounded, oldest out first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from prefixgate.errors import RequestError


@dataclass
class StoredResponse:
    response: dict
    context: list[dict]       # every item before this response's own input (from the chain)
    input: list[dict]         # this request's input items, each with an id

    @property
    def conversation(self) -> list[dict]:
        """What a response chained onto this one starts from."""
        return [*self.context, *self.input, *self.response.get("output", [])]


class ResponseStore:
    def __init__(self, max_responses: int = 10_000) -> None:
        if max_responses < 1:
            raise ValueError(f"max_responses must be >= 1, got {max_responses}")
        self.max_responses = max_responses
        self._items: OrderedDict[tuple[str, str], StoredResponse] = OrderedDict()

    def put(self, tenant: str, stored: StoredResponse) -> None:
        self._items[(tenant, stored.response["id"])] = stored
        while len(self._items) > self.max_responses:
            self._items.popitem(last=False)

    def get(self, tenant: str, response_id: str, field: str | None = None) -> StoredResponse:
        """The stored response; a 404 naming it, or with `field` (a request body's reference) a 400."""
        stored = self._items.get((tenant, response_id))
        if stored is None:
            message = f"Previous response with id '{response_id}' not found." if field else \
                f"Response with id '{response_id}' not found."
            if field:
                # OpenAI's code for a previous_response_id it does not hold (clients recover from it by the code).
                raise RequestError(message, field=field,
                                   code="previous_response_not_found" if field == "previous_response_id" else None)
            raise RequestError(message, status=404, kind="not_found")
        return stored

    def of(self, tenant: str) -> list[StoredResponse]:
        """`tenant`'s stored responses, newest first."""
        return [stored for (owner, _), stored in reversed(self._items.items()) if owner == tenant]

    def delete(self, tenant: str, response_id: str) -> None:
        self.get(tenant, response_id)
        del self._items[(tenant, response_id)]
