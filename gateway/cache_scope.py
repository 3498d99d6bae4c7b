"""Explicit caches (Gemini's and Vertex's `cachedContents`) as tenant-owned resources.

Every cache lives in the gateway's provider account, so the gateway decides who may touch one: a key reaches the
caches only through a route of its own that ends at the provider; a cache belongs to the tenant whose request
created it (`ownership`), and any other caller is answered as if it did not exist (404), listed caches are
filtered to the caller's own; a lifetime (`ttl`, `expireTime`) past `max_cache_ttl_s` is refused, since the
operator pays its storage by the hour; a create or a lifetime extension is written to the ledger, priced (the
cached tokens at the input rate on create, storage for the hours bought), and a create or an extension holds its worst
case against the key's budget until then, as a model request's admission does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from decimal import Decimal

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response

from prefixgate.cache_planner import Target, plan
from prefixgate.compact_json import compact_bytes
from prefixgate.cost import price_usage
from prefixgate.dialects import wire_format
from prefixgate.dialects.proto_json import one_spelling
from prefixgate.dialects.validate import load_body
from prefixgate.errors import RequestError
from prefixgate.gateway.auth import Caller, upstream_credential
from prefixgate.gateway.cache_create_doubt import DEFAULT_TTL_S, FIND_TRIES, Asked, resolve, unless_lost
from prefixgate.gateway.named_state import CACHE as KIND
from prefixgate.gateway.named_state import cache_id
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.provider_ids import FILE, STORAGE, Named, body_ids, check_owned
from prefixgate.gateway.proxy import Call, Prepared, Proxy
from prefixgate.gateway.unseen_prompt import file_tokens
from prefixgate.gateway.upstream import UpstreamFailure, UpstreamResponse
from prefixgate.ir import Conversation
from prefixgate.ledger import LedgerRecord
from prefixgate.policies import Upstream
from prefixgate.policies.limits import Reservation
from prefixgate.policies.schema import Route
from prefixgate.providers.cached_contents import parse_rfc3339
from prefixgate.usage import Usage, prompt_estimate

Forward = Callable[[str, bytes, float], Awaitable[UpstreamResponse]]
Worst = tuple[dict, float]      # a call's cache as held (its model, its tokens) and the seconds of storage it buys
log = logging.getLogger("prefixgate.gateway")
LOOKUP_S = 60.0     # the timeout of a call other than a create (which takes its route's)


def not_found(name: str) -> RequestError:
    return RequestError(f"CachedContent not found: {name}", status=404, kind="not_found")


def reaches(proxy: Proxy, caller: Caller, upstream_kind: str) -> None:
    """Refuse a key none of whose routes ends at an upstream of `upstream_kind`: it has no business with its caches."""
    key = caller.key
    if key is None:
        return
    for route in proxy.policy.routes:
        if key.routes and route.name not in key.routes:
            continue
        if any(proxy.policy.upstreams[u].kind == upstream_kind for ref in route.targets for u in ref.upstreams):
            return
    raise RequestError(f"key {key.name!r} may not use {upstream_kind} caches: none of its routes reaches {upstream_kind}",
                       status=403, kind="permission")


def lifetime_s(body: dict, now: float) -> float | None:
    """Seconds the body asks the cache to live (`ttl` or `expireTime`); None when it names neither. Both is a 400, as
    Google's JSON parser refuses two fields of one oneof (`expiration`): the gateway would cap and price the one it
    read, and an upstream reading the other would keep the cache as long as that one says."""
    ttl = body.get("ttl")
    spelt = next((name for name in ("expireTime", "expire_time") if body.get(name) is not None), None)
    if ttl is not None and spelt is not None:
        raise RequestError(f"Invalid JSON payload received. oneof field 'expiration' is already set by 'ttl'. Cannot set "
                           f"'{spelt}': a cache's ttl and {spelt} are one oneof, set one of them", field=spelt)
    if ttl is not None:
        try:
            return float(str(ttl).removesuffix("s"))
        except ValueError:
            raise RequestError(f"ttl: expected a duration such as \"3600s\", got {ttl!r}", field="ttl") from None
    expire = body.get("expireTime", body.get("expire_time"))
    return None if expire is None else parse_rfc3339(expire, "expireTime") - now


def _capped(body: dict, cap_s: float, now: float) -> float | None:
    seconds = lifetime_s(body, now)
    if seconds is not None and seconds > cap_s:
        raise RequestError(f"ttl: this gateway keeps explicit caches at most {cap_s:.0f}s (max_cache_ttl_s); "
                           f"asked for {seconds:.0f}s", field="ttl")
    return seconds


async def scoped(request: Request, proxy: Proxy, caller: Caller, dialect: str, upstream: Upstream, name: str,
                 raw: bytes, forward: Forward) -> Response:
    """One cachedContents call (`name`: the cache id, "" for the collection), within the caller's scope;
    `forward(method, body, timeout_s)` sends it on to the cache's path upstream."""
    owner, now, method = principal(caller.key), time.time(), request.method
    body = load_body(raw) if method in ("POST", "PATCH") else {}
    one_spelling(body, raw)     # its lifetime capped, its files checked and its cost held as Google reads it
    cap = proxy.settings.max_cache_ttl_s
    seconds = _capped(body, cap, now)
    # Refused over budget before the cache's name is looked up or anything is sent; a body refused above is not
    # counted toward the key's rate, as a model request's is not.
    if method == "PATCH":
        await proxy.admit_state(caller, body, dialect)
    reaches(proxy, caller, upstream.kind)
    if name and not await proxy.stored_ids.allows(KIND, name, owner):
        raise not_found(f"cachedContents/{name}")
    paid_until, held, timeout_s, tokens = now, Reservation(), LOOKUP_S, prompt_estimate(raw).uncached_input
    stored: dict = {}
    if method == "POST":
        route = proxy.router.decide(model_of(body.get("model")), caller.key, dialect).route  # the key's routes name its models
        timeout_s = route.retry.timeout_s
        if caller.key is not None and owner is not None:
            # A cache of a file would hand the file to whoever builds on the cache.
            named = list(body_ids(body))
            await check_owned(proxy.stored_ids, owner, named, caller.key.provider_ids)
            tokens = await _held_tokens(proxy, owner, tokens, named)
            lifetime = DEFAULT_TTL_S if seconds is None else seconds
            held = await proxy.hold_for(caller.key, _worst(proxy, upstream, dialect, route, body, tokens, lifetime))
    elif method == "PATCH":
        before = await forward("GET", b"", LOOKUP_S)      # storage is paid up to the old expiry; the PATCH buys the rest
        if 200 <= before.status < 300:
            stored = _answer(upstream, before)
            route = proxy.router.decide(model_of(stored.get("model")), caller.key, dialect).route   # refused before, not after
            paid_until = max(now, parse_rfc3339(stored.get("expireTime"), "expireTime"))
            tokens = _tokens(stored)
            if caller.key is not None and seconds is not None and tokens is not None:
                # Its rate limit was counted by admit_state: this holds the hours it buys, as a create holds its own.
                held = await proxy.hold_for(caller.key, _worst(
                    proxy, upstream, dialect, route, stored, tokens, now + seconds - paid_until, written=False), counted=True)
    asked = Asked(upstream.name, model_of(body.get("model")), str(body.get("displayName", body.get("display_name")) or ""),
                  None if seconds is None or "ttl" not in body else seconds,
                  None if seconds is None or "ttl" in body else now + seconds, now)
    # What it held, booked where its answer cannot be: the cache's tokens as held, stored for the seconds it buys.
    worst = (({"model": body.get("model"), "usageMetadata": {"totalTokenCount": tokens}},
              DEFAULT_TTL_S if seconds is None else seconds) if method == "POST" else
             (stored, 0.0 if seconds is None else now + seconds - paid_until))
    if method == "POST":
        proxy.caches.rivals.began(asked)
    try:
        return await _sent(request, proxy, caller, dialect, upstream, name, raw, forward, seconds, paid_until, held,
                           timeout_s, worst)
    except UpstreamFailure as f:
        if method == "POST" and f.in_doubt:
            _in_doubt(request, proxy, caller, dialect, upstream, replace(asked, failed=time.time()), worst, held)
        elif method == "PATCH" and f.in_doubt and stored and seconds is not None:
            proxy.caches.searching(_extended(request, proxy, caller, dialect, upstream, forward, stored, paid_until,
                                             now + seconds, held))
        else:
            proxy.limits.release(held)
        raise
    except BaseException:
        proxy.limits.release(held)      # booked, it is settled instead (a second release is a no-op)
        raise
    finally:
        if method == "POST":
            proxy.caches.rivals.ended(asked)


