"""`GET /v1/files` (OpenAI's and Anthropic's list; Gemini's pages the same way, `endpoints_gemini_files`) across
every account the key's routes reach: each account's files in turn (in policy order; within one account, the
order asked), filtered to the caller's tenant's and those the operator granted its key (`provider_ids`).

An upload lands in the first account (`files_upstream`), but a tenant's files may live in several: a key whose
routes reach two OpenAI accounts, or a file uploaded through another key of the tenant. A page is the tenant's
files from one account; when that account has no more, the list goes on with the next account's first page, so
`has_more` stays true until the last account is done (a page never mixes two accounts, and `order` sorts
within each account, not across them). Pages of other tenants' files are skipped (at most `MAX_LIST_PAGES` a
call). A cursor names where it goes on: `after`/`after_id`/`before_id` is a file whose account the gateway
recorded (its home), one the caller may see (another's, like an id nobody holds, gets an empty page); the
opaque `page` (Anthropic's SDK pages with it) seals the account and the provider's own cursor (`sealed`),
which may spell out another tenant's id. `before_id` pages backwards within its account only. An open gateway
with one account gets that account's page as the provider sent it. OpenAI's `GET /v1/containers` is listed the
same way (`endpoints_containers`), each container its tenant's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import anthropic
from prefixgate.errors import RequestError
from prefixgate.gateway.auth import Caller, authenticate
from prefixgate.gateway.files_upstream import (
    files_upstreams,
    json_object,
    may_touch,
    opened_cursor,
    sealed_cursor,
    send,
)
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.provider_ids import FILE
from prefixgate.gateway.proxy import Proxy
from prefixgate.policies import Upstream
from prefixgate.providers.files import LIST_QUERY

MAX_LIST_PAGES = 50         # upstream pages of other tenants' files one list call skips at most
CURSORS = ("after", "after_id", "before_id", "page", "pageToken")     # Gemini's list pages by `pageToken`
ID_CURSORS = CURSORS[:3]        # a file's (a container's) id: the caller's own, or the page is empty
Query = list[tuple[str, str]]


async def listed(request: Request, dialect: str, *, kind: str = FILE, tail: str = "/files",
                 names: frozenset[str] | None = None) -> Response:
    """The caller's files (or OpenAI's containers: `kind` at `tail`, with the query parameters `names`)."""
    proxy: Proxy = request.app.state.proxy
    caller = authenticate(request.headers, request.query_params, proxy.keys)
    accounts = files_upstreams(proxy, caller, dialect)
    owner = principal(caller.key)
    asked = [(k, v) for k, v in request.query_params.multi_items() if k in (names or LIST_QUERY[dialect])]
    if owner is None and len(accounts) == 1:    # an open gateway: one party, the provider's page as it is
        resp = await send(proxy, request, caller, dialect, accounts[0], "GET", tail, urlencode(asked), b"")
        return Response(resp.body, resp.status, resp.headers, media_type="application/json")
    if not await _cursor_visible(proxy, caller, asked, kind):
        return _empty(dialect)
    at, query = await _resumed(proxy, accounts, asked, kind)
    backwards = any(k == "before_id" for k, _ in asked)
    kept: list[dict] = []
    for _ in range(MAX_LIST_PAGES):
        resp = await send(proxy, request, caller, dialect, accounts[at], "GET", tail, urlencode(query or []), b"")
        page = json_object(resp.body)
        items = [i for i in page.get("data") or () if isinstance(i, dict)]
        kept += await listed_to(proxy, caller, items, lambda f: str(f.get("id", "")), kind)
        query = _next_query(query or [], page, items, dialect)
        if query is None and not backwards and at + 1 < len(accounts):
            at, query = at + 1, uncursored(asked)     # this account is done: the next one's first page
        if kept or query is None:
            break
    # The cursors are the tenant's own files' (the SDKs page on from the last one), never another tenant's id;
    # the opaque one names the account and seals the provider's (which may spell out the id of another's file).
    page.update(data=kept, first_id=kept[0]["id"] if kept else None, last_id=kept[-1]["id"] if kept else None,
                has_more=query is not None)
    if "next_page" in page or dialect == anthropic.WIRE.name:
        page["next_page"] = sealed_at(proxy, accounts[at], query) if query is not None else None
    return Response(compact_bytes(page), resp.status, resp.headers, media_type="application/json")


async def listed_to(proxy: Proxy, caller: Caller, items: list[dict], ident_of: Callable[[dict], str],
                    kind: str = FILE) -> list[dict]:
    """The files (containers: `kind`) of a page the caller may see listed: its tenant's, and those the operator
    granted its key (`provider_ids`: made for it outside the gateway, which it may also retrieve)."""
    granted = caller.key.provider_ids if caller.key is not None else frozenset()
    own = {id(f) for f in await proxy.stored_ids.only_own(kind, items, ident_of, principal(caller.key))}
    return [f for f in items if id(f) in own or ident_of(f) in granted]


async def _cursor_visible(proxy: Proxy, caller: Caller, asked: Query, kind: str) -> bool:
    """Whether the ids the caller pages from (`after`, `after_id`, `before_id`) are ones it may see. Another tenant's
    would page on from where that one sits in the organisation's list, so its page (the caller's own older ones)
    would tell that it exists where an id nobody holds gets none."""
    for k, v in asked:
        if k in ID_CURSORS and not await may_touch(proxy, caller, v, "GET", kind):
            return False
    return True


def _empty(dialect: str) -> Response:
    """The page past the end of the caller's list, as the provider writes an empty one."""
    page = {"data": [], "first_id": None, "last_id": None, "has_more": False}
    return Response(compact_bytes(page if dialect == anthropic.WIRE.name else {"object": "list", **page}),
                    media_type="application/json")


