"""Security properties of a gateway that holds everyone's keys: virtual keys are separate from provider
keys and stored hashed; no key is ever returned, logged or written to the ledger; the dashboard and its
API need the admin token; CORS is off; tenants share no planner state; metrics cannot be grown without
bound by callers."""

from __future__ import annotations

import logging
from dataclasses import astuple

import httpx
import pytest

from prefixgate.gateway.app import create_app
from prefixgate.gateway.metrics import MAX_SERIES, Metrics
from prefixgate.ledger import LedgerRecord, read_records
from prefixgate.policies import hash_key
from tests.gateway.support_gateway import ServerThread, policy_for, running_upstream, settings_for
from tests.support_services import wait_until

PROVIDER_KEY = "sk-provider-secret-openai-778899"
KEYS = {"acme": "pg-acme-virtual-key-0001", "globex": "pg-globex-virtual-key-0002"}
ADMIN = "admin-token-for-tests-0003"
SYSTEM = "You are the support agent for a parcel company. Policies follow. " * 40


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", PROVIDER_KEY)
    mp.setenv("ANTHROPIC_API_KEY", "sk-ant-provider-secret-5566")
    mp.setenv("PG_KEY_ACME", KEYS["acme"])
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path_factory.mktemp("sec"), admin_token=ADMIN, log_level="debug")
        policy = policy_for(settings, {
            "routes": [{"name": "chat", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
                       {"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]}],
            "keys": [{"name": "acme-app", "tenant": "acme", "key_env": "PG_KEY_ACME"},
                     {"name": "globex-app", "tenant": "globex", "key_sha256": hash_key(KEYS["globex"])}]})
        app = create_app(settings, policy=policy)
        with ServerThread(app) as gw:
            yield gw, up, app, settings
    mp.undo()


def chat(gw, tenant: str, text: str = "Where is my parcel?", **extra) -> httpx.Response:
    return httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {KEYS[tenant]}", **extra},
                      json={"model": "gpt-5.4", "messages": [{"role": "system", "content": SYSTEM},
                                                            {"role": "user", "content": text}]})


def test_virtual_keys_are_stored_hashed_and_never_sent_upstream(stack):
    gw, up, app, _ = stack
    up.reset()
    assert chat(gw, "acme").status_code == 200
    policy = app.state.policy
    held = repr([astuple(k) for k in policy.keys]) + repr(app.state.proxy.keys)
    assert KEYS["acme"] not in held and KEYS["globex"] not in held
    assert hash_key(KEYS["acme"]) in app.state.proxy.keys
    # The upstream sees the gateway's provider key, never the caller's virtual key.
    sent = up.received[-1].headers
    assert sent["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert KEYS["acme"] not in repr(sent)
    # A provider key is not a gateway key.
    r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {PROVIDER_KEY}"},
                   json={"model": "gpt-5.4", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 401


def test_no_key_is_returned_logged_or_recorded(stack, caplog):
    gw, up, _, settings = stack
    caplog.set_level(logging.DEBUG)
    up.reset()
    answers = [chat(gw, "acme"), chat(gw, "globex", stream="x")]
    up.fail("401")          # the provider's error text quotes the key it was sent
    answers.append(chat(gw, "acme"))
    # The gateway's own key refused: a 502 naming whose key it was (not a 401 the caller would take for its own).
    assert answers[-1].status_code == 502 and "***" in answers[-1].text
    answers += [httpx.get(gw.url + path, headers={"authorization": f"Bearer {ADMIN}"})
                for path in ("/health", "/metrics", "/api/summary", "/api/requests", "/v1/models")]
    wait_until(lambda: len(read_records(settings.ledger_path)) >= 3, 5, "records written")
    secrets = [PROVIDER_KEY, "sk-ant-provider-secret-5566", *KEYS.values(), ADMIN]
    for r in answers:
        text = r.text + repr(dict(r.headers))
        assert not any(s in text for s in secrets), r.request.url
    assert not any(s in caplog.text for s in secrets)
    for path in (settings.ledger_path, settings.ledger_path + "-wal"):
        with open(path, "rb") as f:
            data = f.read()
        assert not any(s.encode() in data for s in secrets)


@pytest.mark.parametrize("path", ["/dashboard", "/api/summary", "/api/requests", "/api/openapi.json"])
def test_dashboard_and_admin_api_need_the_admin_token(stack, path):
    gw, *_ = stack
    assert httpx.get(gw.url + path).status_code == 401
    assert httpx.get(gw.url + path, headers={"authorization": "Bearer wrong"}).status_code == 401
    # A caller's virtual key is not an admin token.
    assert httpx.get(gw.url + path, headers={"authorization": f"Bearer {KEYS['acme']}"}).status_code == 401
    assert httpx.get(gw.url + path, headers={"authorization": f"Bearer {ADMIN}"}).status_code == 200


@pytest.mark.parametrize("method,path", [("OPTIONS", "/v1/chat/completions"), ("GET", "/health"),
                                         ("POST", "/v1/chat/completions"), ("OPTIONS", "/api/summary")])
def test_cors_is_off(stack, method, path):
    gw, *_ = stack
    r = httpx.request(method, gw.url + path, headers={
        "origin": "https://evil.example", "access-control-request-method": "POST",
        "access-control-request-headers": "authorization", "authorization": f"Bearer {KEYS['acme']}"},
        json={"model": "gpt-5.4", "messages": [{"role": "user", "content": "x"}]} if method == "POST" else None)
    assert not any(h.startswith("access-control-") for h in r.headers)


def tone_request(gw, tenant: str, tone: str) -> str:
    """A long system prompt whose first line changes on every request: only traffic teaches the planner
    that this line is dynamic (no detector knows it), so the plan shows what the planner has learned."""
    r = httpx.post(gw.url + "/v1/messages", headers={"x-api-key": KEYS[tenant], "x-prefixgate-route": "support"},
                   json={"model": "claude-sonnet-4-6", "max_tokens": 16, "system": f"Tone for this reply: {tone}.\n"
                         + SYSTEM * 3, "messages": [{"role": "user", "content": "Where is my parcel?"}]})
    assert r.status_code == 200, r.text
    return r.headers["x-prefixgate-plan"]


def test_tenants_share_no_planner_state(stack):
    """Identical prompts from two tenants: the second tenant's first plan is the cold plan the first
    tenant got at its start, not what the planner has learned from the first tenant since; so one
    tenant cannot detect another's prompts through the plans (or the cache hits they lead to)."""
    gw, _, app, _ = stack
    tones = ["cheerful", "patient", "brisk", "formal", "warm", "dry"]
    acme = [tone_request(gw, "acme", t) for t in tones]
    assert acme[-1] != acme[0] and "rewrites=1" in acme[-1]          # acme's route learned the tone line
    globex = [tone_request(gw, "globex", t) for t in tones[:2]]
    assert globex == acme[:2]
    routes = app.state.proxy.planner_state.routes
    # Learned state is kept per party (`ownership.principal`: the tenant, else the key itself).
    assert routes["tenant:acme/support"] is not routes["tenant:globex/support"]
    assert routes["tenant:acme/support"].requests == 6 and routes["tenant:globex/support"].requests == 2
    assert all(name.split("/", 1)[0] in ("tenant:acme", "tenant:globex") for name in routes)


def test_caller_chosen_model_names_cannot_grow_metrics_without_bound():
    metrics = Metrics()
    for i in range(MAX_SERIES + 500):
        metrics.observe(LedgerRecord(id=str(i), ts=0.0, route="chat", target="openai", model=f"gpt-junk-{i}",
                                     status=404))
    text = metrics.render().decode()
    assert 'model="other"' in text and 'model="gpt-junk-1400"' not in text
    assert len(metrics._children) == MAX_SERIES + 1