async def _held_tokens(proxy: Proxy, owner: str, tokens: int, named: list[Named]) -> int:
    """The most tokens a create whose body counts `tokens` and names the objects `named` may cache: its files uploaded
    through the gateway by their bytes; an object it never saw uploaded (a gs:// object, a file the operator granted
    the key), which Google bills by what it holds, as all a Gemini model reads less the rest."""
    sizes = [await file_tokens(proxy, owner, n.ident) if n.kind == FILE else None for n in named if n.kind in (FILE, STORAGE)]
    tokens += sum(size for size in sizes if size is not None)
    return max(tokens, proxy.catalog.gemini.input_token_limit) if None in sizes else tokens


def _in_doubt(request: Request, proxy: Proxy, caller: Caller, dialect: str, upstream: Upstream, asked: Asked,
              worst: Worst, held: Reservation) -> None:
    """A create that got no answer: the cache it `asked` for searched for in the background (cache_create_doubt),
    then owned and booked, or booked at its `worst` case while in doubt."""
    owner, headers, wire = principal(caller.key), dict(request.headers), wire_format(dialect)

    async def owned(name: str) -> bool:
        """Booked already, as an answered create's: its owner, or on an open gateway (no owners) its home, recorded."""
        ident = cache_id(name)
        return await proxy.stored_ids.owner(KIND, ident) is not None or await proxy.stored_ids.find_home(KIND, ident) is not None

    async def book(found: dict | None, why: str) -> None:
        started, booked = time.perf_counter(), None
        if found is not None:
            _own(proxy, owner, upstream, found, asked.ttl_s)
            created = parse_rfc3339(found["createTime"], "createTime")
            booked, why = _booking(found, lambda: _booked(
                proxy, caller, dialect, upstream, found, True, created, started, headers, held,
                ["cachedContents.create: its answer never came; found among the upstream's caches by what it asked"]))
        if booked is None:
            booked = _at_worst(proxy, caller, dialect, upstream, worst, True, started, headers, held,
                               f"cachedContents.create: in doubt: its answer never came and the cache was not told apart "
                               f"({why}); booked at its worst case (its tokens by its body and files, written and stored "
                               "for the lifetime asked)")
        await proxy.accounts.finish(*booked)

    proxy.caches.rivals.doubted(asked)
    proxy.caches.searching(resolve(proxy.caches, upstream, wire, upstream_credential(upstream, caller, dialect), asked,
                                   owned, book, lambda: proxy.limits.release(held)))


