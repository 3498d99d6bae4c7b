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
from prefixgate.gateway.auth import Caller
from prefixgate.gateway.named_state import CACHE as KIND
from prefixgate.gateway.named_state import cache_id
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.provider_ids import FILE, body_ids, check_owned
from prefixgate.gateway.proxy import Prepared, Proxy
from prefixgate.gateway.unseen_prompt import file_tokens
from prefixgate.gateway.upstream import UpstreamResponse
from prefixgate.ir import Conversation
from prefixgate.policies import Upstream
from prefixgate.policies.limits import Reservation
from prefixgate.policies.schema import Route
from prefixgate.providers.cached_contents import parse_rfc3339
from prefixgate.usage import Usage, prompt_estimate

Forward = Callable[[str, bytes], Awaitable[UpstreamResponse]]
DEFAULT_TTL_S = 3600.0      # a create naming no lifetime lives an hour (Gemini's and Vertex's default)


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
    """Seconds the body asks the cache to live (`ttl` or `expireTime`); None when it names neither."""
    ttl = body.get("ttl")
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
    `forward(method, body)` sends it on to the cache's path upstream."""
    owner, now, method = principal(caller.key), time.time(), request.method
    if method == "PATCH":   # refused over budget before the cache's name is looked up or anything is sent
        await proxy.admit_state(caller, raw, dialect)
    reaches(proxy, caller, upstream.kind)
    if name and not await proxy.stored_ids.allows(KIND, name, owner):
        raise not_found(f"cachedContents/{name}")
    body = load_body(raw) if method in ("POST", "PATCH") else {}
    one_spelling(body, raw)     # its lifetime capped, its files checked and its cost held as Google reads it
    cap = proxy.settings.max_cache_ttl_s
    seconds = _capped(body, cap, now)
    paid_until, held = now, Reservation()
    if method == "POST":
        route = proxy.router.decide(model_of(body.get("model")), caller.key, dialect).route  # the key's routes name its models
        if caller.key is not None and owner is not None:
            # A cache of a file would hand the file to whoever builds on the cache.
            named = list(body_ids(body))
            await check_owned(proxy.stored_ids, owner, named, caller.key.provider_ids)
            tokens = prompt_estimate(raw).uncached_input
            tokens += sum([await file_tokens(proxy, owner, n.ident) or 0 for n in named if n.kind == FILE])
            lifetime = DEFAULT_TTL_S if seconds is None else seconds
            held = await proxy.limits.admit(caller.key, _worst(proxy, upstream, dialect, route, body, tokens, lifetime))
    elif method == "PATCH":
        before = await forward("GET", b"")      # storage is paid up to the old expiry; the PATCH buys the rest
        if 200 <= before.status < 300:
            stored = load_body(before.body)
            route = proxy.router.decide(model_of(stored.get("model")), caller.key, dialect).route   # refused before, not after
            paid_until = max(now, parse_rfc3339(stored.get("expireTime"), "expireTime"))
            tokens = (stored.get("usageMetadata") or {}).get("totalTokenCount")
            if caller.key is not None and seconds is not None and isinstance(tokens, int):
                # Its rate limit was counted by admit_state: this holds the hours it buys, as a create holds its own.
                held = await proxy.limits.admit(replace(caller.key, rate_limit=None), _worst(
                    proxy, upstream, dialect, route, stored, tokens, now + seconds - paid_until, written=False))
    try:
        return await _sent(request, proxy, caller, dialect, upstream, name, raw, forward, seconds, paid_until, held)
    except BaseException:
        proxy.limits.release(held)      # booked, it is settled instead (a second release is a no-op)
        raise


async def _sent(request: Request, proxy: Proxy, caller: Caller, dialect: str, upstream: Upstream, name: str, raw: bytes,
                forward: Forward, seconds: float | None, paid_until: float, held: Reservation) -> Response:
    """The call sent on, and what it answered booked: a create's or extension's cost replaces what it held."""
    owner, method, cap = principal(caller.key), request.method, proxy.settings.max_cache_ttl_s
    started = time.perf_counter()
    resp = await forward(method, raw)
    if not 200 <= resp.status < 300:
        proxy.limits.release(held)
        return Response(resp.body, resp.status, media_type="application/json")
    data = load_body(resp.body or b"{}")
    if method == "GET" and not name:
        data["cachedContents"] = await proxy.stored_ids.only_own(KIND, data.get("cachedContents") or [],
                                                             lambda c: cache_id(c.get("name", "")), owner)
        return Response(compact_bytes(data), resp.status, media_type="application/json")
    if method == "DELETE":
        await proxy.stored_ids.forget(KIND, name)
    elif method in ("POST", "PATCH"):
        # Its home: a follow-up naming the cache by id alone must reach the upstream (project, location) holding it.
        # And what a request naming it carries (gateway/unseen_prompt.py).
        tokens = (data.get("usageMetadata") or {}).get("totalTokenCount")
        proxy.stored_ids.record(KIND, cache_id(data.get("name", "")), owner, max(seconds or 0.0, cap), home=upstream.name,
                                tokens=tokens if isinstance(tokens, int) else None)
        created = parse_rfc3339(data["createTime"], "createTime") if method == "POST" and data.get("createTime") else paid_until
        return _recorded(proxy, request, caller, dialect, upstream, data, method == "POST", created, started, resp, held)
    return Response(resp.body, resp.status, media_type="application/json")


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


def _recorded(proxy: Proxy, request: Request, caller: Caller, dialect: str, upstream: Upstream, data: dict,
              create: bool, paid_from: float, started: float, resp: UpstreamResponse, held: Reservation) -> Response:
    """The answer, with the call in the ledger: a create bills the cached tokens at the input rate, and each call
    the storage it buys (tokens x hours from `paid_from` to the new expiry); spent against the key's budget."""
    wire = wire_format(dialect)
    model = model_of(data.get("model"))
    call = proxy.start(dialect, Conversation(dialect, model, []), caller, dict(request.headers), started)
    call.held = held        # settled at what the record books (Accounting.finish)
    planner = upstream.planner_provider(wire)
    the_plan = plan(call.conv, Target(planner, model), mode="off")
    the_plan.explanation[:] = [f"cachedContents.{'create' if create else 'patch'}: {data.get('name', '')}"]
    tokens = int((data.get("usageMetadata") or {}).get("totalTokenCount") or 0)
    # The cache exists upstream by now: an answer without a readable expiry must not turn into the caller's
    # error. Its storage is then unpriced, and the explanation says so.
    try:
        hours = Decimal(str(max(0.0, parse_rfc3339(data.get("expireTime"), "expireTime") - paid_from))) / 3600
    except RequestError:
        hours = Decimal(0)
        notes = ["cachedContents: the upstream's answer has no readable expireTime; storage not priced"]
    else:
        notes = []
    the_plan.explanation.extend(notes)
    prep = Prepared(upstream, wire, model, the_plan, b"", None, False, planner,
                    extra_usage=Usage(cache_writes={"explicit": tokens}) if create else None,
                    storage_token_hours=tokens * hours)
    rec = proxy.accounts.record(call, prep, None, 200, ttft_s=None, upstream_s=time.perf_counter() - started)
    return Response(resp.body, resp.status, media_type="application/json",
                    background=BackgroundTask(proxy.accounts.finish, call, rec))
