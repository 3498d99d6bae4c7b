"""The planner's one entry point and its result.

`plan(conversation, target, state, mode)` returns a `Plan`: the conversation to send (rewritten
static-first and annotated with checkpoints and provider cache fields) and an explanation of every
decision, which the gateway keeps in its ledger and returns in `x-prefixgate-plan`.
"""

from __future__ import annotations

import functools
import hashlib
import re
import time
from dataclasses import dataclass, field, replace
from typing import Literal

from prefixgate.cache_planner import regimes
from prefixgate.cache_planner.cache_key import CACHE_KEY_MODES, CacheKeyMode, settle_cache_key
from prefixgate.cache_planner.caller_markers import CALLER_CHECKPOINTS, CallerCheckpoints
from prefixgate.cache_planner.checkpoints import place_checkpoints
from prefixgate.cache_planner.detectors import volatile_spans
from prefixgate.cache_planner.explicit_cache import use_cache
from prefixgate.cache_planner.regimes import local
from prefixgate.cache_planner.rewrite import (
    CHAIN_PARAMS,
    documents_first,
    move_volatile_units,
    stable_tool_forms,
    system_segments,
    system_text,
)
from prefixgate.cache_planner.stability import PlannerState, RouteState
from prefixgate.cache_planner.target import Target
from prefixgate.cache_planner.variance import NO_RULE, Rule
from prefixgate.errors import RequestError
from prefixgate.ir import Conversation, Segment
from prefixgate.providers.pricing import resolve_model
from prefixgate.providers.rules import Catalog, default_catalog
from prefixgate.reuse import memo, weigh

# What a policy lets the planner do: rewrite static-first and place checkpoints, only place
# checkpoints, or send the request exactly as the caller wrote it.
Mode = Literal["rewrite", "checkpoints", "off"]
MODES: tuple[Mode, ...] = ("rewrite", "checkpoints", "off")


@dataclass
class Plan:
    # A draft of the planned request (`Conversation.draft`): blocks the plan left alone are the request's
    # own, so whoever changes one further goes through `Segment.own`.
    conversation: Conversation
    target: Target
    mode: Mode
    route: str = ""
    # Chained hash of the static prefix: the key for prefix-affinity routing and `prompt_cache_key`.
    prefix_hash: str = ""
    explanation: list[str] = field(default_factory=list)
    # A Gemini `cachedContents.create` body the caller should run first, then `adopt_cached_content`.
    cache_create: dict | None = None
    # What the route does with OpenAI's `prompt_cache_key` (`cache_key`) and the key sent ("" for none).
    cache_key_mode: str = ""
    cache_key: str = ""
    _route_state: RouteState | None = field(default=None, repr=False)
    _state: PlannerState | None = field(default=None, repr=False)
    _state_route: str = field(default="", repr=False)     # the route's key in `_state` (`route` is renamed)
    # The planned checkpoints' count, once asked (every answer's header and ledger record ask); only
    # adopting an explicit cache changes the conversation after planning.
    _marks: int | None = field(default=None, repr=False, compare=False)

    def adopt_cached_content(self, name: str, expires_at: float) -> None:
        """Use the explicit cache created from `cache_create` (and remember it for the route, and share it
        with the other replicas: one cache per prefix, not one per replica)."""
        use_cache(self.conversation, name)
        self._marks = None
        if self._route_state is not None:
            self._route_state.remember_explicit(self.prefix_hash, name, expires_at)
        if self._state is not None:
            self._state.share_explicit(self._state_route, self.prefix_hash, name, expires_at)
        self.explanation.append(f"cache: created explicit cache {name} and sent the request against it")

    @property
    def state_route(self) -> str:
        """The route's key in the planner's state (`route` is renamed to the policy's route by the gateway)."""
        return self._state_route

    @property
    def summary(self) -> str:
        """One short line for a response header: mode, checkpoints, rewrites, and the static prefix's hash
        (a plan that changes what it keeps static changes it)."""
        if self._marks is None:
            self._marks = len(self.conversation.checkpoints())
        marks = self._marks
        rewrites = sum(1 for line in self.explanation if line.startswith("rewrite:"))
        return f"mode={self.mode};checkpoints={marks};rewrites={rewrites};static={self.prefix_hash[:8]}"


