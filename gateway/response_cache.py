"""The exact response cache: a route's repeated request answered from a stored answer, under the contract of
docs/response-cache.md.

- Key: the caller's scope (its tenant, or its key when it has none; on an open gateway, a hash of the credential
  it brought), the route, the upstreams and models of the targets it stores answers from (`pool`; each model as
  sent: a retired one's replacement under `on_retired: replace`, while `refuse` bypasses the cache), the caller's
  wire format and forwarded headers, and every field of the parsed request (segments through their content hashes, cache markers aside,
  and every other body field but `stream` / `stream_options`). A streamed request and its whole twin share an
  entry. The key is a SHA-256: it names no tenant and holds no prompt.
- Stored: only a 2xx answer with text or tool calls that ended naturally (neutral finish `stop`; `tool_calls`
  too when the route allows it), from one of those targets, fully received. Errors, truncation, content
  filtering, refusals, fallbacks, broken or abandoned streams never are.
- Replayed: in the caller's format, whole (the exact body stored) or as a stream (through the format's
  `stream_writer`), reporting the usage the stored answer reported; tool calls that came with reasoning state the
  caller must send back (`response_rules.signed`) only whole, as the exact body carries it.
- Shadow mode looks up and stores but never serves: a would-be hit is counted, and for a request at
  temperature 0 the fresh answer is compared with the stored one.

An entry that cannot be read is a miss and a log line; a store that does not answer is a bypass and a log line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import orjson
from prometheus_client import CollectorRegistry, Counter, Gauge
from starlette.background import BackgroundTask
from starlette.responses import Response, StreamingResponse

from prefixgate.compact_json import compact_bytes
from prefixgate.dialects.neutral import Delta, Reply, ToolCall, json_or_raw
from prefixgate.dialects.wire import WireFormat
from prefixgate.errors import RequestError
from prefixgate.gateway.lifecycle import HEADER as RETIRES
from prefixgate.gateway.lifecycle import Verdict
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.response_rules import deterministic, refusal, signed, uncacheable
from prefixgate.gateway.response_store import MemoryStore, RedisStore, StoreError, StoreResting
from prefixgate.ir import CACHE_MARKERS
from prefixgate.ledger import LedgerRecord
from prefixgate.policies.schema import ResponseCachePolicy, Route, TargetRef
from prefixgate.usage import Usage

if TYPE_CHECKING:
    from prefixgate.gateway.accounting import Accounting
    from prefixgate.gateway.proxy import Call

log = logging.getLogger("prefixgate.gateway")

HEADER = "x-prefixgate-response-cache"                  # the answer: hit | miss | shadow-hit | bypass
CONTROL = "x-prefixgate-response-cache-control"         # the request: skip-read, skip-write, refresh
CONTROLS = ("skip-read", "skip-write", "refresh")
TRANSPORT = ("stream", "stream_options")                # body fields that change how an answer travels, not what it says
VERSION = 2                                              # of the key and entry layout: a change misses old entries
MAX_UNFORGOTTEN = 10_000                                 # deleted answers kept to forget once Redis answers again


# The standard request directives (RFC 9111 5.2.1) in the cache's own words: no-store, never store the answer
# (a stored one may answer); no-cache, never serve a stored answer without going upstream (the fresh one may stay).
STANDARD = {"no-store": "skip-write", "no-cache": "refresh"}


def asked_of(headers: Mapping[str, str]) -> str:
    """What a caller asks of the cache: its `x-prefixgate-response-cache-control`, and its `Cache-Control`."""
    standard = (STANDARD.get(d.strip().lower()) for d in headers.get("cache-control", "").split(","))
    return ", ".join(filter(None, (headers.get(CONTROL, ""), *standard)))


def tenant_scope(call: Call) -> str:
    """Whose entries these are: the party that owns what the key stores upstream (its tenant, else the key's
    secret, `ownership.principal`); on an open gateway, the credential the caller brought (its own provider
    key), hashed, so two callers of one open gateway never share answers."""
    owner = principal(call.caller.key)
    if owner is not None:
        return owner
    cred = call.caller.credential or ""
    return "credential:" + hashlib.sha256(cred.encode()).hexdigest()


def _numbers(value: Any) -> Any:
    """`value` with each integral float as the integer it equals: JSON's 0 and 0.0 are one number (SDKs differ)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    return value


def _canonical(value: Any) -> bytes:
    value = _numbers(value)
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:       # what orjson refuses (integers past 64 bits) the standard library writes
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def pool(route: Route) -> tuple[TargetRef, ...]:
    """The targets whose answers the route's entries hold: a balanced route's every one (a pool serving one model,
    policies/balance.py), else its first (the others are fallbacks, which may serve another model)."""
    return route.targets if route.balance else route.targets[:1]