async def _extended(request: Request, proxy: Proxy, caller: Caller, dialect: str, upstream: Upstream, forward: Forward,
                    stored: dict, paid_until: float, asked_until: float, held: Reservation) -> None:
    """A PATCH that got no answer: Google may have extended the cache all the same, and bills the storage it bought
    (from `paid_until`, the expiry `stored` had). Read again a moment later: extended, booked as its answer would have
    been; not (or gone), released; not known (unreadable, or the gateway stopping), booked at what it asked."""
    started, headers = time.perf_counter(), dict(request.headers)

    async def book(found: dict | None, note: str) -> None:
        booked = None
        if found:
            _own(proxy, principal(caller.key), upstream, found, asked_until - time.time())     # kept as long as it lives
            booked, why = _booking(found, lambda: _booked(proxy, caller, dialect, upstream, found, False, paid_until,
                                                          started, headers, held, [f"cachedContents.patch: its answer never came; {note}"]))
            note = note if booked else f"in doubt, {why}: booked at the hours it asked"
        if booked is None:
            booked = _at_worst(proxy, caller, dialect, upstream, (stored, asked_until - paid_until), False, started,
                               headers, held, f"cachedContents.patch: its answer never came; {note}")
        await proxy.accounts.finish(*booked)

    async def read() -> tuple[dict | None, float | None]:
        found, expires = None, None
        for attempt in range(1, FIND_TRIES + 1):       # Google may extend it after the gateway gave up
            await asyncio.sleep(proxy.caches.tick_s * attempt)
            found, expires = await _read_again(upstream, forward)
            if found == {} or (expires is not None and expires > paid_until + 1.0):
                break
        return found, expires

    read_again = await unless_lost(
        read(), book, "in doubt, the gateway stopped before it was read again: booked at the hours it asked",
        "in doubt, reading it again failed ({}): booked at the hours it asked",
        "cached contents: reading %s again after its extension got no answer failed", stored.get("name"))
    if read_again is None:
        return
    found, expires = read_again
    if found and expires is not None and expires > paid_until + 1.0:
        await book(found, "read again, it was extended")
    elif expires is None:
        await book(None, "in doubt, it could not be read again: booked at the hours it asked")
    else:
        proxy.limits.release(held)      # not extended, or gone: it bills no more


