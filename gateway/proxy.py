"""One request through the gateway: authenticate, route, plan, forward with retries and fallbacks,
answer in the caller's dialect, and account for it.

Retries never double-bill: an attempt is retried or failed over only when the upstream refused it
(429/5xx) or never answered (connect error, timeout before the first byte). Once an upstream has
answered 2xx the request is that upstream's, streamed or not, and a later break is reported to the
caller instead of being sent again. An attempt that timed out may still have been run and billed: it is
a ledger row of its own, priced at its prompt (`Accounting.abandoned`); one that never connected cost nothing.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from starlette.background import BackgroundTask
from starlette.responses import Response

from prefixgate.cache_planner import Mode, Plan, PlannerState, RedisStore, Target, fingerprint, plan
from prefixgate.cache_planner.rewrite import system_text
from prefixgate.clock import clock_for
from prefixgate.compact_json import compact, compact_bytes
from prefixgate.config import Settings
from prefixgate.cost import Price
from prefixgate.dialects import resent, wire_format
from prefixgate.dialects.diagnosis import ProviderVerdict
from prefixgate.dialects.output_limit import catalogued_limit, with_output_limit
from prefixgate.dialects.translate import translate_body, translate_reply
from prefixgate.dialects.wire import WireFormat
from prefixgate.errors import RequestError
from prefixgate.gateway import lifecycle, off_loop
from prefixgate.gateway.accounting import UNREADABLE, UNREADABLE_USAGE, Accounting
from prefixgate.gateway.auth import Caller, party_of, upstream_credential
from prefixgate.gateway.body_limits import BodyLimits
from prefixgate.gateway.diagnostics import Ask, ProviderDiagnostics
from prefixgate.gateway.error_response import error_response
from prefixgate.gateway.estimate import (
    BOUND_HEADER,
    LONGEST_OUTPUT_TOKENS,
    MIN_OUTPUT_TOKENS,
    UNCAPPED_OUTPUT_TOKENS,
    estimated_usage,
    held_cost,
    output_bound,
    requested_output,
    uncapped_costs,
)
from prefixgate.gateway.explicit_caches import ExplicitCaches
from prefixgate.gateway.file_quota import FileQuota
from prefixgate.gateway.files_gone import forget_named_gone, may_name_a_gone_file
from prefixgate.gateway.in_flight import InFlight
from prefixgate.gateway.isolation import server_secret, tenant_salt, tenant_tag
from prefixgate.gateway.keepalive import KeepAlive, collects_replies, upgrades
from prefixgate.gateway.kv_index import KVIndex
from prefixgate.gateway.local import LocalTarget
from prefixgate.gateway.metrics import Metrics
from prefixgate.gateway.named_state import CACHE, cache_id
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.provider_ids import FILE, named_ids
from prefixgate.gateway.relay import stream_response
from prefixgate.gateway.response_cache import HEADER, Lookup, ResponseCache, asked_of
from prefixgate.gateway.state import MemoryCounters, RedisCounters
from prefixgate.gateway.sticky import Placement, Sticky
from prefixgate.gateway.stored_ids import StoredIds
from prefixgate.gateway.tracing import Tracing
from prefixgate.gateway.unseen_prompt import unseen_prompt
from prefixgate.gateway.upstream import (
    UpstreamClient,
    UpstreamFailure,
    UpstreamResponse,
    forwarded_headers,
    reported_error,
    request_url,
    takes_callers_headers,
)
from prefixgate.ir import Conversation
from prefixgate.ledger import Ledger, LedgerRecord
from prefixgate.policies import (
    Limits,
    Policy,
    Route,
    Router,
    TargetRef,
    Upstream,
    backoff_delay,
    pick_replica,
    retry_condition,
)
from prefixgate.policies.limits import NANO, Reservation, spend_counter
from prefixgate.policies.router import caller_checkpoints_for, priority_for
from prefixgate.policies.schema import ENGINE_PRIORITY, CallerKey
from prefixgate.policies.service_tiers import apply_tier, takes_tiers
from prefixgate.providers.cached_contents import parse_rfc3339
from prefixgate.providers.rules import Catalog, load_catalog
from prefixgate.usage import Usage

# A caller may name the stream of similar prompts a request belongs to; the planner learns per route.
ROUTE_HEADER = "x-prefixgate-route"


@dataclass
class Call:
    """One caller request in flight."""

    id: str
    dialect: str
    wire: WireFormat                    # the caller's wire format
    conv: Conversation
    caller: Caller
    route: Route
    mode: Mode
    headers: dict[str, str]             # caller headers to forward to a same-dialect upstream
    started: float
    include_usage: bool = True          # OpenAI streams: did the caller ask for the usage chunk?
    route_hint: str = ""                # the caller's x-prefixgate-route: one stream of similar prompts
    json_array: bool = False            # a Gemini stream asked without alt=sse: one JSON array, not events
    attempts: int = 0
    notes: list[str] = field(default_factory=list)
    span: Any = None                    # the request's OpenTelemetry span while it is open (tracing on)
    raw: bytes = b""                    # the body as the caller sent it
    cache_control: str = ""             # what the caller asks of the response cache (asked_of)
    response_cache: Lookup | None = None    # what the route's response cache does for it (None: cache off)
    provider_verdict: ProviderVerdict | None = None   # why the provider says its cache missed (diagnostics.py)
    held: Reservation = Reservation()   # what admission reserved against the key's budget
    estimate: Usage = Usage()           # the request's tokens as admission estimated them (prompt + max output)
    uncapped: bool = False              # its output limit is the one its budget hold pays for (estimate.py)
    priced_at: tuple[str, str] = ("", "")   # the upstream and model admission priced its hold at
    stored_id: str = ""                 # the id the upstream stored its answer under (a later request may continue it)
    prepared: Prepared | None = None    # the target the request went to, once chosen
    # An attempt is out (or ended in a way the upstream may have worked through: a timeout); False once the latest
    # was refused (429, 5xx, unreachable): a caller who hangs up in the backoff after a refusal cost nothing upstream.
    upstream_working: bool = False
    placement: Placement | None = None  # a balanced route's pin, as the request found it (gateway/sticky.py)
    home: str | None = None             # the upstream holding what it builds on (check_chain); None: any
    reply: list | None = None           # the answer's text blocks, kept for a keep-alive upgrade (keepalive.upgrades)
    kept_elsewhere: Any = None          # asking Redis what other replicas' keep-alive kept of its session (a task)
    # Its latest prefix keys' places in Redis (keepalive_shared), hashed once per session group: (group, places).
    places: tuple[tuple, list[str]] | None = None


@dataclass
class Prepared:
    """A request ready for one upstream: translated, planned, encoded."""

    upstream: Upstream
    wire: WireFormat                    # the upstream's wire format
    model: str
    plan: Plan
    body: bytes
    key: str | None
    stream: bool
    planner: str                        # whose caching rules planned it (planner_provider), once per request
    extra_usage: Usage | None = None    # tokens billed outside the response (an explicit cache created for it)
    storage_token_hours: Decimal = Decimal(0)   # storage of that cache over its TTL (tokens x hours)
    trace_body: str = ""                # the unplanned body, kept when the ledger keeps bodies
    ask: Ask = field(default_factory=Ask)   # the provider diagnostics this request carries (diagnostics.py)
    retires: str = ""                   # the model's retirement, for the lifecycle header (gateway/lifecycle.py)
    bound: int | None = None            # the output limit the key's budget set (BOUND_HEADER), where it set one

    @property
    def price_rows(self) -> str:
        """Whose price rows bill it: a compatible provider's own (deepseek, openrouter, ...), Vertex's, else the
        planner provider's."""
        return self.upstream.price_rows or self.planner

    def usage_counter(self) -> Any:
        """A stream usage accumulator for this request (which may say how its cache writes are priced)."""
        return self.wire.stream_usage(self.plan.conversation)

    def usage_of(self, data: dict) -> Usage:
        return self.wire.usage_of(data, self.plan.conversation)