def request_key(call: Call, models: Sequence[str] | None = None) -> str:
    """The entry key of `call` (see the module docstring for what it covers); `models`: what each of the pool's
    targets sends (as they name it, when not given)."""
    conv = call.conv
    sent = models if models is not None else [ref.model or conv.model or "" for ref in pool(call.route)]
    answering = [[list(ref.upstreams), model] for ref, model in zip(pool(call.route), sent, strict=True)]
    h = hashlib.sha256(_canonical([VERSION, tenant_scope(call), call.route.name, answering, call.wire.name,
                                   sorted(call.headers.items())]))
    for seg in conv.segments:
        # The segment's own fields (role, name, tool_call_id...); its content is in its blocks' hashes.
        native = {k: v for k, v in seg.native.items() if k != seg.blocks_field and k not in CACHE_MARKERS} \
            if isinstance(seg.native, dict) else None
        h.update(b"\x1e" + _canonical([seg.role, native]))
        h.update("".join(conv.block_keys(seg.blocks)).encode())
    h.update(b"\x1d" + _canonical({k: v for k, v in conv.params.items() if k not in TRANSPORT and k not in CACHE_MARKERS}))
    return h.hexdigest()


@dataclass
class Entry:
    """A stored answer: neutral (for streams), the exact whole body the caller's format got (for whole replays,
    when the answer was whole), and what it cost to make."""

    reply: Reply
    native: str | None
    target: str
    provider: str
    model: str
    cost_usd: str | None
    stored_at: float

    def to_bytes(self) -> bytes:
        reply = {"text": self.reply.text, "finish": self.reply.finish, "id": self.reply.id,
                 "tool_calls": [[c.id, c.name, c.args] for c in self.reply.tool_calls],
                 "usage": {k: v for k, v in asdict(self.reply.usage).items() if k != "reported_cost"}}
        return compact_bytes({"v": VERSION, "reply": reply, "native": self.native, "target": self.target,
                              "provider": self.provider, "model": self.model, "cost_usd": self.cost_usd,
                              "stored_at": self.stored_at})

    @classmethod
    def from_bytes(cls, raw: bytes) -> Entry:
        """Raises ValueError (or KeyError, TypeError) on anything but an entry this version wrote."""
        data = json.loads(raw)
        if data["v"] != VERSION:
            raise ValueError(f"entry version {data['v']}")
        r = data["reply"]
        calls = [ToolCall(str(i), str(n), a) for i, n, a in r["tool_calls"]]
        reply = Reply(str(r["text"]), Usage(**r["usage"]), str(r["finish"]), calls, r["id"])
        native = data["native"]
        if native is not None and not isinstance(native, str):
            raise ValueError("native body is not text")
        return cls(reply, native, str(data["target"]), str(data["provider"]), str(data["model"]), data["cost_usd"],
                   float(data["stored_at"]))


class Answer:
    """A fresh answer as it arrives: a whole body, or a stream's neutral deltas."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[Any, list[str]] = {}      # the stream's call index -> [id, name, arguments so far]
        self.finish: str | None = None
        self.usage: Usage | None = None
        self.native: bytes | None = None
        self.reply: Reply | None = None
        self.native_finish: str | None = None
        self.id: str | None = None                 # a stream's answer id, where its format names one (`Delta`)
        self.source: WireFormat | None = None       # the format the upstream answered in
        self.signed = False                         # a stream event carried reasoning state (`response_rules.signed`)

    def whole(self, reply: Reply, native: bytes, source: WireFormat) -> None:
        self.reply, self.native, self.source = reply, native, source

    def saw(self, event: dict) -> None:
        """One of the stream's events, parsed (besides its deltas, `feed`)."""
        self.signed = self.signed or signed(event)

    def feed(self, deltas: list[Delta], source: WireFormat) -> None:
        self.source = source
        for d in deltas:
            if d[0] == "text":
                self.text.append(d[1])
            elif d[0] == "call" and not (d[1] in self.calls and d[2] in ("", self.calls[d[1]][0])):
                # A repeat of an open call's id continues it; a new id at its index is a new call (neutral.StreamWriter)
                if d[1] in self.calls:
                    self.calls[(d[1], len(self.calls))] = self.calls.pop(d[1])
                self.calls[d[1]] = [d[2], d[3], ""]
            elif d[0] == "args" and d[1] in self.calls:
                self.calls[d[1]][2] += d[2]
            elif d[0] == "finish":
                self.finish, self.native_finish = d[1], d[2] if len(d) > 2 else None
                self.id = d[3] if len(d) > 3 else None

    def result(self) -> Reply | None:
        """The answer, neutral; None for a stream that never said how it finished."""
        if self.reply is not None:
            return self.reply
        if self.finish is None:
            return None
        calls = [ToolCall(i, n, json_or_raw(a)) for i, n, a in self.calls.values()]
        return Reply("".join(self.text), self.usage or Usage(), self.finish, calls, self.id, self.native_finish)


