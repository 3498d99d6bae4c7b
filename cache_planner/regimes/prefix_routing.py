"""Prefix caching steered by a routing key (OpenAI, Azure OpenAI, the OpenAI-compatible hosted providers): every
long enough prompt is cached automatically and `prompt_cache_key` keeps requests sharing a prefix on one machine
(`cache_key.py`); the models that take explicit mode (`regime = "breakpoints"` in the catalogue) also take up to
four `prompt_cache_breakpoint` markers, all with one TTL, and a retention on the Responses API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefixgate.cache_planner import checkpoints
from prefixgate.cache_planner.economics import Choice
from prefixgate.cache_planner.regimes.base import Regime
from prefixgate.cache_planner.retention import choose_retention
from prefixgate.ir import Checkpoint

if TYPE_CHECKING:
    from prefixgate.cache_planner.checkpoints import Candidate
    from prefixgate.cache_planner.stability import RouteState
    from prefixgate.cache_planner.target import Target
    from prefixgate.cost import Price
    from prefixgate.ir import Block, Conversation, Segment
    from prefixgate.providers.rules import Catalog, ModelRules


class PrefixRouting(Regime):
    providers = ("openai",)
    caller_marks = True
    one_ttl = True
    routing_key = True

    def markable(self, target: Target, seg: Segment, block: Block) -> bool:
        return seg.role not in ("assistant", "tools", "schema") and block.kind in ("text", "image", "audio", "file", "tool_result")

    def adjusts(self, model: ModelRules) -> bool:
        return model.regime == "breakpoints"

    def choose(self, target: Target, model: ModelRules, price: Price, catalog: Catalog, route: RouteState,
               cands: list[Candidate], notes: list[str]) -> list[Candidate]:
        chosen = _choose(model, price, route, cands, notes)
        _note(chosen, notes)
        return chosen

    def ttls(self, target: Target, model: ModelRules, catalog: Catalog) -> tuple[str, ...]:
        return model.breakpoint_ttls

    def warm_for(self, target: Target, catalog: Catalog, params: dict) -> tuple[str, int]:
        if params.get("prompt_cache_retention") == "24h":
            return "24h", catalog.openai.extended_retention_s
        return "5m", catalog.openai.in_memory_idle_s

    def marker_limit(self, target: Target, catalog: Catalog) -> int:
        return catalog.openai.max_breakpoint_writes

    def marked(self, conv: Conversation, marks: dict[int, str]) -> None:
        if marks:
            ttl = next(iter(marks.values()))
            conv.cache_params["prompt_cache_options"] = {**(conv.params.get("prompt_cache_options") or {}),
                                                         "mode": "explicit", "ttl": ttl}

    def place(self, conv: Conversation, target: Target, model: ModelRules, price: Price, catalog: Catalog,
              route: RouteState, cands: list[Candidate], flat: list, static: Candidate | None, static_key: str,
              now: float, notes: list[str]) -> dict | None:
        if model.regime == "breakpoints":
            cands = _instructions(conv, flat, cands, notes)
            chosen = _choose(model, price, route, cands, notes)
            ttl = chosen[0].choice.ttl if chosen else None
            implicit = _implicit_end(flat, chosen)
            _note(chosen, notes, implicit)
            mode = "explicit" if implicit is None else "implicit"
            # Implicit mode writes OpenAI's breakpoint and at most three explicit ones: with the end left to it, at
            # most three of `_choose`'s four remain.
            chosen = [c for c in chosen if c is not implicit]
            for c in chosen:
                checkpoints._own(flat, c.index).checkpoint = Checkpoint(ttl)
            conv.cache_params["prompt_cache_options"] = {"mode": mode, "ttl": ttl} if ttl else {"mode": mode}
            if not chosen and mode == "explicit":
                notes.append("cache: explicit mode with no breakpoints: nothing on this route is reused enough to pay for writes")
        if conv.dialect == "responses":
            choose_retention(conv, model, catalog.openai, route, notes)
        return None


REGIME = PrefixRouting()


def _implicit_end(flat: list, chosen: list[Candidate]) -> Candidate | None:
    """The conversation's end when a breakpoint cannot mark it, else None (explicit mode: only the planner's
    breakpoints are written, so a route that never repeats pays no writes). A Responses item such as a tool call's
    output given as a string goes byte for byte: there implicit mode, whose breakpoint OpenAI places at the newest
    user or tool message, ends the conversation."""
    end = next((c for c in chosen if c.level == "conversation"), None)
    return end if end is not None and flat[end.index][0].form == "object" else None


def _instructions(conv: Conversation, flat: list, cands: list[Candidate], notes: list[str]) -> list[Candidate]:
    """Responses' `instructions` is a string no breakpoint can mark; marked, the dialect sends them as the first
    input item, a developer message (what `instructions` is: "a system (or developer) message inserted into the
    model's context"), so a new session reads them instead of writing them again. Only on a request nothing
    will chain to or from (`store: false`, no `previous_response_id` or `conversation`): a stored response would
    carry that message into the next one, which sends its own instructions again."""
    at = [c for c in cands if flat[c.index][0].blocks_field == "instructions"]
    if not at:
        return cands
    params = conv.params
    if params.get("store") is False and params.get("previous_response_id") is None and params.get("conversation") is None:
        notes.append("cache: instructions sent as the first input item (a developer message), where a breakpoint "
                     "can mark them")
        return cands
    notes.append("skip: static checkpoint: `instructions` cannot carry a breakpoint, and moving them into the input "
                 "of a stored or chained request would carry them into the next response")
    return [c for c in cands if c not in at]


def _choose(model: ModelRules, price: Price, route: RouteState, cands: list[Candidate],
            notes: list[str]) -> list[Candidate]:
    """At most four breakpoints, in prefix order, all with one TTL: the static level's choice, else the first
    chosen's (by `checkpoints.PRIORITY`)."""
    chosen = checkpoints._decide(cands, model, price, route, model.breakpoint_ttls, notes)
    chosen = sorted(chosen, key=lambda c: checkpoints.PRIORITY[c.level])[:4]
    ttl = chosen[0].choice.ttl if chosen else None
    for c in chosen:
        c.choice = Choice(ttl, c.choice.expected_cost, c.choice.reason)
    return sorted(chosen, key=lambda c: c.index)


def _note(chosen: list[Candidate], notes: list[str], implicit: Candidate | None = None) -> None:
    """One line per breakpoint, by priority; the one left to OpenAI's implicit breakpoint says so."""
    for c in sorted(chosen, key=lambda c: checkpoints.PRIORITY[c.level]):
        line = f"{c.level} at {c.tokens} tokens, ttl {c.choice.ttl} ({c.choice.reason})"
        notes.append(f"checkpoint: {line}" if c is not implicit else f"implicit breakpoint: {line}: implicit mode, "
                     "so that OpenAI's own breakpoint ends the conversation at its newest tool output")