def planned_cache(the_plan: Plan) -> str:
    """The id of the explicit cache a plan sends its request against ("" for none)."""
    return cache_id(the_plan.conversation.cache_params.get("cachedContent") or "")


def homeward(targets: tuple[TargetRef, ...], home: str | None) -> tuple[TargetRef, ...]:
    """The targets that can take a request whose stored answer or file lives on upstream `home`: those that
    reach it (any other account answers the provider's 404 for the id); all of them when none does."""
    holding = tuple(ref for ref in targets if home in ref.upstreams)
    return holding or targets


def _repriced(call: Call) -> CallerKey | None:
    """The key whose hold `Proxy.cover` and `Proxy.bound_at` reprice before a target: one with a budget and a hold,
    unless the hold is already the request's bound (an uncapped request's) or the route's `max_request_usd`."""
    key = call.caller.key
    if key is None or key.budget is None or not call.held.counter or call.uncapped \
            or call.route.max_request_usd is not None:
        return None
    return key


class Proxy:
    def __init__(self, settings: Settings, policy: Policy, *, local: LocalTarget | None = None,
                 planner_state: object | None = None, tracing: Tracing | None = None,
                 catalog: Catalog | None = None) -> None:
        self.settings = settings
        self.tracing = tracing
        self.policy = policy
        self.router = Router(policy)
        self.keys = {k.key_sha256: k for k in policy.keys}
        self.counters = RedisCounters(settings.redis_url) if settings.redis_url else MemoryCounters()
        self.limits = Limits(self.counters)
        self.upstream = UpstreamClient(settings.connect_timeout_s, local)
        self.ledger = Ledger.for_settings(settings)
        self.metrics = Metrics()
        self.catalog = catalog if catalog is not None else load_catalog(settings.providers_file or None)
        # The planner learns per route; with Redis, replicas share what they learn.
        self.planner_state = planner_state or PlannerState(
            store=RedisStore(settings.redis_url) if settings.redis_url else None)
        self.in_flight = InFlight()
        self.kv_index = (KVIndex(policy.upstreams, self.metrics.registry, self.in_flight)
                         if any(u.kv_events for u in policy.upstreams.values()) else None)
        # Who created each stored resource, and where each stored answer lives: kept, and shared.
        self.stored_ids = StoredIds(self.ledger.path, settings.redis_url)
        self.secret = server_secret(settings.tenant_secret, self.ledger.path, settings.redis_url)   # salts, tags
        self.response_cache = ResponseCache(settings.redis_url, self.metrics.registry)
        self.diagnostics = ProviderDiagnostics(self.catalog)
        # The wall clock, or one tests move (prefixgate/clock.py): the planner learns its gaps on the same clock as
        # keep-alive, sticky routes and explicit caches, so all four see the same idle times.
        self.clock = clock = clock_for(settings.clock_offset_file)
        self.sticky = Sticky(self.secret, settings.redis_url, clock)     # balanced routes: where each prefix is warm
        self.file_quota = FileQuota(self.ledger.path, settings.redis_url, clock)     # each party's uploads limit
        self.accounts = Accounting(self.ledger, self.metrics, self.limits, self.catalog, tracing, self.response_cache,
                                   self.stored_ids, self.sticky, self.file_quota, self.upstream, clock)
        self.body_limits = BodyLimits.of(settings)
        self.keepalive = KeepAlive(self, clock)   # refreshes idle sessions' caches
        self.accounts.observers.append(self.keepalive.observe)
        self.caches = ExplicitCaches(self, clock)   # the explicit caches it created: extended, deleted or left to expire

    async def aclose(self) -> None:
        await self.keepalive.aclose()
        await self.caches.aclose()
        # What this replica still holds of keys' budgets, released now (once nothing here can admit more): left
        # to expire, a rolling restart's holds would block their keys on every replica for HOLD_S.
        await self.limits.aclose()
        await self.upstream.aclose()
        await self.counters.close()
        await self.stored_ids.aclose()
        await self.file_quota.aclose()
        await self.response_cache.close()
        await self.sticky.aclose()
        self.ledger.close()
        if self.kv_index is not None:
            self.kv_index.close()

    def start(self, dialect: str, conv: Conversation, caller: Caller, headers: dict[str, str], started: float,
              span: Any = None, raw: bytes = b"") -> Call:
        decision = self.router.decide(conv.model or "", caller.key, dialect)
        wire = wire_format(dialect)
        call = Call(uuid.uuid4().hex[:20], dialect, wire, conv, caller, decision.route, decision.mode,
                    forwarded_headers(wire, headers),
                    started, span=span, raw=raw)
        call.include_usage = wire.caller_wants_usage(conv)
        call.route_hint = headers.get(ROUTE_HEADER, "")[:200]
        call.cache_control = asked_of(headers)
        return call

    # ---- the request path ---------------------------------------------------------------------

    async def admit(self, call: Call, ref: TargetRef | None = None, bounds_output: bool = False) -> None:
        """The one admission check for everything that costs money: the key's rate limits, and its budget
        with this request's estimated cost reserved (`ref`: the target that prices it, the route's first). A request
        that sets no output limit, where `bounds_output` (prepare() can set one), holds its worst case, or what the
        budget has left: prepare() sends it with the output limit that pays for."""
        key = call.caller.key
        if key is None:
            return
        estimate, least = Decimal(0), None
        if key.budget is not None:
            call.estimate = estimated_usage(call.conv, call.raw) + await unseen_prompt(self, call)
            ref = ref or call.route.targets[0]
            call.uncapped = (bounds_output and call.route.max_request_usd is None
                             and requested_output(call.conv.params) is None)
            first, model = self.policy.upstreams[ref.upstreams[0]], ref.model or call.conv.model or ""
            # Its marks as it goes to `first` (a translation of a big body: off the event loop, as prepare's).
            sent = None if call.route.max_request_usd is not None else await off_loop.work(
                len(call.raw), self.settings.off_loop_bytes, self._as_sent, call, first, model)
            if call.uncapped:
                price, limit = self._priced(call, first, model, call.estimate)
                estimate, least = uncapped_costs(call.estimate, price, limit, sent)
                call.uncapped = least is not None       # a free answer needs no bound
            else:
                estimate = self.estimated_cost(call, ref, call.estimate, sent)
                call.priced_at = (ref.upstreams[0], ref.model or call.conv.model or "")
        call.held = await self.limits.admit(key, estimate, least)

    async def admit_state(self, caller: Caller, body: dict, dialect: str) -> None:
        """Admission for a call that creates or extends billed provider state (an explicit cache, its TTL): the
        key's route for the model its `body` names (read and checked: a body refused is not counted), its rate limits,
        and a budget not already spent."""
        if caller.key is None:
            return
        named = body.get("model")
        if isinstance(named, str) and named:
            self.router.decide(named.rsplit("/", 1)[-1], caller.key, dialect)
        await self.hold_for(caller.key, Decimal(0))

    async def hold_for(self, key: CallerKey | None, usd: Decimal, counted: bool = False) -> Reservation:
        """Admission for a call that is not a model's but may cost `usd` (an explicit cache's create, the storage an
        extension buys), held against the key's budget until it is booked, by admission's rules (`Limits.admit`: its
        budget, its rate and tokens per minute, refusals as 429s the caller's format words); `counted`: the call
        was counted against its rate already (`admit_state`), and is not counted twice."""
        if key is None:
            return Reservation()
        return await self.limits.admit(replace(key, rate_limit=None) if counted else key, usd)

    def estimated_cost(self, call: Call, ref: TargetRef, usage: Usage, sent: Conversation | None) -> Decimal:
        """The route's declared cap, else `usage` held at the target model's price (`held_cost`: the prompt at its
        dearest rate, `sent` the body as it goes there; the route's declared price for a model the table lacks); a
        model with neither cannot be budgeted and is refused."""
        if call.route.max_request_usd is not None:
            return Decimal(str(call.route.max_request_usd))
        first, model = self.policy.upstreams[ref.upstreams[0]], ref.model or call.conv.model or ""
        return held_cost(usage, self._priced(call, first, model, usage)[0], sent)

    async def cover(self, call: Call, prep: Prepared) -> None:
        """Reprice the key's hold at what the request may cost at `prep`'s target, on its body as planned for it.
        Admission priced it at the route's first target, the prompt at the dearest write where the planner had yet
        to mark it. More: a fallback to a dearer model or provider, a sticky route's other target, a replica of
        another kind; granted as admission grants (while what the key spent and its other requests hold leave any
        room), else a 429 and the target is skipped. Holding the dearest target's worst case up front would refuse
        requests the first target serves within the budget; held at the first target's, N concurrent requests
        failing over each spent more than they held. Less: the planner's marks ask for a cheaper write (5 minutes,
        or none past the last mark). An uncapped request's output is bounded to its hold instead (`_bounded`); a
        route's `max_request_usd` is its hold whatever the target. One that sets no output limit and is still unbounded
        (free at every replica `bound_at` priced) holds the model's whole limit: it may run to that here."""
        key = _repriced(call)
        if key is None:
            return
        if call.mode == "off" and call.priced_at == (prep.upstream.name, prep.model):
            return      # admission priced this very body there (its marks are read once)
        price, limit = self._priced(call, prep.upstream, prep.model, call.estimate)
        usage = call.estimate if requested_output(call.conv.params) is not None else replace(call.estimate, output=limit)
        cost = held_cost(usage, price, self._as_sent(call, prep.upstream, prep.model, prep.plan.conversation))
        call.held = await self.limits.rehold(key, call.held, cost)

    async def bound_at(self, call: Call, ref: TargetRef) -> None:
        """Hold a request that sets no output limit, admitted at a free model (no answer's length to pay for there),
        as admission holds it at a paid one before `ref`'s target (the dearest of its replicas) charges for output:
        its worst case there, or what the budget has left (at least a minimal answer's worth, else a 429 and the
        target is skipped), and prepare() sends it with the output limit that pays for (`_bounded`). Repriced at the
        target's whole limit instead (`cover`), one such request was granted while the budget had any room and could
        overshoot it by its whole answer (128,000 tokens at gpt-5.5's $30/MTok: $3.84 against $0.50)."""
        key = _repriced(call)
        if key is None or requested_output(call.conv.params) is not None:
            return
        model = ref.model or call.conv.model or ""
        call.uncapped = True        # priced as admission prices an uncapped request (`_priced`)
        try:
            # prepare() picks the replica (by prompt and load): held at the dearest that charges for output. A free
            # first replica alone would leave a paid one sent unbounded on the model's whole limit (`cover`).
            costs = [cost for name in ref.upstreams if (cost := self._uncapped_at(call, name, model, name == ref.upstreams[0]))]
            if costs:
                call.held = await self.limits.rehold(key, call.held, *max(costs))
        except BaseException:
            call.uncapped = False
            raise
        call.uncapped = bool(costs)

    def _uncapped_at(self, call: Call, name: str, model: str, first: bool) -> tuple[Decimal, Decimal] | None:
        """An uncapped request's worst case and least hold at upstream `name` (`uncapped_costs`); None where its
        answer is free, or (a replica past the first) it has no price: `cover` refuses it if prepare() picks it."""
        upstream = self.policy.upstreams[name]
        try:
            price, limit = self._priced(call, upstream, model, call.estimate)
        except RequestError:
            if first:
                raise
            return None
        worst, least = uncapped_costs(call.estimate, price, limit, self._as_sent(call, upstream, model))
        return None if least is None else (worst, least)

    def _as_sent(self, call: Call, upstream: Upstream, model: str, planned: Conversation | None = None
                 ) -> Conversation | None:
        """The body whose marks alone may write the prompt to `upstream`'s cache (`held_cost`'s `sent`): `planned`
        (the body as planned for it), else, at admission, where the route plans nothing, the caller's own as it goes
        upstream: in its own format, one that carries the same body (Claude's on Bedrock and Vertex), or translated
        (a Chat Completions body marks nothing unless its `prompt_cache_key` becomes Claude's automatic marker);
        None where the provider writes unmarked prompts, before the planner has placed its marks, or where the
        body cannot be translated (prepare() skips that target)."""
        wire = wire_format(upstream.dialect_for(call.dialect, model))
        if self.catalog.writes_unmarked(upstream.planner_provider(wire, model)):
            return None
        if planned is not None or call.mode != "off":
            return planned
        if wire is call.wire:
            return call.conv
        try:
            return self._convert(call, wire, model)[0]
        except RequestError:
            return None

    def _priced(self, call: Call, upstream: Upstream, model: str, usage: Usage) -> tuple[Price, int]:
        """The price of `usage` of `model` at `upstream`, and how many output tokens the model answers with at most
        (the catalogue's limit, else LONGEST_OUTPUT_TOKENS); a model with no price cannot be budgeted (a 400)."""
        rows = upstream.price_provider(wire_format(upstream.dialect_for(call.dialect, model)))
        limit = catalogued_limit(rows, upstream.base_model(model), self.catalog) or LONGEST_OUTPUT_TOKENS
        price = self.accounts.price(rows, upstream, model, replace(usage, output=limit) if call.uncapped else usage,
                                    call.route.price)
        if price is None:
            raise RequestError(f"model {model!r} has no known price, so key {call.caller.key.name!r} cannot spend its "  # type: ignore[union-attr]
                               f"budget on it: the operator can declare one on route {call.route.name!r} "
                               "(price: {input, output}, USD per million tokens) or cap it (max_request_usd)",
                               field="model", status=400, kind="invalid_request")
        return price, limit

    async def restore_budgets(self) -> None:
        """Without Redis the counters start empty: each budgeted key starts from what the ledger says it spent
        in its current window (`period: total` included), so a restart forgives nothing. With Redis a month budget
        takes in what its 30-day window counted before the upgrade to calendar months (`Limits.carry_thirty_days`)."""
        if self.settings.redis_url:
            for key in self.policy.keys:
                await self.limits.carry_thirty_days(key)
            return
        for key in self.policy.keys:
            if key.budget is not None:
                _, _, start = spend_counter(key, self.limits.clock())
                pico = self.ledger.spend_pico(start, "key", key.name)
                await self.limits.restore(key, -(-pico // 1000))

    async def handle(self, call: Call) -> Response:
        try:
            return await self._handle(call)
        except Exception:
            # Whatever escaped before an answer took the request over (a refusal after admission, a bug: the
            # caller gets a 4xx or the gateway's 500) gives the reservation back; one its record settled is a
            # no-op. Without this the key's budget stayed held until restart (or the shared hold's expiry).
            self.limits.release(call.held)
            raise

    async def _handle(self, call: Call) -> Response:
        await self.check_chain(call)
        await self.admit(call, bounds_output=True)
        call.response_cache = await self.response_cache.lookup(call, lambda ref: self.retirement(call, ref))
        if call.response_cache is not None and call.response_cache.state == "hit":
            return self.response_cache.replay(self.accounts, call, call.response_cache)
        failure: UpstreamFailure | RequestError | None = None
        retry = call.route.retry
        for ref in homeward(await self.sticky.order(self, call), call.home):
            try:
                await self.bound_at(call, ref)
                prep = await off_loop.work(len(call.raw), self.settings.off_loop_bytes, self.prepare, call, ref,
                                           parts=off_loop.planned)
                await self.cover(call, prep)
            except RequestError as e:       # this target cannot take the request (translation, credentials, budget)
                call.notes.append(f"skip {'/'.join(ref.upstreams)}: {e.message}")
                # An earlier target's failure is the caller's answer (and its record's cost), not this skip.
                failure = failure if isinstance(failure, UpstreamFailure) else e
                continue
            prep = await self.explicit_cache(call, prep)
            if call.prepared is not None and call.prepared.extra_usage is not None:
                await self.caches.left_behind(call, call.prepared)     # the target before this one, failed
            call.prepared = prep
            self.keepalive.looking(call, prep)
            for attempt in range(1, retry.attempts + 1):
                call.attempts += 1
                sent = time.perf_counter()
                with self.in_flight.hold(prep.upstream.name) as slot:
                    call.upstream_working = True
                    try:
                        resp = await self._send(call, prep, retry.timeout_s)
                    except UpstreamFailure as f:
                        failure, call.upstream_working = f, f.timed_out or f.answered
                    else:
                        self.metrics.attempts.labels(prep.upstream.name, "ok").inc()
                        if prep.stream:
                            # The stream's response holds the slot until its body ends (or never starts).
                            return stream_response(self.accounts, self.diagnostics, call, prep, resp, sent, slot.hand_off())
                        return self.complete(call, prep, resp, sent)
                if may_name_a_gone_file(failure.status):     # a file the request names, deleted at the provider
                    await forget_named_gone(self.stored_ids, self.file_quota, principal(call.caller.key), call.conv,
                                            prep.upstream, failure)
                condition = retry_condition(failure.status, failure.timed_out, failure.connect_failed)
                self.metrics.attempts.labels(prep.upstream.name, condition or str(failure.status)).inc()
                if failure.answered:    # a 2xx whose body broke: that upstream's answer, billed, never sent twice
                    return self.fail(call, failure.request_error(), prep,
                                     self.accounts.estimated(call, "the answer broke off after the upstream's 2xx"))
                if failure.timed_out:   # it may have run (and been billed) all the same: on a row of its own
                    call.upstream_working = False       # so a hang-up from here bills nothing more for it
                    await self.accounts.abandoned(call, prep)
                if condition is None or condition not in retry.on:
                    return self.fail(call, failure.request_error(), prep)
                call.notes.append(f"attempt {call.attempts} on {prep.upstream.name}: {condition}")
                if failure.out_of_quota:
                    break       # the same account would refuse it again: on to the next target, if any
                if attempt < retry.attempts:
                    await asyncio.sleep(backoff_delay(retry, attempt, failure.retry_after))
        if isinstance(failure, UpstreamFailure):
            # The last target tried: what was billed before its call failed (an explicit cache it created) is on it.
            return self.fail(call, failure.request_error(), call.prepared)
        raise failure or RequestError("no target could take this request", status=502, kind="server")

    async def check_chain(self, call: Call) -> None:
        """A request may continue only a stored answer its own tenant created (another's, or one the gateway
        never saw created, is not found: the upstream cannot tell tenants apart behind the gateway's key)."""
        chained = call.wire.chained_id(call.conv)
        if chained and not await self.stored_ids.allows(call.wire.stored_kind, chained, principal(call.caller.key)):
            raise call.wire.chain_not_found(chained)
        call.home = await self.home(call.wire, call.conv)

    async def home(self, wire: WireFormat, conv: Conversation) -> str | None:
        """The upstream holding what `conv` builds on (its chained stored answer, else the first uploaded file it
        names, else its explicit cache), which any other account answers with a 404; None: any. Found in Redis
        when another replica made it, and kept here (prepare() reads it)."""
        home = await self.stored_ids.find_home(wire.stored_kind, wire.chained_id(conv))
        for named in named_ids(conv) if home is None else ():
            if named.kind == FILE and (home := await self.stored_ids.find_home(FILE, named.ident)) is not None:
                break
        cached = cache_id(conv.params.get("cachedContent") or conv.params.get("cached_content") or "")
        if home is None and cached:
            # So does an explicit cache (in one project and location, or one Gemini API key's project).
            home = await self.stored_ids.find_home(CACHE, cached)
        return home

    async def counted_on(self, wire: WireFormat, conv: Conversation, route: Route) -> tuple[TargetRef, Upstream]:
        """The target and upstream a token count for `conv` asks: where what it names lives, else the route's
        first (a count reads the chain and files a request would)."""
        home = await self.home(wire, conv)
        ref = homeward(route.targets, home)[0]
        return ref, self.policy.upstreams[home if home in ref.upstreams else ref.upstreams[0]]

    async def _send(self, call: Call, prep: Prepared, timeout_s: float) -> UpstreamResponse:
        """One attempt at `prep`'s upstream, with its own client span when the request is traced."""
        send = self.upstream.send(prep.upstream, prep.wire, prep.model, prep.body, prep.stream, self._headers(call, prep),
                                  prep.key, timeout_s)
        if call.span is None:
            return await send
        span = self.tracing.attempt_span(call.span, prep.upstream.name, prep.model, call.attempts)
        try:
            resp = await send
        except UpstreamFailure as f:
            self.tracing.end_attempt(span, retry_condition(f.status, f.timed_out, f.connect_failed) or str(f.status), f.status)
            raise
        except BaseException:
            self.tracing.end_attempt(span, "cancelled", None)
            raise
        self.tracing.end_attempt(span, "ok", resp.status)
        return resp

    def retirement(self, call: Call, ref: TargetRef) -> lifecycle.Verdict:
        """The model `ref` sends for `call` under the route's `on_retired` (a retired one's replacement, or the
        refusal raised), with its lifecycle note and header."""
        first = self.policy.upstreams[ref.upstreams[0]]
        model = ref.model or call.conv.model or ""
        if first.deployments:   # an Azure deployment's name is not its model's
            return lifecycle.Verdict(model)
        wire = wire_format(first.dialect_for(call.dialect, model))
        return lifecycle.check(first.price_rows or first.planner_provider(wire, model), model, call.route.on_retired,
                               self.catalog, today=lifecycle.day_of(self.clock()))

    def prepare(self, call: Call, ref: TargetRef) -> Prepared:
        first = self.policy.upstreams[ref.upstreams[0]]
        first_wire = wire_format(first.dialect_for(call.dialect, ref.model or call.conv.model or ""))
        verdict = self.retirement(call, ref)
        model, retires = verdict.model, verdict.header
        call.notes += [verdict.note] if verdict.note and verdict.note not in call.notes else []
        # Whose caching rules and prices apply: worked out once here, carried on the Prepared to the record.
        planner = first.planner_provider(first_wire, model)
        conv, notes = self._convert(call, first_wire, model)
        sent_as = compact(first_wire.encode_request(conv)) if call.route.keeps_bodies(self.settings.ledger_bodies) else ""
        # A compatible provider's model is looked up in its own rows; an Azure deployment as its base model.
        target = Target(planner, first.base_model(model), first.price_rows)
        party = principal(call.caller.key)
        the_plan = plan(conv, target, self.planner_state, call.mode, route=self._planner_route(call, conv, first),
                        now=self.clock(), catalog=self.catalog, caller_checkpoints=caller_checkpoints_for(call.route, call.caller.key),
                        rule=call.route.rewrite, cache_key=call.route.prompt_cache_key,
                        # Derived cache keys are scoped to the caller's party, named by a value only the server can compute.
                        tenant=tenant_salt(self.secret, party) if party else "",
                        keepalive=call.route.keepalive.on, upgrade=upgrades(call.route, first_wire))
        the_plan.route = call.route.name
        the_plan.explanation[:0] = notes
        home = self.stored_ids.home_of(first_wire.stored_kind, first_wire.chained_id(conv)) or call.home \
            or self.stored_ids.home_of(CACHE, planned_cache(the_plan))     # the planner's own explicit cache
        if home in ref.upstreams:
            name = home     # the chain (or the file it names) lives there
        elif self.kv_index is not None and self.kv_index.covers(ref.upstreams):
            party = principal(call.caller.key)   # the salt prepare() sends below, which the replica hashed with
            salt = (tenant_salt(self.secret, party)
                    if first.self_hosted and self.settings.tenant_cache_isolation and party is not None else None)
            name, note = self.kv_index.route(ref.upstreams, first_wire.encode_request(the_plan.conversation), salt,
                                             the_plan.prefix_hash, self.in_flight, ref.load_factor)
            the_plan.explanation.append(note)
        else:
            name = ref.upstreams[0] if len(ref.upstreams) == 1 else pick_replica(
                the_plan.prefix_hash, ref.upstreams, self.in_flight, ref.load_factor)
        upstream = self.policy.upstreams[name]
        key = upstream_credential(upstream, call.caller, call.dialect)
        wire = wire_format(upstream.dialect_for(call.dialect, model))
        request_url(upstream, wire, model, call.conv.stream)    # a model its URL cannot carry: refused here (400)
        planned, bound = self._bounded(call, upstream, wire, model, wire.at_upstream(the_plan.conversation, upstream.url))
        params = planned.params
        billable = wire.billable(planned)
        salted = upstream.self_hosted and self.settings.tenant_cache_isolation and party is not None
        tagged = call.route.isolation == "tenant" and not upstream.self_hosted and party is not None
        ask = self.diagnostics.attach(call, upstream, wire, model, billable, key)
        priority = priority_for(call.route, call.caller.key)
        ranked = upstream.self_hosted and priority != "normal"
        tiered = takes_tiers(call.route.service_tiers, upstream.kind)
        if ranked:
            the_plan.explanation.append(f"priority: {priority} (engine priority {ENGINE_PRIORITY[priority]})")
        if (call.raw and not ask.fields and the_plan.mode == "off" and wire is call.wire and billable is planned
                and billable.params is params and params == call.conv.params and not billable.cache_params
                and not salted and not tagged and not ranked and not tiered):
            # Planning is off and nothing else changed the request (format, model, usage options, salt): the
            # caller's own bytes go upstream, with no re-encoding in proportion to the body.
            body = call.raw
        else:
            payload = wire.encode_request(billable)
            if salted:
                # The salt is the gateway's to set, never the caller's: one tenant must not borrow another's.
                payload["cache_salt"] = tenant_salt(self.secret, party)  # type: ignore[arg-type]
            if tagged:
                wire.tag_prompt(payload, tenant_tag(self.secret, party))  # type: ignore[arg-type]
            if ranked:
                payload["priority"] = ENGINE_PRIORITY[priority]
            if tiered and (note := apply_tier(payload, call.route.service_tiers, priority)):
                the_plan.explanation.append(note)
            payload.update(ask.fields)
            body = resent.encode(payload, billable.source)
        if upstream is not first:   # a replica of another kind (replicas share a format, not always a kind)
            planner = upstream.planner_provider(wire, model)
        return Prepared(upstream, wire, model, the_plan, body, key, call.conv.stream, planner, trace_body=sent_as,
                        ask=ask, retires=retires, bound=bound)

    def _bounded(self, call: Call, upstream: Upstream, wire: WireFormat, model: str, planned: Conversation
                 ) -> tuple[Conversation, int | None]:
        """`planned` with the output limit the key's budget hold pays for at `upstream`'s price, where that is under
        the model's own (noted), and that limit; as it was otherwise, and None. Refused where the hold pays for no
        minimal answer there (a dearer fallback)."""
        if not call.uncapped:
            return planned, None
        price, limit = self._priced(call, upstream, model, call.estimate)
        bound = output_bound(Decimal(call.held.nano) / NANO, call.estimate, price, limit,
                             self._as_sent(call, upstream, model, planned))
        if bound >= limit:
            return planned, None
        if bound < MIN_OUTPUT_TOKENS:
            raise RequestError(f"what key {call.caller.key.name!r}'s budget has left pays for no answer from {model}",  # type: ignore[union-attr]
                               status=429, kind="quota")
        call.estimate = replace(call.estimate, output=min(bound, UNCAPPED_OUTPUT_TOKENS))
        call.notes.append(f"budget: output limit {bound} (all that the budget left to key "  # type: ignore[union-attr]
                          f"{call.caller.key.name!r} pays for; {model}'s own is {limit})")
        return replace(planned, params=with_output_limit(wire.name, planned.params, bound)), bound

    def _planner_route(self, call: Call, conv: Conversation, first: Upstream) -> str:
        """Tenants never share learned state; within one, the caller's route header, else the prompt's shape."""
        # On an open gateway, per caller credential: the explicit caches (and hour-long entries) a route's state
        # holds live in that caller's account (another caller's request planned against them: a 403 at Google).
        party = party_of(call.caller, first, call.dialect)
        if call.route_hint:
            return f"{party}/{call.route_hint}"
        return self.planner_state.resolve(f"{party}/", fingerprint(conv), system_text(conv))

    async def explicit_cache(self, call: Call, prep: Prepared) -> Prepared:
        """Create the explicit cache the plan asks for (a Gemini cachedContents entry, with the caller's
        credentials), then send the request against it. A refusal is noted and the request goes out as
        planned without it."""
        await self.caches.used(prep)
        # A cache another replica's planner made: its home, from Redis, kept here for prepare() from now on.
        await self.stored_ids.find_home(CACHE, planned_cache(prep.plan))
        create = prep.plan.cache_create
        if create is None or prep.wire.explicit_cache_path is None:
            return prep
        create, tag = self.caches.named(prep.wire.explicit_cache_body(prep.upstream.url, create))
        try:
            resp = await self.upstream.forward(prep.upstream, prep.wire, "POST", prep.wire.explicit_cache_path, "",
                                               compact_bytes(create), prep.key, call.route.retry.timeout_s)
            data = json.loads(resp.body or b"{}")
            name, expires = data["name"], parse_rfc3339(data["expireTime"], "expireTime")
        except (UpstreamFailure, RequestError, ValueError, KeyError, TypeError) as e:
            reason = e.message if isinstance(e, UpstreamFailure | RequestError) else f"unexpected answer ({type(e).__name__})"
            call.notes.append(f"cache: explicit cache not created: {reason}")
            if not isinstance(e, UpstreamFailure) or e.in_doubt:
                self.caches.in_doubt(call, prep, tag)       # no answer, or an unreadable one: it may exist
            return prep
        prep.plan.adopt_cached_content(name, expires)
        # Where it lives (one project and location): later turns planned against it go there (prepare()).
        self.stored_ids.record(CACHE, cache_id(name), principal(call.caller.key), max(60.0, expires - time.time()),
                               home=prep.upstream.name)
        tokens = int((data.get("usageMetadata") or {}).get("totalTokenCount") or 0)
        self.caches.created(call, prep, name, expires, tokens)
        body = compact_bytes(prep.wire.encode_request(prep.plan.conversation))
        # Creating the cache bills its tokens at the input rate, and its storage for the TTL it asked for: both on
        # this request's record (an extension or an early deletion is a record of its own: explicit_caches.py).
        created = parse_rfc3339(data["createTime"], "createTime") if data.get("createTime") else time.time()
        hours = Decimal(str(max(0.0, expires - created))) / 3600
        return replace(prep, body=body, extra_usage=Usage(cache_writes={"explicit": tokens}),
                       storage_token_hours=tokens * hours)

    def _convert(self, call: Call, target: WireFormat, model: str) -> tuple[Conversation, list[str]]:
        conv = call.conv
        if target is call.wire:
            params = {**conv.params, "model": model} if target.model_in_body else conv.params
            return replace(conv, model=model, params=params), []
        adopted = target.adopt(replace(conv, model=model), call.headers)
        if adopted is not None:
            return adopted, [f"translate: {call.wire.name} -> {target.name} (same body)"]
        # Some callers stream by URL, not by a body field: the caller's intent is conv.stream.
        translated, notes = translate_body(call.wire.encode_request(conv), call.wire, target, model, stream=conv.stream)
        out = target.parse_request(translated, model=model)
        out.stream = conv.stream
        return out, notes

    def _headers(self, call: Call, prep: Prepared) -> dict[str, str]:
        """The format's fixed headers, plus the caller's own for an upstream of the caller's provider itself."""
        headers = dict(prep.wire.upstream_headers)
        if prep.wire is call.wire and takes_callers_headers(prep.upstream):
            headers.update(call.headers)
        return headers

    # ---- answers ------------------------------------------------------------------------------

    def complete(self, call: Call, prep: Prepared, resp: UpstreamResponse, sent: float) -> Response:
        received = time.perf_counter()
        try:
            data = json.loads(resp.body or b"")
        except ValueError:
            data = None
        if not isinstance(data, dict):     # answered (and billed) all the same
            return self.fail(call, RequestError(f"upstream {prep.upstream.name!r} sent a body that is not a JSON object",
                                                status=502, kind="server"), prep,
                             self.accounts.estimated(call, "the upstream's answer could not be read"))
        try:
            usage: Usage | None = prep.usage_of(data)
        except UNREADABLE:      # a compatible server's own idea of usage (token counts as strings): passed on, unpriced
            usage = None
            call.notes.append(UNREADABLE_USAGE)
        if (reported := prep.wire.stream_error(data)) is not None:
            # An error in a 200 body: OpenRouter's once the model began (its docs), never an answer to relay as one.
            if usage in (None, Usage()):
                usage = self.accounts.prompt_only(call, prep, "the upstream answered with an error after it took the prompt")
            return self.fail(call, reported_error(prep.upstream.name, prep.wire, data, resp.clean(reported)), prep, usage)
        self.accounts.stored(call, prep, prep.wire.stored_id(data))
        self.accounts.created(call, data)
        self.diagnostics.read(call, prep.ask, data)
        if prep.wire is call.wire:
            content = resp.body or b""
        else:
            try:
                content = compact_bytes(translate_reply(data, prep.wire, call.wire, call.conv.model or prep.model))
            except UNREADABLE:
                return self.fail(call, RequestError(f"upstream {prep.upstream.name!r} sent an answer the gateway could "
                                                    "not translate", status=502, kind="server"), prep,
                                 usage if usage not in (None, Usage()) else self.accounts.estimated(
                                     call, "the upstream's answer could not be read"))
        if call.response_cache is not None and call.response_cache.collects:
            try:
                call.response_cache.answer.whole(prep.wire.read_reply(data), content, prep.wire)
            except UNREADABLE:
                pass        # passed on as sent, never stored: an answer the cache cannot read is none it may replay
        if collects_replies(call.route, prep.wire, bool(prep.trace_body)):
            reply = prep.wire.reply_collector()
            reply.whole(data)
            call.reply = reply.content()
        rec = self.accounts.record(call, prep, usage, 200, ttft_s=None, upstream_s=received - sent)
        headers = {**resp.headers, **self.headers(call, prep, rec)}
        return Response(content, 200, headers, media_type="application/json",
                        background=BackgroundTask(self.accounts.finish, call, rec))

    def fail(self, call: Call, err: RequestError, prep: Prepared | None, usage: Usage | None = None) -> Response:
        rec = self.accounts.record(call, prep, usage, err.status, ttft_s=None, upstream_s=0.0, error=err.message)
        headers = {"x-prefixgate-request-id": call.id}
        if call.response_cache is not None:
            headers[HEADER] = call.response_cache.state
        return error_response(err, call.dialect, headers, BackgroundTask(self.accounts.finish, call, rec))

    def headers(self, call: Call, prep: Prepared, rec: LedgerRecord) -> dict[str, str]:
        out = {
            "x-prefixgate-request-id": call.id,
            "x-prefixgate-route": call.route.name,
            "x-prefixgate-target": prep.upstream.name,
            "x-prefixgate-plan": prep.plan.summary,
            "x-prefixgate-overhead-ms": f"{rec.overhead_ms:.3f}",
        }
        if prep.retires:
            out[lifecycle.HEADER] = prep.retires
        if prep.bound is not None:
            out[BOUND_HEADER] = str(prep.bound)
        if call.response_cache is not None:
            out[HEADER] = call.response_cache.state
        if rec.status == 200 and not prep.stream:
            out["x-prefixgate-cache-read-tokens"] = str(rec.cache_read)
            out["x-prefixgate-cost-usd"] = rec.cost_usd if rec.cost_usd is not None else "unknown"
            out["x-prefixgate-savings-usd"] = rec.savings_usd if rec.savings_usd is not None else "unknown"
        return out
