"""`prompt_cache_key: derive | keep | off` in the planner (cache_planner/cache_key.py), on Chat Completions and
Responses bodies: the derived key follows the static prefix the planner settles (after the static-first rewrite)
and the tenant, never the caller's key or per-request values; it names neither tenant nor prompt."""

from __future__ import annotations

import json

import pytest

from prefixgate.cache_planner import PlannerState, Target, plan
from prefixgate.dialects import DIALECTS
from prefixgate.policies.schema import PolicyError
from tests.cache_planner.support_planning import POLICY
from tests.gateway.support_gateway import policy_for, settings_for

TARGET = Target("openai", "gpt-5.4")
SYSTEM = "You are Ava, the ACME support agent.\nCurrent time: 2026-11-22T10:{:02d}:00Z\n" + POLICY


def body(dialect: str, system: str, question: str, key: str | None) -> dict:
    out = ({"model": "gpt-5.4", "instructions": system, "input": question} if dialect == "responses" else
           {"model": "gpt-5.4", "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}]})
    return out if key is None else out | {"prompt_cache_key": key}


def sent(dialect: str, request: dict, mode: str, tenant: str = "acme") -> tuple[dict, object]:
    module = DIALECTS[dialect]
    result = plan(module.parse_request(json.dumps(request)), TARGET, PlannerState(), route="r", now=0,
                  cache_key=mode, tenant=tenant)
    return module.encode_request(result.conversation), result


@pytest.mark.parametrize("dialect", ["openai", "responses"])
def test_derive_groups_by_static_prefix_and_tenant_never_by_the_callers_key(dialect):
    # Same instructions (a different time in each), different caller keys and questions: one derived key.
    a, plan_a = sent(dialect, body(dialect, SYSTEM.format(1), "Where is my order?", "session-1"), "derive")
    b, _ = sent(dialect, body(dialect, SYSTEM.format(7), "Refund please", "session-2"), "derive")
    none, _ = sent(dialect, body(dialect, SYSTEM.format(9), "Hi", None), "derive")
    assert a["prompt_cache_key"] == b["prompt_cache_key"] == none["prompt_cache_key"] == plan_a.cache_key
    assert plan_a.cache_key_mode == "derive"
    # One caller key grouping requests with different instructions: derive does not merge them.
    other, _ = sent(dialect, body(dialect, "You are Bo, the billing agent.\n" + POLICY, "Hi", "session-1"), "derive")
    assert other["prompt_cache_key"] != a["prompt_cache_key"]
    # Another tenant with the same instructions, and a key without a tenant (its own name): separate keys.
    globex, _ = sent(dialect, body(dialect, SYSTEM.format(1), "Where is my order?", "session-1"), "derive", "globex")
    assert globex["prompt_cache_key"] != a["prompt_cache_key"]
    key = a["prompt_cache_key"]
    assert key.startswith("pg-") and len(key) == 27 and int(key[3:], 16) >= 0
    assert not any(word in key.lower() for word in ("acme", "ava", "session", plan_a.prefix_hash[:8]))


@pytest.mark.parametrize("dialect", ["openai", "responses"])
def test_keep_passes_the_callers_key_and_off_removes_it(dialect):
    kept, plan_k = sent(dialect, body(dialect, SYSTEM.format(1), "q", "session-1"), "keep")
    assert kept["prompt_cache_key"] == "session-1" == plan_k.cache_key
    assert any("kept as the caller sent it" in line for line in plan_k.explanation)
    # Without a caller key, `keep` sends one from the static prefix alone (what the planner always did): the one
    # `derive` gives where there is no tenant, and the same for every tenant (a shared route shares the cache).
    open_gateway, _ = sent(dialect, body(dialect, SYSTEM.format(1), "q", None), "derive", "")
    filled = [sent(dialect, body(dialect, SYSTEM.format(1), "q", None), "keep", t)[0] for t in ("acme", "globex")]
    assert filled[0]["prompt_cache_key"] == filled[1]["prompt_cache_key"] == open_gateway["prompt_cache_key"]
    for key in ("session-1", None):
        off, plan_o = sent(dialect, body(dialect, SYSTEM.format(1), "q", key), "off")
        assert "prompt_cache_key" not in off and plan_o.cache_key == "" and plan_o.cache_key_mode == "off"


def test_an_unknown_setting_is_refused_at_the_edge_naming_the_route(tmp_path):
    settings = settings_for("http://127.0.0.1:9", tmp_path)
    route = {"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}
    with pytest.raises(PolicyError, match=r"routes\.0\.prompt_cache_key: must be one of derive, keep, off, got 'share'"):
        policy_for(settings, {"routes": [route | {"prompt_cache_key": "share"}]})
    # YAML reads a bare `off` as false.
    assert policy_for(settings, {"routes": [route | {"prompt_cache_key": False}]}).routes[0].prompt_cache_key == "off"
    assert policy_for(settings, {"routes": [route]}).routes[0].prompt_cache_key == "keep"
    with pytest.raises(ValueError, match="cache_key must be one of"):
        plan(DIALECTS["openai"].parse_request(json.dumps(body("openai", "s", "q", None))), TARGET, cache_key="share")


def test_derive_wins_while_a_prefix_fits_one_machine_and_loses_past_its_overflow_so_keep_is_the_default():
    # bench/cache_key.py's agent sessions (shared instructions, growing conversations, one caller key each)
    # through the OpenAI cache simulator: ~15 requests a minute per machine, then more machines in turn.
    from bench.cache_key import read_share
    assert read_share("derive", 3, 4, 20.0, 600.0) > read_share("keep", 3, 4, 20.0, 600.0)
    assert read_share("derive", 20, 4, 10.0, 0.5) < read_share("keep", 20, 4, 10.0, 0.5)