@dataclass
class Lookup:
    """What the cache does for one call, and (on a miss) the answer it may keep."""

    policy: ResponseCachePolicy
    key: str
    state: str                          # hit | miss | shadow-hit | bypass
    write: bool
    entry: Entry | None = None
    answer: Answer = field(default_factory=Answer)
    refresh: bool = False               # the caller asked for a fresh answer in place of the entry
    models: Sequence[str] = ()          # what each of the pool's targets sends (the key names these)
    retires: str = ""                   # the first target's model's retirement, for a hit's lifecycle header

    @property
    def collects(self) -> bool:
        return self.write or self.state == "shadow-hit"


class ResponseCache:
    def __init__(self, redis_url: str, registry: CollectorRegistry) -> None:
        self._redis = RedisStore(redis_url) if redis_url else None
        self._memory: dict[str, MemoryStore] = {}
        self._unforgotten: dict[str, None] = {}     # deleted answers whose forget Redis missed, oldest first
        r = registry
        self.lookups = Counter("prefixgate_response_cache_lookups", "Response cache outcomes per request",
                               ("route", "result"), registry=r)
        self.stores = Counter("prefixgate_response_cache_stores", "Answers stored, or refused and why",
                              ("route", "outcome"), registry=r)
        self.shadow = Counter("prefixgate_response_cache_shadow_compared",
                              "Shadow mode, temperature-0 requests: fresh answer against the stored one", ("route", "result"),
                              registry=r)
        self.errors = Counter("prefixgate_response_cache_errors", "Unreadable entries and store failures", ("route", "kind"),
                              registry=r)
        self.bytes = Gauge("prefixgate_response_cache_bytes", "Bytes held by this replica's in-memory entries", ("route",),
                           registry=r)
        self.evictions = Counter("prefixgate_response_cache_evictions", "In-memory entries evicted for space", ("route",),
                                 registry=r)

    def _store(self, route: str, policy: ResponseCachePolicy) -> MemoryStore | RedisStore:
        if self._redis is not None:
            return self._redis
        store = self._memory.get(route)
        if store is None:
            evicted = self.evictions.labels(route)
            store = self._memory[route] = MemoryStore(policy.max_bytes, evicted.inc)
        return store

    async def close(self) -> None:
        if self._redis is not None:
            await self._redis.close()

    # ---- before the upstream --------------------------------------------------------------------

    async def lookup(self, call: Call, sent: Callable[[TargetRef], Verdict]) -> Lookup | None:
        """None on a route without the cache; else what to do: serve `entry` (state hit) or go upstream.
        `sent`: what a target sends under the route's `on_retired` (`lifecycle.check`: raises its refusal)."""
        policy = call.route.response_cache
        if policy.mode == "off":
            return None
        asked = {c.strip() for c in call.cache_control.lower().split(",") if c.strip()}
        if uncacheable(call.conv) or asked >= {"skip-read", "skip-write"}:
            return self._counted(call, Lookup(policy, "", "bypass", write=False))
        try:
            verdicts = [sent(ref) for ref in pool(call.route)]
        except RequestError:
            # A retired model the route refuses: the upstream path refuses it (or falls back) as for any miss.
            return self._counted(call, Lookup(policy, "", "bypass", write=False))
        models = [v.model for v in verdicts]
        key = request_key(call, models)
        if "refresh" in asked or "skip-read" in asked:
            # refresh: a fresh answer replaces the entry; skip-read: a fresh answer, the cache left as it is.
            refresh = "refresh" in asked and "skip-write" not in asked
            return self._counted(call, Lookup(policy, key, "miss" if refresh else "bypass", write=refresh, refresh=refresh,
                                              models=models))
        store = self._store(call.route.name, policy)
        try:
            await self._forget_missed()
            raw = await store.get(key)
        except StoreError as e:
            if not isinstance(e, StoreResting):     # a line a failed call, not one a request of an outage
                log.warning("response cache: store unreachable on route %s (%s); request goes upstream", call.route.name, e)
            self.errors.labels(call.route.name, "store").inc()
            return self._counted(call, Lookup(policy, key, "bypass", write=False))
        entry = None
        if raw is not None:
            try:
                entry = Entry.from_bytes(raw)
            except (ValueError, KeyError, TypeError) as e:
                log.warning("response cache: unreadable entry on route %s (%s: %s); treated as a miss",
                            call.route.name, type(e).__name__, e)
                self.errors.labels(call.route.name, "entry").inc()
        if entry is not None and (outlived(entry, policy) or call.conv.stream and unsigned_replay(entry)):
            entry = None
        write = "skip-write" not in asked
        if entry is None:
            return self._counted(call, Lookup(policy, key, "miss", write=write, models=models))
        if policy.mode == "shadow":
            call.notes.append(f"response-cache: shadow-hit, an answer stored {max(0.0, time.time() - entry.stored_at):.0f}s "
                              f"ago would have been served (it cost ${entry.cost_usd or 'unknown'})")
            return self._counted(call, Lookup(policy, key, "shadow-hit", write=False, entry=entry))
        return self._counted(call, Lookup(policy, key, "hit", write=False, entry=entry, retires=verdicts[0].header))

    def _counted(self, call: Call, found: Lookup) -> Lookup:
        self.lookups.labels(call.route.name, found.state).inc()
        return found

    # ---- a hit ----------------------------------------------------------------------------------

    def replay(self, accounts: Accounting, call: Call, found: Lookup) -> Response:
        """The stored answer in the caller's format, whole or streamed, with its ledger row: $0 spent, the
        entry's cost avoided."""
        entry = found.entry
        if entry is None:
            raise RuntimeError(f"replay needs a hit's stored entry; lookup said {found.state!r} with none")
        model = call.conv.model or entry.model
        rec = self._hit_record(call, entry)
        accounts.keep(call, rec)
        headers = {"x-prefixgate-request-id": call.id, "x-prefixgate-route": call.route.name,
                   "x-prefixgate-target": entry.target, HEADER: "hit", "x-prefixgate-cost-usd": "0",
                   "x-prefixgate-avoided-usd": entry.cost_usd or "unknown"}
        if found.retires:
            headers[RETIRES] = found.retires        # the lifecycle warning a miss carries
        background = BackgroundTask(accounts.finish, call, rec)
        if not call.conv.stream:
            body = entry.native.encode() if entry.native is not None else \
                compact_bytes(call.wire.write_kept_reply(entry.reply, model))
            return Response(body, 200, headers, media_type="application/json", background=background)
        events = replay_stream(call.wire, entry.reply, model, call.include_usage)
        if call.json_array:
            from prefixgate.gateway.relay import json_array
            return StreamingResponse(json_array(_once(events)), 200, {**headers, "cache-control": "no-cache"},
                                     media_type="application/json", background=background)
        return StreamingResponse(_once(events), 200, {**headers, "cache-control": "no-cache"},
                                 media_type=call.wire.framing.media_type, background=background)

    def _hit_record(self, call: Call, entry: Entry) -> LedgerRecord:
        elapsed_ms = (time.perf_counter() - call.started) * 1000
        key = call.caller.key
        return LedgerRecord(
            id=call.id, ts=time.time(), key=key.name if key else "", tenant=key.tenant if key else "",
            route=call.route.name, target=entry.target, provider=entry.provider, model=entry.model,
            dialect=call.dialect, stream=call.conv.stream, status=200, cost_usd="0", cost_without_cache_usd="0",
            savings_usd="0", latency_ms=elapsed_ms, ttft_ms=elapsed_ms if call.conv.stream else None,
            overhead_ms=elapsed_ms, attempts=0, plan_summary="response cache hit",
            explanation=[f"response-cache: hit, answer stored {max(0.0, time.time() - entry.stored_at):.0f}s ago; "
                         f"avoided ${entry.cost_usd or 'unknown'}"],
            response_cache="hit", avoided_usd=entry.cost_usd)

    async def forget(self, ident: str) -> None:
        """An answer deleted upstream through the gateway (a stored response, an interaction): no entry hands
        out its id again, nor answers a request continuing it (on a keyed gateway its owner check refuses one
        first; an open gateway has none); the next such request goes upstream."""
        if self._redis is None:
            for store in self._memory.values():
                await store.forget(ident)
            return
        self._unforgotten[ident] = None
        while len(self._unforgotten) > MAX_UNFORGOTTEN:
            del self._unforgotten[next(iter(self._unforgotten))]
        try:
            await self._forget_missed()
        except StoreError as e:
            log.warning("response cache: could not drop the entry of deleted answer %s (%s); dropped once Redis "
                        "answers, and nothing is served from it until then", ident, e)
            # Then, though no lookup here comes: another replica reads the entry from Redis.
            self._redis.retry(self._forgot)

    async def _forgot(self) -> bool:
        try:
            await self._forget_missed()
        except StoreError:
            return False
        return True

    async def _forget_missed(self) -> None:
        """Drop the entries of deleted answers Redis missed; raises StoreError while it still does not answer (a
        lookup then goes upstream: an entry still there would hand out a deleted answer)."""
        while self._unforgotten and self._redis is not None:
            ident = next(iter(self._unforgotten))
            await self._redis.forget(ident)
            self._unforgotten.pop(ident, None)

    # ---- after the upstream ---------------------------------------------------------------------

    async def settle(self, call: Call, rec: LedgerRecord) -> None:
        """After the answer went out: store it if it is safe to replay; in shadow mode compare it."""
        found: Lookup | None = call.response_cache
        if found is None or not found.collects or rec.status != 200:
            return
        reply = found.answer.result()
        route = call.route.name
        if found.state == "shadow-hit" and found.entry is not None and reply is not None and deterministic(call.conv):
            same = (reply.text, [(c.name, c.args) for c in reply.tool_calls]) == \
                (found.entry.reply.text, [(c.name, c.args) for c in found.entry.reply.tool_calls])
            self.shadow.labels(route, "matched" if same else "differed").inc()
        if not found.write:
            return
        # The model asked of the upstream: a record names the one that ran where that differs (an Azure deployment's).
        asked = call.prepared.model if call.prepared is not None else rec.model
        if not any(rec.target in ref.upstreams and asked == (model or asked)
                   for ref, model in zip(pool(call.route), found.models, strict=True)):
            refused: str | None = "fallback target"     # the key names the pool's models
        else:
            refused = refusal(reply, found.answer.source, found.policy, call.wire)
            if refused is None and found.answer.signed and reply.tool_calls and found.answer.source is call.wire:  # type: ignore[union-attr]
                refused = "signed tool calls"       # streamed: no replay could send their reasoning state back
        if reply is not None and found.answer.source is not call.wire:
            reply = replace(reply, id=None)     # another format's id: a replay in the caller's names a fresh one
        store = self._store(route, found.policy)
        try:
            if refused is None:
                native = found.answer.native.decode() if found.answer.native is not None else None
                raw = Entry(reply, native, rec.target, rec.provider, rec.model, rec.cost_usd, time.time()).to_bytes()  # type: ignore[arg-type]
                if len(raw) + len(found.key) > found.policy.max_bytes:
                    refused = "larger than max_mb"
                else:
                    await store.put(found.key, raw, found.policy.ttl_s, reply.id,   # type: ignore[union-attr]
                                    call.wire.chained_id(call.conv))
            if refused is not None and found.refresh:
                await store.delete(found.key)     # a refresh whose fresh answer is unsafe leaves no stale entry
        except StoreError as e:
            if not isinstance(e, StoreResting):
                log.warning("response cache: could not store on route %s (%s)", route, e)
            self.errors.labels(route, "store").inc()
            return
        self.stores.labels(route, refused or "stored").inc()
        if isinstance(store, MemoryStore):
            self.bytes.labels(route).set(store.bytes)



