"""The prompt a request names but does not carry, for a budget's reservation: the body's bytes / 4 counts only
what the body holds, and a request can be mostly elsewhere.

- A Responses `previous_response_id`: the upstream prepends the whole stored chain. That prompt is at most the
  previous response's own prompt and answer (its prompt already held the chain before it): kept from its record
  beside its owner in `stored_ids` (`Accounting.keep`).
- An explicit cache (`cachedContent`) made through the gateway: the tokens its create reported, read at the
  cached rate (cache_scope.py keeps them).
- A file named by id (a Gemini file by its name or its URI) that was uploaded through the gateway: its bytes / 4
  (`BYTES_PER_TOKEN`, as the body is counted; a PDF's text runs to fewer tokens than its bytes, an image's far fewer).

One lookup each, only for a budgeted key. What the gateway never saw (a `conversation`, an id it has no count for)
adds nothing and the request's record says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefixgate.gateway.named_state import CACHE, cache_id
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.provider_ids import CONVERSATION, FILE, named_ids
from prefixgate.providers.files import gemini_name
from prefixgate.usage import BYTES_PER_TOKEN, Usage

if TYPE_CHECKING:
    from prefixgate.gateway.proxy import Call, Proxy


def unseen(what: str) -> str:
    return f"budget: the reservation could not see {what}, so it holds only the body's own prompt for it"


async def unseen_prompt(proxy: Proxy, call: Call) -> Usage:
    """The prompt tokens `call` names outside its body, as far as the gateway knows them (what it cannot see is
    noted on the call)."""
    conv, found = call.conv, Usage()
    chained = call.wire.chained_id(conv)
    if chained:
        tokens = await proxy.stored_ids.tokens(call.wire.stored_kind, chained)
        if tokens is None:
            call.notes.append(unseen(f"the stored chain before {call.wire.stored_kind} {chained}"))
        found += Usage(uncached_input=tokens or 0)
    cached = cache_id(conv.params.get("cachedContent") or conv.params.get("cached_content") or "")
    if cached:
        tokens = await proxy.stored_ids.tokens(CACHE, cached)
        if tokens is None:
            call.notes.append(unseen(f"explicit cache {cached}"))
        found += Usage(cache_read=tokens or 0)
    owner = principal(call.caller.key)
    for named in named_ids(conv):
        if named.kind == CONVERSATION:
            call.notes.append(unseen(f"conversation {named.ident}'s items"))
        elif named.kind == FILE:
            tokens = await file_tokens(proxy, owner, named.ident)
            if tokens is None:
                call.notes.append(unseen(f"file {named.ident}"))
            found += Usage(uncached_input=tokens or 0)
    return found


async def file_tokens(proxy: Proxy, owner: str | None, ident: str) -> int | None:
    """The prompt tokens `owner`'s file `ident` counts as (its bytes / 4); None: not one uploaded through the
    gateway."""
    size = await proxy.file_quota.size_of(owner, gemini_name(ident))
    return None if size is None else -(-size // BYTES_PER_TOKEN)