def _booking(found: dict, booked: Callable[[], tuple[Call, LedgerRecord]]) -> tuple[tuple[Call, LedgerRecord] | None, str]:
    """`booked()`: the record of the cache `found` for a call in doubt; None and why where Google's answer cannot be
    booked (a shape no one foresaw: `usageMetadata` not an object, a count not a number), to be booked in doubt
    instead. Once: `_booked` writes its record last, so nothing was written when it raised."""
    try:
        return booked(), ""
    except Exception as e:
        log.exception("cached contents: %s could not be booked from its answer", found.get("name"))
        return None, f"{found.get('name')} could not be booked from its answer ({type(e).__name__})"


def _at_worst(proxy: Proxy, caller: Caller, dialect: str, upstream: Upstream, worst: Worst, create: bool,
              started: float, headers: dict[str, str], held: Reservation, note: str) -> tuple[Call, LedgerRecord]:
    """The call's record at what it held (`worst`: the cache as held, and the seconds of storage it buys), on a row
    whose `note` says why: a cache whose tokens were unreadable held none, and books none."""
    cache, seconds = worst
    counted = {"name": cache.get("name", ""), "model": cache.get("model"),
               "usageMetadata": {"totalTokenCount": _tokens(cache) or 0}}
    return _booked(proxy, caller, dialect, upstream, counted, create, 0.0, started, headers, held, [note],
                   Decimal(str(max(seconds, 0.0))) / 3600)


async def _read_again(upstream: Upstream, forward: Forward) -> tuple[dict | None, float | None]:
    """The cache as Google holds it and its expiry; ({}, 0.0) once gone (Gemini's 403, Vertex's 404); (None, None) when
    it cannot be read."""
    try:
        after = await forward("GET", b"", LOOKUP_S)
        if after.status in (403, 404):
            return {}, 0.0
        found = _answer(upstream, after) if 200 <= after.status < 300 else None
        return (found, parse_rfc3339(found.get("expireTime"), "expireTime")) if found is not None else (None, None)
    except (UpstreamFailure, RequestError):
        return None, None


async def _sent(request: Request, proxy: Proxy, caller: Caller, dialect: str, upstream: Upstream, name: str, raw: bytes,
                forward: Forward, seconds: float | None, paid_until: float, held: Reservation, timeout_s: float,
                worst: Worst) -> Response:
    """The call sent on, and what it answered booked: a create's or extension's cost replaces what it held. Answered
    in a shape that cannot be booked, the cache exists all the same: the caller gets it, and it is booked at `worst`."""
    owner, method = principal(caller.key), request.method
    started = time.perf_counter()
    resp = await forward(method, raw, timeout_s)
    if not 200 <= resp.status < 300:
        proxy.limits.release(held)
        return Response(resp.body, resp.status, media_type="application/json")
    data = _answer(upstream, resp)
    if method == "GET" and not name:
        data["cachedContents"] = await proxy.stored_ids.only_own(KIND, data.get("cachedContents") or [],
                                                             lambda c: cache_id(c.get("name", "")), owner)
        return Response(compact_bytes(data), resp.status, media_type="application/json")
    if method == "DELETE":
        await proxy.stored_ids.forget(KIND, name)
    elif method in ("POST", "PATCH"):
        _own(proxy, owner, upstream, data, seconds)
        create, headers = method == "POST", dict(request.headers)
        booked, why = _booking(data, lambda: _booked(
            proxy, caller, dialect, upstream, data, create,
            parse_rfc3339(data["createTime"], "createTime") if create and data.get("createTime") else paid_until,
            started, headers, held))
        call, rec = booked or _at_worst(proxy, caller, dialect, upstream, worst, create, started, headers, held,
                                        f"cachedContents.{method.lower()}: answered, but {why}; booked at what it held")
        return Response(resp.body, resp.status, media_type="application/json",
                        background=BackgroundTask(proxy.accounts.finish, call, rec))
    return Response(resp.body, resp.status, media_type="application/json")


def _answer(upstream: Upstream, resp: UpstreamResponse) -> dict:
    """Google's answer, read as an upstream's: one that is not a JSON object is a 502 (the upstream's fault, which
    `load_body` would word as the caller's bad request body); answered 2xx, so a create's cache may exist."""
    try:
        data = json.loads(resp.body or b"{}")
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        raise UpstreamFailure(upstream.name, 502, f"upstream {upstream.name!r} answered {resp.status} with a body that "
                              "is not a JSON object", answered=True)
    return data


def _own(proxy: Proxy, owner: str | None, upstream: Upstream, data: dict, seconds: float | None) -> None:
    """The cache `data` describes is `owner`'s, at home on `upstream` (a follow-up naming it by id alone must reach
    the project and location holding it), with the tokens a request naming it carries (gateway/unseen_prompt.py)."""
    proxy.stored_ids.record(KIND, cache_id(data.get("name", "")), owner, max(seconds or 0.0, proxy.settings.max_cache_ttl_s),
                            home=upstream.name, tokens=_tokens(data))