def plan(
    conversation: Conversation,
    target: Target,
    state: PlannerState | None = None,
    mode: Mode = "rewrite",
    *,
    route: str | None = None,
    now: float | None = None,
    catalog: Catalog | None = None,
    caller_checkpoints: CallerCheckpoints = "keep",
    rule: Rule = NO_RULE,
    cache_key: CacheKeyMode = "keep",
    tenant: str = "",
    keepalive: bool = False,
    upgrade: bool = False,
) -> Plan:
    """Plan `conversation` for `target`, learning from and updating `state` (the route's history).

    The conversation passed in is never modified. A request the planner cannot handle goes out
    unchanged, with the reason in the explanation. `caller_checkpoints` says what happens to markers
    the caller placed itself (`caller_markers`). `rule`: the route's declared volatile and never-moved text.
    `cache_key`: what happens to OpenAI's `prompt_cache_key` (`cache_key`); a derived key is scoped to `tenant`.
    `keepalive`: refreshes will follow this plan while the session idles; `upgrade`: and this request's reply
    will be known to them, so its conversation entry can be upgraded to a longer TTL (`keepalive.upgrade_body`).
    """
    if mode not in MODES:
        raise ValueError(f"planner mode must be one of {', '.join(MODES)}, got {mode!r}")
    if caller_checkpoints not in CALLER_CHECKPOINTS:
        raise ValueError(f"caller_checkpoints must be one of {', '.join(CALLER_CHECKPOINTS)}, got {caller_checkpoints!r}")
    if cache_key not in CACHE_KEY_MODES:
        raise ValueError(f"cache_key must be one of {', '.join(CACHE_KEY_MODES)}, got {cache_key!r}")
    if mode == "off":
        route_name = route or fingerprint(conversation)
        return Plan(conversation.draft(), target, mode, route_name, _first_key(conversation),
                    ["passthrough: planning is off for this route"])
    catalog = catalog or default_catalog()
    state = state if state is not None else PlannerState()
    route_name = route or state.resolve("", fingerprint(conversation), system_text(conversation))
    regime = regimes.regime_of(target.provider)
    try:
        model = resolve_model(target.rows_of or target.provider, target.model, catalog) if regime.catalogued else None
    except RequestError as e:
        return Plan(conversation.draft(), target, mode, route_name, _first_key(conversation),
                    [f"passthrough: {e.message}; no caching rules to plan with"])
    conv = conversation.draft()
    notes: list[str] = []
    rs = state.route(route_name)
    rs.requests += 1
    # Functions of the route and target alone (a route's keep-alive policy, its upstream's wire format): requests
    # planned at once for one route write the same values.
    rs.keepalive, rs.upgrade = keepalive, keepalive and upgrade
    if mode == "rewrite":
        stable_tool_forms(conv, rs, notes)
        # The earlier turns live at the provider (a stored response or interaction): only the new input is ours.
        chained = any(conv.params.get(name) is not None for name in CHAIN_PARAMS)
        move_volatile_units(conv, rs, notes, history_upstream=chained, rule=rule)
        documents_first(conv, notes)
    when = time.time() if now is None else now
    cache_create, sent_key = None, ""
    if model is not None:
        placement = place_checkpoints(conv, target, model, catalog, rs, when, notes, caller_checkpoints)
        prefix_hash, cache_create = placement.prefix_hash, placement.cache_create
        if regime.routing_key:
            sent_key = settle_cache_key(conv, prefix_hash, cache_key, tenant, notes)
        if cache_create is not None:
            cache_create = _reuse_shared_cache(conv, state, route_name, rs, prefix_hash, when, notes, cache_create)
    else:
        prefix_hash = _first_key(conv)
        notes.append(local.NOTE)
    state.commit(route_name, rs)
    return Plan(conv, target, mode, route_name, prefix_hash, notes, cache_create,
                cache_key if regime.routing_key else "", sent_key, rs, state, route_name)


def _reuse_shared_cache(conv: Conversation, state: PlannerState, route: str, rs: RouteState, key: str, now: float,
                        notes: list[str], cache_create: dict) -> dict | None:
    """Before creating an explicit cache: another replica may have created this prefix's already."""
    shared = state.shared_explicit(route, key)
    if shared is None or shared[1] <= now + 60:
        return cache_create
    rs.remember_explicit(key, *shared)
    use_cache(conv, shared[0])
    notes[-1] = f"cache: using explicit cache {shared[0]} for the system instruction and tools (created by another replica)"
    return None


def _first_key(conv: Conversation) -> str:
    """The first block's prefix key (the whole prefix's chain is not needed: planning may be off)."""
    first = next((seg.blocks[:1] for seg in conv.segments if seg.blocks), [])
    return replace(conv, segments=[Segment(conv.segments[0].role, first)]).prefix_keys()[0] if first else ""


_DIGITS = re.compile(r"\d+")


def fingerprint(conv: Conversation) -> str:
    """A route name from the prompt's shape: tool names and the system prompt with volatile spans
    and digits masked, so requests from one template share a route whatever their values."""
    tools = [b for seg in conv.segments if seg.role == "tools" for b in seg.blocks]
    system = [b for seg in system_segments(conv) for b in seg.blocks]
    # The blocks' content hashes identify all it reads of them (an agent resends the same tools and system
    # prompt, whose parsed blocks carry their hashes): one lookup instead of a walk over every tool.
    key = (conv.dialect, conv.model, len(tools), *(b.key for b in tools), *(b.key for b in system))
    found = _FINGERPRINTS.get(key)
    if found is None:
        found = _masked_fingerprint(conv.dialect, conv.model, tuple(_tool_name(b.native) for b in tools),
                                    tuple(b.text[:4000] for b in system))
        _FINGERPRINTS.put(key, found, weigh((key, found)))
    return found


_FINGERPRINTS = memo("fingerprints")


# Masking runs every detector over the system prompt: a repeated prompt is masked once (the memo holds
# at most 1024 x 4,000 characters).
@functools.lru_cache(maxsize=1024)
def _masked_fingerprint(dialect: str, model: str | None, tools: tuple[str, ...], system: tuple[str, ...]) -> str:
    h = hashlib.blake2b(f"{dialect}:{model}".encode(), digest_size=8)
    for name in tools:
        h.update(name.encode())
    for text in system:
        for span in reversed(volatile_spans(text)):
            text = text[:span.start] + "\0" + text[span.end:]
        h.update(_DIGITS.sub("#", text).encode())
    return "fp-" + h.hexdigest()


def _tool_name(native: object) -> str:
    if not isinstance(native, dict):
        return ""
    function = native.get("function")
    return str(native.get("name") or (function.get("name", "") if isinstance(function, dict) else ""))
