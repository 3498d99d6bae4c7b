"""Learning volatile spans from a route's requests (issue 38): the units moved are the ones a reader would
choose, no word is lost or duplicated, the third request's static prefix is the fixed text, a decision holds,
and the route's own rule (declared volatile, never moved, off) wins."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from prefixgate.cache_planner import PlannerState, RedisStore, Target
from prefixgate.cache_planner.variance import differing_spans, rule_of, widen
from tests.cache_planner.support_planning import plan_body, texts
from tests.cache_planner.support_values import KINDS, changing, instructions, random_kind, system_prompt

TARGETS = {"anthropic": Target("anthropic", "claude-sonnet-5-5"), "openai": Target("openai", "gpt-5.5"),
           "gemini": Target("gemini", "gemini-3.5-flash")}
SEED = random.randrange(1 << 30)


def body(provider: str, system: str, question: str) -> dict:
    if provider == "anthropic":
        return {"model": "claude-sonnet-5-5", "max_tokens": 16, "system": system,
                "messages": [{"role": "user", "content": question}]}
    if provider == "openai":
        return {"model": "gpt-5.5", "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}]}
    return {"systemInstruction": {"parts": [{"text": system}]}, "contents": [{"role": "user", "parts": [{"text": question}]}]}


def sent(provider: str, out: dict) -> tuple[str, str]:
    """(system text, the rest of the prompt's text) of a planned body."""
    if provider in ("anthropic", "openai"):
        system = [("system", "".join(texts(out["system"])))] if "system" in out else []
        content = system + [(m["role"], "".join(texts(m["content"]))) for m in out["messages"]]
        return "".join(c for r, c in content if r == "system"), "".join(c for r, c in content if r != "system")
    return "".join(texts(out.get("systemInstruction", {}))), "".join(texts(out["contents"]))


def words(text: str) -> Counter:
    return Counter(text.split())


def plan_one(provider: str, state: PlannerState, system: str, question: str, now: float, **kw) -> tuple[dict, object]:
    model = "gemini-3.5-flash" if provider == "gemini" else None
    return plan_body(provider, body(provider, system, question), TARGETS[provider], state, now=now, model=model, **kw)


@pytest.mark.parametrize("provider", list(TARGETS))
@pytest.mark.parametrize("kind", [*KINDS, "random-a", "random-b", "random-c"])
def test_every_word_is_sent_once_and_from_the_third_request_the_system_prompt_is_the_fixed_text(provider, kind):
    seed = SEED + sum(map(ord, kind))
    value_of = random_kind(seed) if kind.startswith("random") else KINDS[kind]
    values = changing(value_of, random.Random(seed))
    for where, one_line in (("same_line", True), ("own_line", False)):
        fixed = instructions(seed, rules=40, one_line=one_line)
        state = PlannerState()
        statics = []
        for i in range(6):
            system, question = system_prompt(next(values), fixed, where), f"Question {i}?"
            out, plan = plan_one(provider, state, system, question, now=i * 10.0)
            got_system, got_rest = sent(provider, out)
            # The multiset of words: the caller's, plus the label alone once something moved (the seed is in
            # the message for a rerun).
            label = words("Context:") if "Context:\n" in got_rest else Counter()
            assert words(got_system + " " + got_rest) == words(system + " " + question) + label, (SEED, kind)
            statics.append(got_system)
            if i >= 2:
                assert got_system.strip() == fixed.strip(), (SEED, kind, where, got_system[:200])
                # Instructions stay ahead of the question: the moved value leads the user turn.
                assert got_rest.startswith("Context:\n") and got_rest.endswith(question), (SEED, kind)
        assert len(set(statics[1:])) == 1, (SEED, kind, where)


@pytest.mark.parametrize(("text", "value", "unit"), [
    # A sentence inside a long line: the sentence moves, the line's other sentences stay readable.
    ("You help customers. Ticket 4821 is open. Be kind and brief.", "4821", "Ticket 4821 is open. "),
    # A sentence too long to move whole gives up its clause or its parenthetical.
    ("Be brief, " + "always cite the policy section and the record you used, " * 8 + "and the customer (Jane Doe) "
     "waits, so answer now.", "Jane", "(Jane Doe) "),
    ("Be brief, " + "always cite the policy section and the record you used, " * 8 + "and Jane Doe waits, so "
     "answer now.", "Jane", "and Jane Doe waits, "),
    # A structured line (a JSON field, key: value) moves whole.
    ('{\n  "customer": "Jane Doe",\n  "tier": "gold"\n}', "Jane", '  "customer": "Jane Doe",\n'),
    ("Rules follow.\nEmail: jane@example.com\nMore rules.", "jane", "Email: jane@example.com\n"),
])
def test_a_differing_span_widens_to_the_unit_a_reader_would_move(text, value, unit):
    start = text.index(value)
    assert text[slice(*widen(text, start, start + len(value)))] == unit


def test_differing_spans_are_found_wherever_they_are():
    old = "Hello Jane Doe, your order 1234 ships today. Fixed text follows here. Ref X9."
    new = "Hello Omar Haddad, your order 98 ships today. Fixed text follows here. Ref Q7."
    found = [new[a:b] for a, b in differing_spans(old, new)]
    assert found == ["Omar Haddad", "98", "Q7"]
    assert differing_spans(old, old) == []


def test_a_value_that_repeats_stays_moved_and_the_plan_does_not_flip():
    # The same customer twice in a row, then another: once learned, the site moves whatever it holds.
    fixed = instructions(3, rules=40)
    state = PlannerState()
    names = ["Jane Doe", "Omar Haddad", "Omar Haddad", "Omar Haddad", "Li Wei", "Li Wei"]
    systems = []
    for i, name in enumerate(names):
        out, plan = plan_one("anthropic", state, f"The customer is {name}.\n{fixed}", "Hi?", now=i * 10.0)
        systems.append(sent("anthropic", out)[0])
    assert len(set(systems[1:])) == 1 and systems[1].strip() == fixed.strip()
    assert any("held" in line for line in plan.explanation if line.startswith("rewrite: moved"))


def test_the_route_s_rule_moves_declared_text_at_once_and_never_moves_what_it_protects():
    fixed = instructions(4, rules=40)
    declared = rule_of([r"Shift lead: \w+\."], [r"Escalation code: \w+\."])
    state = PlannerState()
    out, plan = plan_one("anthropic", state, f"Shift lead: Ana.\n{fixed}", "Hi?", now=0, rule=declared)
    assert sent("anthropic", out)[0].strip() == fixed.strip()           # first request: declared, moved
    assert any("declared" in line for line in plan.explanation)
    for i, code in enumerate(["A1", "B2", "C3"]):
        out, _ = plan_one("anthropic", state, f"Escalation code: {code}.\n{fixed}", "Hi?", now=10.0 + i, rule=declared)
        assert sent("anthropic", out)[0].startswith(f"Escalation code: {code}.")    # varies, but protected
    out, plan = plan_one("anthropic", PlannerState(), f"Shift lead: Ana.\n{fixed}", "Hi?", now=0, mode="off")
    assert sent("anthropic", out)[0].startswith("Shift lead: Ana.") and plan.explanation[0].startswith("passthrough")


def test_prompts_with_other_values_share_one_route_but_tenants_never_do():
    state = PlannerState()
    fixed = instructions(5)
    names = {state.resolve("acme/", f"fp-{i}", f"The customer is {n}.\n{fixed}") for i, n in enumerate(["Jane", "Omar", "Li"])}
    assert names == {"acme/fp-0"}
    assert state.resolve("other/", "fp-9", f"The customer is Jane.\n{fixed}") == "other/fp-9"
    assert state.resolve("acme/", "fp-7", instructions(6)) == "acme/fp-7"     # other instructions: a route of their own


def test_replicas_sharing_redis_learn_the_site_and_the_route_from_each_other(redis_url):
    fixed = instructions(8, rules=40)
    a = PlannerState(store=RedisStore(redis_url, prefix="pg-test-variance:"), publish_every_s=0)
    b = PlannerState(store=RedisStore(redis_url, prefix="pg-test-variance:"), publish_every_s=0)
    routes = []
    for i, (state, name) in enumerate([(a, "Jane Doe"), (a, "Omar Haddad"), (b, "Li Wei")]):
        # No route name: each request is named by its shape, which the names change.
        out, plan = plan_one("anthropic", state, f"The customer is {name}. {fixed}", "Hi?", now=i * 10.0, route=None)
        routes.append(plan.route)
    # Replica b saw the prompt for the first time, with a third name: it found replica a's route (through the
    # shared sketch index) and moved the name as replica a had learned to.
    assert routes[0] == routes[1] == routes[2]
    assert sent("anthropic", out)[0].strip() == fixed.strip()
    assert json.loads(a.store.client.get("pg-test-variance:" + plan.route))["sites"]


@pytest.mark.parametrize("provider", list(TARGETS))
def test_a_system_prompt_that_shrinks_to_its_own_start_is_planned(provider):
    # The second request's system text is the start of the first's, ending in a newline: the difference is a
    # deletion at the very end (an empty span with no unit around it). It was a 500 (min() of nothing).
    state = PlannerState()
    rules = "Refunds are accepted within thirty days of purchase when the item is unused.\n"
    for i, system in enumerate([rules * 4, rules, rules]):
        out, _ = plan_one(provider, state, system, f"Where is order {i}?", now=i * 10.0)
        system_sent, rest = sent(provider, out)
        expected = words(system + f"Where is order {i}?")
        expected["Context:"] += rest.count("Context:")      # the label of moved text, the only word added
        assert words(system_sent + rest) == +expected


def test_an_empty_span_at_the_end_of_the_text_widens_to_itself():
    text = "Rule one applies. Rule two applies.\n"
    assert widen(text, len(text), len(text)) == (len(text), len(text))
