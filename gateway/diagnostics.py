"""Provider-truth miss reasons: ask the provider why its cache missed, and record what it says.

Anthropic (Claude API) and OpenAI Responses (GPT-5.6+) compare a request's prompt with an earlier answer's and
say what changed (wire-2026-11.md sections 2 and 3). The gateway attaches the id of the previous answer in the
same conversation: Anthropic's `diagnostics: {"previous_message_id": ...}` on every turn (the first with null:
Anthropic keeps fingerprints only of requests carrying the object), OpenAI's
`prompt_cache_options.comparison_response_id` on continuing turns. Ids come only from upstream answers this
gateway relayed (an invented or stale id reads as "previous message not found", which also means benign
expiry). A caller that sends the field itself keeps it untouched; its answer is still recorded.

A conversation is the caller's key, the upstream key, route and upstream plus its first user message (or, on Responses, the
stored response it continues). Each route caps how many requests a minute carry the field
(`diagnostics_per_minute`); a turn over the cap goes without, and its conversation starts afresh.
Bedrock and Vertex do not document the field, so requests to them never carry it; nor do requests on routes
with planning off, which go upstream as the caller's own bytes. The fields and how an answer reads are each
format's (`WireFormat.miss_diagnosis`, dialects/diagnosis.py); the kinds that answer them say so
(`Kind.diagnoses_misses`), so nothing here names a provider.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prefixgate.dialects.diagnosis import MissDiagnosis
from prefixgate.dialects.wire import WireFormat
from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.providers.rules import Catalog

if TYPE_CHECKING:
    from prefixgate.gateway.proxy import Call
    from prefixgate.ir import Conversation
    from prefixgate.policies import Upstream

KEEP = 50_000           # conversations (and captured ids) remembered, least recently used dropped first


@dataclass(frozen=True)
class Ask:
    diagnosis: MissDiagnosis | None = None    # the format's diagnostics fields; None: the upstream takes none
    conversation: str = ""      # "": the answer's id is not captured (no field attached by the gateway)
    fields: dict = field(default_factory=dict)    # added to the upstream body


class _Bucket:
    def __init__(self, per_minute: int, now: float) -> None:
        self.rate, self.tokens, self.at = per_minute / 60.0, float(per_minute), now

    def take(self, per_minute: int, now: float) -> bool:
        self.tokens = min(float(per_minute), self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class ProviderDiagnostics:
    def __init__(self, catalog: Catalog, clock: Callable[[], float] = time.monotonic) -> None:
        self.catalog = catalog
        self.clock = clock
        self._last: OrderedDict[str, str] = OrderedDict()       # conversation -> its latest answer's id
        self._conversation_of: OrderedDict[str, str] = OrderedDict()   # captured answer id -> conversation
        self._buckets: dict[str, _Bucket] = {}
        # `attach` runs on worker threads (big bodies are planned off the loop): two taking the same route's
        # bucket at once could each create it full, or both spend one token, and pass the route's cap.
        self._buckets_lock = threading.Lock()

    def diagnosis(self, upstream: Upstream, wire: WireFormat, model: str) -> MissDiagnosis | None:
        """The format's diagnostics, where this upstream answers them for this model; else None."""
        diagnosis = wire.miss_diagnosis
        if diagnosis is None or not upstream.kind_of.diagnoses_misses:
            return None
        if diagnosis.per_model:
            try:
                rules = resolve_model(wire.planner_provider, upstream.base_model(model), self.catalog)
            except UnknownModel:    # whether it takes the options is unknown, so send nothing
                return None
            return diagnosis if rules.regime == "breakpoints" else None
        return diagnosis

    def attach(self, call: Call, upstream: Upstream, wire: WireFormat, model: str, sent: Conversation,
               credential: str | None) -> Ask:
        """What this request asks: the fields to add to its upstream body, and how to read its answer."""
        diagnosis = self.diagnosis(upstream, wire, model)
        # Planning off sends the caller's own bytes: nothing is added to them.
        if (diagnosis is None or not call.route.diagnostics or call.mode == "off"
                or diagnosis.callers_own(sent.params)):
            return Ask(diagnosis)   # a caller's own field is read, never touched
        conversation = self._conversation(call, upstream, call.conv, credential)
        if not self._take(call.route.name, call.route.diagnostics_per_minute):
            self._last.pop(conversation, None)
            return Ask(diagnosis)
        return Ask(diagnosis, conversation, diagnosis.fields(self._last.get(conversation), sent))

    def _take(self, route: str, per_minute: int) -> bool:
        """One of `route`'s diagnostics allowance for this minute, if any is left."""
        with self._buckets_lock:
            now = self.clock()
            bucket = self._buckets.get(route)
            if bucket is None:
                bucket = self._buckets[route] = _Bucket(per_minute, now)
            return bucket.take(per_minute, now)

    def _conversation(self, call: Call, upstream: Upstream, conv: Conversation, credential: str | None) -> str:
        chained = conv.params.get("previous_response_id")
        # One lookup: `read` (on the event loop) may evict the entry between a check and a fetch (here, off it).
        found = self._conversation_of.get(chained) if isinstance(chained, str) else None
        if found is not None:
            return found
        first = next((seg.text for seg in conv.segments if seg.role == "user"), "")
        key = call.caller.key
        who = f"{key.tenant}/{key.name}" if key else "-"
        # The provider keeps ids per organisation / workspace: the upstream key is part of the conversation.
        text = f"{who}\0{credential or ''}\0{call.route.name}\0{upstream.name}\0{chained or ''}\0{first}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def read(self, call: Call, ask: Ask, data: dict) -> None:
        """An upstream answer (a JSON body, or a stream event): its id continues the conversation, its verdict
        goes on the call's ledger record."""
        if ask.diagnosis is None:
            return
        conversation = ask.conversation
        message = ask.diagnosis.answer(data)
        if message is None:
            return
        verdict = ask.diagnosis.verdict(message)
        if verdict is not None and verdict.reason != "cache_hit":
            call.provider_verdict = verdict
        answer_id = message.get("id")
        if conversation and isinstance(answer_id, str) and answer_id:
            self._remember(self._last, conversation, answer_id)
            self._remember(self._conversation_of, answer_id, conversation)

    @staticmethod
    def _remember(table: OrderedDict[str, str], key: str, value: str) -> None:
        table[key] = value
        table.move_to_end(key)
        while len(table) > KEEP:
            table.popitem(last=False)
