"""Tenant isolation mechanics (issue 29, finding 6): salts and tags keyed by a server secret and by the caller's
party, a tag at the very start of every format's cache prefix, and a body memo each party sees alone."""

from __future__ import annotations

import hashlib
import json

import httpx
import pytest

from prefixgate.cache_planner import PlannerState
from prefixgate.dialects import resent, wire_format
from prefixgate.gateway.isolation import server_secret, tenant_salt, tenant_tag
from prefixgate.gateway.ownership import principal
from prefixgate.policies import hash_key
from prefixgate.policies.schema import CallerKey
from tests.gateway.support_gateway import policy_for, running_gateway, running_upstream, settings_for

TAG = "[tenant 0123456789ab]"
TOOL = {"name": "lookup", "description": "Look a part up.", "input_schema": {"type": "object"}}
CASES = {
    "anthropic": [{"model": "claude-sonnet-5-5", "max_tokens": 10, "system": "Be brief.",
                   "messages": [{"role": "user", "content": "hi"}]},
                  {"model": "claude-sonnet-5-5", "max_tokens": 10, "tools": [TOOL],
                   "messages": [{"role": "user", "content": "hi"}]}],
    "openai": [{"model": "gpt-5.5", "messages": [{"role": "user", "content": "hi"}]},
               {"model": "gpt-5.5", "messages": [{"role": "user", "content": "hi"}], "tools": [
                   {"type": "function", "function": {"name": "lookup", "description": "Look a part up.",
                                                     "parameters": {"type": "object"}}}]}],
    "responses": [{"model": "gpt-5.5", "input": "hi", "instructions": "Be brief."},
                  {"model": "gpt-5.5", "input": "hi", "tools": [{"type": "function", "name": "lookup",
                                                                 "description": "Look a part up.",
                                                                 "parameters": {"type": "object"}}]}],
    "gemini": [{"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
               {"systemInstruction": {"parts": [{"text": "Be brief."}]},
                "contents": [{"role": "user", "parts": [{"text": "hi"}]}]}],
}


@pytest.mark.parametrize("dialect,payload", [(d, p) for d, ps in CASES.items() for p in ps])
def test_the_tag_opens_the_cache_prefix_and_leaves_the_callers_body_alone(dialect, payload):
    original = json.loads(json.dumps(payload))
    tagged = dict(payload)
    wire_format(dialect).tag_prompt(tagged, TAG)
    assert payload == original                  # nothing the body memo may hold was edited in place
    conv = wire_format(dialect).parse_request(json.dumps(tagged).encode(), model=payload.get("model", "gemini-3.5-flash"))
    first = conv.blocks()[0]
    assert TAG in json.dumps(first.native) and TAG not in json.dumps([b.native for b in conv.blocks()[1:]])


def test_salts_are_keyed_by_a_secret_and_by_the_party_never_the_name(tmp_path):
    secret = server_secret("", str(tmp_path / "ledger.sqlite"))
    assert server_secret("", str(tmp_path / "ledger.sqlite")) == secret      # kept across restarts
    named_acme, in_acme, also_in_acme = (CallerKey("acme", "a" * 64), CallerKey("app", "b" * 64, tenant="acme"),
                                         CallerKey("batch", "c" * 64, tenant="acme"))
    lone_one, lone_two = CallerKey("one", "d" * 64), CallerKey("two", "e" * 64)
    salt = {k.name: tenant_salt(secret, principal(k)) for k in (named_acme, in_acme, also_in_acme, lone_one, lone_two)}
    assert salt["app"] == salt["batch"]
    assert salt["acme"] != salt["app"]          # a key named like a tenant is not that tenant
    assert salt["one"] != salt["two"]           # keys without a tenant share nothing
    # Not computable from the tenant's name (the salt the gateway used to send).
    assert salt["app"] != hashlib.sha256(b"prefixgate-tenant:acme").hexdigest()[:32]
    other = server_secret("", str(tmp_path / "other.sqlite"))
    assert tenant_salt(other, principal(in_acme)) != salt["app"]
    assert tenant_tag(secret, principal(in_acme)) != tenant_tag(other, principal(in_acme))


def test_a_resent_body_is_found_only_by_its_own_partys_requests():
    bodies = resent.ResentBodies()
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "x" * 600} for i in range(40)]
    raw = json.dumps({"model": "gpt-5.5", "messages": messages}).encode()
    longer = json.dumps({"model": "gpt-5.5", "messages": [*messages, {"role": "user", "content": "next"}]}).encode()
    decoder = json.JSONDecoder()

    def load(scope: str, body: bytes) -> resent.Body | None:
        token = resent.SCOPE.set(scope)
        try:
            return bodies.load(body, "messages", decoder)
        finally:
            resent.SCOPE.reset(token)

    load("tenant:a", raw)
    assert load("tenant:b", longer).reused == 0 and bodies.hits == 0    # another party's resend: parsed afresh
    assert load("tenant:a", longer).reused == 40 and bodies.hits == 1


def test_a_self_hosted_upstream_gets_each_partys_own_salt_and_planner_state(tmp_path):
    keys = {"named-acme": "", "acme-app": "acme", "acme-batch": "acme", "lone-one": "", "lone-two": ""}
    with running_upstream() as vllm:
        settings = settings_for(vllm.url, tmp_path)
        policy = policy_for(settings, {
            "upstreams": {"vllm": {"kind": "openai_compatible", "url": f"{vllm.url}/v1"}},
            "routes": [{"name": "llama", "models": ["llama-*"], "targets": [{"upstream": "vllm"}]}],
            "keys": [{"name": n, "key_sha256": hash_key(f"pg-{n}-secret"), **({"tenant": t} if t else {})}
                     for n, t in keys.items()]})
        state = PlannerState()
        with running_gateway(settings, policy=policy, planner_state=state) as gw:
            salts = {}
            for name in keys:
                r = httpx.post(f"{gw.url}/v1/chat/completions", headers={"authorization": f"Bearer pg-{name}-secret",
                                                                         "x-prefixgate-route": "support"},
                               json={"model": "llama-3", "messages": [{"role": "user", "content": "hi"}]})
                assert r.status_code == 200, r.text
                salts[name] = vllm.received[-1].body["cache_salt"]
    assert salts["acme-app"] == salts["acme-batch"]
    assert len({salts["named-acme"], salts["acme-app"], salts["lone-one"], salts["lone-two"]}) == 4
    # What the planner learns from a route is learned per party too: four parties, four states.
    assert len([name for name in state.routes if name.endswith("/support")]) == 4


def test_a_replica_restarted_while_redis_is_down_keeps_the_fleets_secret(tmp_path, redis_url):
    """Replicas agree on the secret through Redis; one that restarts while Redis is unreachable used to go back to
    the secret drawn in its own file: its salts, tags and pins then differed from every other replica's."""
    first = server_secret("", str(tmp_path / "a.sqlite"), redis_url)
    assert server_secret("", str(tmp_path / "b.sqlite"), redis_url) == first
    assert server_secret("", str(tmp_path / "b.sqlite"), "redis://127.0.0.1:1/0") == first     # nothing listens there
