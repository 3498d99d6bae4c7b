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
with planning off, which go upstream as the caller's own bytes.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.providers.rules import Catalog

if TYPE_CHECKING:
    from prefixgate.gateway.proxy import Call
    from prefixgate.ir import Conversation
    from prefixgate.policies import Upstream

KEEP = 50_000           # conversations (and captured ids) remembered, least recently used dropped first


@dataclass(frozen=True)
class ProviderVerdict:
    reason: str                 # the provider's own word: tools_changed, previous_message_not_found, ...
    missed_tokens: int | None   # the tokens it says were not read from cache (*_changed / cache_miss only)


def anthropic_verdict(message: dict) -> ProviderVerdict | None:
    """From a Message (a JSON answer, or message_start's `message`): None when it carries no diagnosis."""
    diag = message.get("diagnostics")
    if not isinstance(diag, dict):
        return None
    reason = diag.get("cache_miss_reason")
    if not isinstance(reason, dict):
        return ProviderVerdict("pending", None)       # the answer was serialised before the comparison ended
    tokens = reason.get("cache_missed_input_tokens")
    return ProviderVerdict(str(reason.get("type", "unavailable")), tokens if isinstance(tokens, int) else None)


def responses_verdict(response: dict) -> ProviderVerdict | None:
    diag = response.get("prompt_cache_diagnostics")
    if not isinstance(diag, dict):
        return None
    if diag.get("type") == "cache_miss":
        tokens = diag.get("cache_missed_tokens")
        return ProviderVerdict(str(diag.get("reason", "unavailable")), tokens if isinstance(tokens, int) else None)
    return ProviderVerdict(str(diag.get("type", "unavailable")), None)


@dataclass(frozen=True)
class Ask:
    kind: str = ""              # "anthropic", "responses", or "": the upstream takes no diagnostics field
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

    def kind(self, upstream: Upstream, wire_name: str, model: str) -> str:
        """"anthropic", "responses", or "" where the upstream takes no diagnostics field."""
        if upstream.kind == "anthropic" and wire_name == "anthropic":
            return "anthropic"
        if upstream.kind in ("openai", "openai_responses") and wire_name == "responses":
            try:
                rules = resolve_model("openai", upstream.base_model(model), self.catalog)
            except UnknownModel:    # whether it takes the options is unknown, so send nothing
                return ""
            return "responses" if rules.regime == "breakpoints" else ""
        return ""

    def attach(self, call: Call, upstream: Upstream, wire_name: str, model: str, sent: Conversation,
               credential: str | None) -> Ask:
        """What this request asks: the fields to add to its upstream body, and how to read its answer."""
        kind = self.kind(upstream, wire_name, model)
        # Planning off sends the caller's own bytes: nothing is added to them.
        if not kind or not call.route.diagnostics or call.mode == "off" or self._callers_own(kind, sent.params):
            return Ask(kind)        # a caller's own field is read, never touched
        conversation = self._conversation(call, upstream, call.conv, credential)
        bucket = self._buckets.get(call.route.name)
        now = self.clock()
        if bucket is None:
            bucket = self._buckets[call.route.name] = _Bucket(call.route.diagnostics_per_minute, now)
        if not bucket.take(call.route.diagnostics_per_minute, now):
            self._last.pop(conversation, None)
            return Ask(kind)
        previous = self._last.get(conversation)
        if kind == "anthropic":
            return Ask(kind, conversation, {"diagnostics": {"previous_message_id": previous}})
        if previous is None:
            return Ask(kind, conversation)
        options = sent.cache_params.get("prompt_cache_options") or sent.params.get("prompt_cache_options") or {}
        return Ask(kind, conversation, {"prompt_cache_options": {**options, "comparison_response_id": previous}})

    @staticmethod
    def _callers_own(kind: str, params: dict[str, Any]) -> bool:
        if kind == "anthropic":
            return "diagnostics" in params
        options = params.get("prompt_cache_options")
        return isinstance(options, dict) and "comparison_response_id" in options

    def _conversation(self, call: Call, upstream: Upstream, conv: Conversation, credential: str | None) -> str:
        chained = conv.params.get("previous_response_id")
        if isinstance(chained, str) and chained in self._conversation_of:
            return self._conversation_of[chained]
        first = next((seg.text for seg in conv.segments if seg.role == "user"), "")
        key = call.caller.key
        who = f"{key.tenant}/{key.name}" if key else "-"
        # The provider keeps ids per organisation / workspace: the upstream key is part of the conversation.
        text = f"{who}\0{credential or ''}\0{call.route.name}\0{upstream.name}\0{chained or ''}\0{first}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def read(self, call: Call, ask: Ask, data: dict) -> None:
        """An upstream answer (a JSON body, or a stream event): its id continues the conversation, its verdict
        goes on the call's ledger record."""
        if not ask.kind:
            return
        conversation = ask.conversation
        if ask.kind == "anthropic":
            message = data.get("message") if data.get("type") == "message_start" else data
            if not isinstance(message, dict) or message.get("type") != "message":
                return
            verdict = anthropic_verdict(message)
        else:
            message = data.get("response") if isinstance(data.get("response"), dict) else data
            if message.get("object") != "response" or message.get("status") in ("in_progress", "queued"):
                return
            verdict = responses_verdict(message)
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