def _tokens(data: dict) -> int | None:
    """The cache's tokens as Google's answer `data` reports them (`usageMetadata.totalTokenCount`); None: unreadable."""
    usage = data.get("usageMetadata")
    tokens = usage.get("totalTokenCount") if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) else None


def _worst(proxy: Proxy, upstream: Upstream, dialect: str, route: Route, body: dict, tokens: int, seconds: float,
           written: bool = True) -> Decimal:
    """What a create (or, not `written`, an extension) may cost at most, held against the key's budget until it is
    booked: the cache's `tokens` written at the input rate, and stored for the `seconds` bought. Concurrent creates
    and extensions each passed a budget not yet spent, and each bought up to a day of storage."""
    model = model_of(body.get("model"))
    cached = Usage(cache_writes={"explicit": tokens})
    rows = upstream.price_rows or upstream.planner_provider(wire_format(dialect))
    price = proxy.accounts.price(rows, upstream, model, cached, route.price)
    if price is None:
        return Decimal(0)
    hours = Decimal(str(max(seconds, 0.0))) / 3600
    return price_usage(cached if written else Usage(), price, tokens * hours).total


def routed(proxy: Proxy, model: str, caller: Caller, dialect: str, kind: str) -> Upstream | None:
    """The upstream the caller's route for `model` ends at, or None when it ends at another kind than `kind`."""
    ref = proxy.router.decide(model, caller.key, dialect).route.targets[0]
    upstream = proxy.policy.upstreams[ref.upstreams[0]]
    return upstream if upstream.kind == kind else None


async def home(proxy: Proxy, caller: Caller, dialect: str, kind: str, method: str, raw: bytes, name: str) -> Upstream | None:
    """The upstream (of `kind`) a cachedContents call must go to, where the gateway knows it. A cache lives in one
    account (a Gemini API key's project; a Vertex project and location), and only requests sent there can use it:
    a create goes where the caller's route for its model ends; a call naming a cache, to its recorded home."""
    if method == "POST" and raw:
        found = routed(proxy, model_of(load_body(raw).get("model")), caller, dialect, kind)
        if found is not None:
            return found
    at = proxy.policy.upstreams.get(await proxy.stored_ids.find_home(KIND, name) or "") if name else None
    return at if at is not None and at.kind == kind else None


def model_of(name: object) -> str:
    """`models/m`, `projects/p/locations/l/publishers/google/models/m` or `m` -> m."""
    return str(name or "").rpartition("models/")[2]


def _booked(proxy: Proxy, caller: Caller, dialect: str, upstream: Upstream, data: dict, create: bool, paid_from: float,
            started: float, headers: dict[str, str], held: Reservation, notes: list[str] | None = None,
            hours: Decimal | None = None) -> tuple[Call, LedgerRecord]:
    """The call in the ledger (`Accounting.finish` then settles `held` at its cost): a create bills the cached tokens
    at the input rate, and each call the storage it buys (tokens x `hours`, else from `paid_from` to the expiry in
    `data`); spent against the key's budget."""
    wire = wire_format(dialect)
    model = model_of(data.get("model"))
    call = proxy.start(dialect, Conversation(dialect, model, []), caller, headers, started)
    call.held = held
    planner = upstream.planner_provider(wire)
    the_plan = plan(call.conv, Target(planner, model), mode="off")
    the_plan.explanation[:] = [f"cachedContents.{'create' if create else 'patch'}: {data.get('name', '')}", *(notes or [])]
    tokens = int((data.get("usageMetadata") or {}).get("totalTokenCount") or 0)
    # The cache exists upstream by now: an answer without a readable expiry must not turn into the caller's
    # error. Its storage is then unpriced, and the explanation says so.
    try:
        if hours is None:
            hours = Decimal(str(max(0.0, parse_rfc3339(data.get("expireTime"), "expireTime") - paid_from))) / 3600
    except RequestError:
        hours = Decimal(0)
        the_plan.explanation.append("cachedContents: the upstream's answer has no readable expireTime; storage not priced")
    prep = Prepared(upstream, wire, model, the_plan, b"", None, False, planner,
                    extra_usage=Usage(cache_writes={"explicit": tokens}) if create else None,
                    storage_token_hours=tokens * hours)
    return call, proxy.accounts.record(call, prep, None, 200, ttft_s=None, upstream_s=time.perf_counter() - started)