async def _resumed(proxy: Proxy, accounts: list[Upstream], asked: Query, kind: str) -> tuple[int, Query]:
    """(the account a list call starts in, its query there): where its cursor left off, else the first's start."""
    names = [a.name for a in accounts]
    for k, v in asked:
        if k == "page":
            account, cursor = opened_at(proxy, v)
            if account is not None and account not in names:
                raise RequestError("page: not a page cursor for this key's accounts (pass the list's back as it "
                                   "is)", field="page")
            return names.index(account) if account else 0, [*uncursored(asked), *cursor]
        if k in CURSORS:
            home = await proxy.stored_ids.find_home(kind, v)
            return (names.index(home) if home in names else 0), asked
    return 0, asked


def uncursored(query: Query) -> Query:
    return [(k, v) for k, v in query if k not in CURSORS]


def sealed_at(proxy: Proxy, account: Upstream, query: Query) -> str:
    """The cursor a caller pages on with: the account and the provider's cursor parameters in `query`, sealed."""
    return sealed_cursor(proxy, json.dumps([account.name, [(k, v) for k, v in query if k in CURSORS]]))


def opened_at(proxy: Proxy, cursor: str, field: str = "page") -> tuple[str | None, Query]:
    """(account, cursor parameters) sealed in `cursor`; one sealed before cursors named an account is the
    provider's own `field` cursor, in the first account."""
    found = opened_cursor(proxy, cursor, field)
    try:
        account, pairs = json.loads(found)
        if isinstance(account, str) and all(k in CURSORS and isinstance(v, str) for k, v in pairs):
            return account, [(k, v) for k, v in pairs]
    except (ValueError, TypeError):
        pass
    return None, [(field, found)]


def _next_query(query: Query, page: dict, items: list[dict], dialect: str) -> Query | None:
    """The query for the account's next page after `page` (None: it was the last), in the direction asked."""
    if not page.get("has_more") and not page.get("next_page"):
        return None
    rest = uncursored(query)
    if page.get("next_page"):
        return [*rest, ("page", str(page["next_page"]))]
    if any(k == "before_id" for k, _ in query):
        cursor, name = page.get("first_id") or (items[0].get("id") if items else None), "before_id"
    else:
        cursor = page.get("last_id") or (items[-1].get("id") if items else None)
        name = "after_id" if dialect == anthropic.WIRE.name else "after"
    return [*rest, (name, str(cursor))] if cursor else None
