"""Accounting for a request once it is answered: its price, its ledger record (counted in the metrics, its span
closed), what its answer stored upstream and for whom, and its budget reservation settled at the real cost.

Every way a request ends goes through here: the proxy's whole answers and failures, the stream relay, the
response cache's replays, pass-through and cachedContents calls. None of them prices or records a request
itself, and none of them calls back into the proxy to do it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import TYPE_CHECKING

from prefixgate.cache_planner.detectors import volatile_spans
from prefixgate.compact_json import compact
from prefixgate.cost import Cost, Price, cost_note, ledger_fields, price_usage
from prefixgate.gateway.estimate import cut_usage, estimated_usage
from prefixgate.gateway.file_quota import FileQuota
from prefixgate.gateway.lifecycle import day_of
from prefixgate.gateway.logs import log_request
from prefixgate.gateway.metrics import Metrics
from prefixgate.gateway.ownership import principal
from prefixgate.gateway.pricing import price_for
from prefixgate.gateway.provider_ids import FILE, created_ids
from prefixgate.gateway.response_cache import ResponseCache
from prefixgate.gateway.sticky import Sticky, flip_fields
from prefixgate.gateway.stored_ids import StoredIds
from prefixgate.gateway.tracing import Tracing
from prefixgate.gateway.upstream import UpstreamClient
from prefixgate.gateway.written_files import WrittenFiles
from prefixgate.ledger import Ledger, LedgerRecord, miss_reason
from prefixgate.policies import Limits, Upstream
from prefixgate.policies.limits import Reservation
from prefixgate.prefix_shape import prefix_shape
from prefixgate.providers.routed import ran_as
from prefixgate.providers.rules import Catalog
from prefixgate.usage import Usage

if TYPE_CHECKING:
    from prefixgate.gateway.proxy import Call, Prepared

# The ledger status of a request whose client hung up before its answer ended (nginx's convention).
CLIENT_CLOSED = 499
# The ledger kind of an attempt that timed out and was given up on (`Accounting.abandoned`).
ABANDONED = "abandoned_attempt"
# What reading an answer whose shape its format's documentation does not give raises (a list where an object goes,
# a token count as a string): the answer is still the upstream's, billed, and recorded as such, never a gateway 500.
UNREADABLE = (AttributeError, IndexError, KeyError, TypeError, ValueError)
UNREADABLE_USAGE = "usage: the answer reports usage the gateway cannot read; tokens and cost unknown"


def billed_tokens(rec: LedgerRecord) -> int:
    """Every token `rec` was billed for: its prompt, however cached, and its output."""
    return rec.uncached_input + rec.cache_read + sum(rec.cache_writes.values()) + rec.output


class Accounting:
    def __init__(self, ledger: Ledger, metrics: Metrics, limits: Limits, catalog: Catalog, tracing: Tracing | None,
                 response_cache: ResponseCache, stored_ids: StoredIds, sticky: Sticky, file_quota: FileQuota,
                 upstream: UpstreamClient, clock: Callable[[], float] = time.time) -> None:
        self.ledger = ledger
        self.metrics = metrics
        self.limits = limits
        self.catalog = catalog
        self.tracing = tracing
        self.response_cache = response_cache
        self.stored_ids = stored_ids
        self.sticky = sticky    # balanced routes: each answer pins its prefix, and a flip is on its record
        # Files code execution wrote: counted toward the tenant's uploads quota, their size asked of `upstream`.
        self.written = WrittenFiles(file_quota, upstream)
        # Called with each answered caller request's record before the ledger has it (keep-alive: it may credit
        # the record with what its refreshes saved).
        self.observers: list[Callable[[Call, LedgerRecord], None]] = []
        self.clock = clock      # the gateway's (tests move it): whether an answer's model is a retired one's routing

    def price(self, rows: str, upstream: Upstream, model: str, usage: Usage, declared: Price | None) -> Price | None:
        """The price row for `model` at `upstream` in `rows` (whose price rows bill it), else the route's
        declared price."""
        return price_for(rows, upstream.base_model(model), usage, self.catalog) or declared

    def record(self, call: Call, prep: Prepared | None, usage: Usage | None, status: int, *, ttft_s: float | None,
               upstream_s: float, error: str = "") -> LedgerRecord:
        """The request's ledger record, queued for the writer and counted in the metrics."""
        rec = self.entry(call, prep, usage, status, ttft_s=ttft_s, upstream_s=upstream_s, error=error)
        self.keep(call, rec)
        return rec

    def entry(self, call: Call, prep: Prepared | None, usage: Usage | None, status: int, *, ttft_s: float | None,
              upstream_s: float, error: str = "", notes: list[str] | None = None) -> LedgerRecord:
        """A ledger record of `call` sent as `prep`, priced; `notes` (else the request's own) explain it."""
        now = time.perf_counter()
        notes = call.notes if notes is None else notes
        if usage is not None and usage.unreadable:
            # Impossible usage (10**18 tokens, a negative count): the answer passes, its record prices nothing.
            notes.append(f"usage: unreadable, recorded without it ({usage.unreadable})")
            usage = None
        reported = usage is not None
        usage = (usage or Usage()) + (prep.extra_usage if prep and prep.extra_usage else Usage())
        cost: Cost | None = None
        priced = prep is not None and (usage != Usage() or prep.storage_token_hours)
        model, priced_as, deployed = self.answered_as(prep, usage) if prep else (call.conv.model or "", "", "")
        price = (price_for(prep.price_rows, priced_as, usage, self.catalog)  # type: ignore[union-attr]
                 or call.route.price) if priced else None
        flip = self.sticky.settle(call, prep, usage, price, self.catalog) if prep and reported and status == 200 else None
        # An Azure deployment's (or a retired model's routing) line, priced or not: the model that ran is in `model`.
        explanation = (prep.plan.explanation if prep else []) + notes + ([deployed] if deployed else [])
        if prep is not None and priced:
            rows = prep.price_rows
            cost = price_usage(usage, price, prep.storage_token_hours) if price is not None else None
            note = cost_note(usage, cost, f"{rows}/{priced_as}") if rows != "local" else None
            explanation = explanation + ([note] if note else [])
        rec = LedgerRecord(
            id=call.id, ts=time.time(), key=call.caller.key.name if call.caller.key else "",
            tenant=call.caller.key.tenant if call.caller.key else "", route=call.route.name,
            target=prep.upstream.name if prep else "",
            # A compatible provider's name (deepseek, azure, ...), so reports price it from its rows too.
            provider=(prep.upstream.provider or prep.upstream.kind) if prep else "",
            model=model, dialect=call.dialect, stream=call.conv.stream,
            status=status, **ledger_fields(usage, cost),
            latency_ms=(now - call.started) * 1000, ttft_ms=ttft_s * 1000 if ttft_s is not None else None,
            overhead_ms=max(0.0, (now - call.started - upstream_s) * 1000), attempts=call.attempts,
            prefix_hash=prep.plan.prefix_hash if prep else "", plan_summary=prep.plan.summary if prep else "",
            explanation=explanation, miss_reason=miss_reason(usage if reported else None, status, explanation), error=error,
            provider_miss_reason=call.provider_verdict.reason if call.provider_verdict else "",
            provider_missed_tokens=call.provider_verdict.missed_tokens if call.provider_verdict else None,
            body=prep.trace_body if prep else "",
            response=compact(call.reply) if prep and prep.trace_body and call.reply else "",
            cache_key_mode=prep.plan.cache_key_mode if prep else "", prompt_cache_key=prep.plan.cache_key if prep else "",
            segments=prefix_shape(prep.plan.conversation if prep else call.conv,
                                  prep.planner if prep else call.wire.planner_provider, volatile_spans),
            response_cache=call.response_cache.state if call.response_cache is not None else "", **flip_fields(flip))
        return rec

    def answered_as(self, prep: Prepared, usage: Usage) -> tuple[str, str, str]:
        """The model `prep`'s record names, the one it is priced as, and the line that says why where it needs one:
        the model the answer names where that decides (providers/routed.py: an upstream naming deployments, Azure;
        a retired model's call its provider ran as its replacement), else the asked one."""
        upstream = prep.upstream
        deployments = dict(upstream.deployments) if upstream.names_deployments else None
        asked = upstream.base_model(prep.model) if deployments is None else prep.model
        ran = ran_as(prep.price_rows, asked, usage.model, day_of(self.clock()), deployments,
                     f"the deployments: of upstream {upstream.name!r}", self.catalog)
        return (ran[0], ran[0], ran[1]) if ran else (prep.model, asked, "")

    def keep(self, call: Call, rec: LedgerRecord) -> None:
        """Queue `rec` for the ledger, count it in the metrics and close the request's span."""
        for observe in self.observers:
            observe(call, rec)
        if call.stored_id and call.prepared is not None:
            # A request continuing the answer carries its prompt and output (gateway/unseen_prompt.py).
            self._record_stored(call, call.prepared, billed_tokens(rec) if rec.status == 200 and not rec.kind else None)
        self.ledger.append(rec)
        self.metrics.observe(rec)
        if call.span is not None:
            self.tracing.end_request(call.span, rec)    # type: ignore[union-attr]
            call.span = None

    def hung_up(self, call: Call) -> LedgerRecord:
        """The record of a request whose caller hung up before its answer began: the upstream may have worked (and
        billed) until it saw the hang-up, so it carries the admission estimate as its usage; a stream's, the prompt
        alone (nothing was streamed yet, and a streaming upstream stops at the hang-up, as a cut stream is billed).
        None when the hang-up came while no attempt was out: in a backoff after a refusal."""
        prep = call.prepared
        usage = None
        if call.upstream_working and prep is not None and prep.stream:
            usage = self.prompt_only(call, prep, "the caller hung up before the stream began")
        elif call.upstream_working:
            usage = self.estimated(call, "the caller hung up before the answer")
        return self.record(call, prep, usage, CLIENT_CLOSED, ttft_s=None, upstream_s=0.0, error="client disconnected")

    def estimated(self, call: Call, why: str) -> Usage:
        """The usage of an answer the upstream worked on but never reported: admission's estimate, noted as such."""
        call.notes.append(f"usage estimated: {why} (prompt + max output tokens)")
        return call.estimate if call.estimate != Usage() else estimated_usage(call.conv, call.raw)

    def prompt_only(self, call: Call, prep: Prepared, why: str, notes: list[str] | None = None) -> Usage:
        """The usage of an upstream that took the prompt and produced nothing billed as output: the prompt alone,
        from the body's size, noted as such (in `notes`, else the request's own)."""
        (call.notes if notes is None else notes).append(f"usage estimated: {why} (prompt from the body's size)")
        return cut_usage(None, prep.body, 0)

    async def abandoned(self, call: Call, prep: Prepared) -> None:
        """An attempt that timed out before its first byte, given up on (for a retry, the next target or the
        caller's 504): the upstream may have run it and billed the prompt at least, though its answer never came.
        It gets a row of its own (kind `abandoned_attempt`: the request's record prices the attempt that ended it),
        priced at the prompt alone and counted against the key's budget."""
        notes = [f"attempt {call.attempts} on {prep.upstream.name}: no first byte within the timeout, abandoned"]
        usage = self.prompt_only(call, prep, "the provider's answer never arrived, though it may have run and "
                                 "billed the request", notes)
        alone = replace(prep, extra_usage=None, storage_token_hours=Decimal(0))    # billed on the request's record
        rec = replace(self.entry(call, alone, usage, 504, ttft_s=None, upstream_s=0.0, notes=notes,
                                 error=f"upstream {prep.upstream.name!r} timed out"),
                      id=f"{call.id}-{call.attempts}", kind=ABANDONED, body="", response="")
        self.ledger.append(rec)
        self.metrics.observe(rec)
        if call.caller.key is not None and rec.cost_usd:
            # Shielded: the caller hanging up here must not take the spend off the budget with it.
            await asyncio.shield(self.limits.settle(call.caller.key, Reservation(), rec.uncached_input,
                                                    Decimal(rec.cost_usd)))

    def stored(self, call: Call, prep: Prepared, response_id: str | None, *, begun: bool = False) -> None:
        """A response the upstream stored: it lives there (a follow-up goes back), and it is the caller's tenant's.
        Recorded with the request's record (`keep`), in one write with the prompt a request continuing it carries;
        one whose stream has only `begun` is known at once (`StoredIds.begin`), since it may be asked for (GET, a
        follow-up naming it) while it runs."""
        if response_id and response_id != call.stored_id:
            call.stored_id = response_id
            if begun:
                self.stored_ids.begin(prep.wire.stored_kind, response_id, principal(call.caller.key), prep.upstream.name)

    def _record_stored(self, call: Call, prep: Prepared, tokens: int | None) -> None:
        self.stored_ids.record(prep.wire.stored_kind, call.stored_id, principal(call.caller.key),
                               home=prep.upstream.name, tokens=tokens)

    def created(self, call: Call, body: dict) -> None:
        """What an answer (or one streamed event) created that a later request may name: the caller's tenant's."""
        owner = principal(call.caller.key)
        # Where it lives: a written file is downloaded from the account that ran the code (another's is a 404).
        home = call.prepared.upstream if call.prepared is not None else None
        if owner is not None:
            for kind, ident in created_ids(body):
                self.stored_ids.record(kind, ident, owner, home=home.name if home is not None else None)
                if kind == FILE:    # code execution wrote it: in the organisation's storage, as an upload is
                    self.written.count(owner, ident, home, call.caller)

    async def finish(self, call: Call, rec: LedgerRecord) -> None:
        """After the answer is sent: swap the budget reservation for what the request cost (whatever its
        status: a hang-up, a cut stream or an upstream error may have been billed), log one line."""
        if call.caller.key is not None:
            await self.limits.settle(call.caller.key, call.held, billed_tokens(rec), Decimal(rec.cost_usd or 0))
        log_request(rec)
        if call.response_cache is not None:
            await self.response_cache.settle(call, rec)