def outlived(entry: Entry, policy: ResponseCachePolicy) -> bool:
    """Whether an entry was stored under a policy the route no longer has (Redis keeps entries across restarts
    and replicas): older than today's `ttl_s`, or a tool call the route no longer stores."""
    return time.time() - entry.stored_at > policy.ttl_s or (bool(entry.reply.tool_calls) and not policy.tool_calls)


def unsigned_replay(entry: Entry) -> bool:
    """Whether a streamed replay of `entry` would drop reasoning state the caller must send back with its tool
    calls (a thought signature, a thinking block: `response_rules.signed`), which only its exact body carries."""
    if not entry.reply.tool_calls or entry.native is None:
        return False
    try:
        return signed(json.loads(entry.native))
    except ValueError:      # an entry read back damaged: not replayed, as `Entry.from_bytes` refuses others
        return True


def replay_stream(wire: WireFormat, reply: Reply, model: str, include_usage: bool = True) -> bytes:
    """`reply` as `wire`'s stream events, through the format's own stream writer."""
    writer = wire.stream_writer(model, include_usage)
    if reply.id:
        writer.keep_id(reply.id)
    deltas: list[Delta] = [("text", reply.text)] if reply.text else []
    for i, c in enumerate(reply.tool_calls):
        deltas += [("call", i, c.id, c.name), ("args", i, json.dumps(c.args))]
    return writer.write([*deltas, ("finish", reply.finish)]) + writer.finish(reply.usage)


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data
