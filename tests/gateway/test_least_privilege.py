"""Least privilege on a running gateway: the exposure summary on /health for an admin only, caller keys
scoped to read-only dashboard access, the admin token compared in constant time, keys in the policy file
only as hashes or environment names, request bodies kept in the ledger for chosen routes only; and what
counts as an exposure (gateway/exposure.py)."""

from __future__ import annotations

import secrets

import httpx
import pytest
from fastapi import HTTPException
from starlette.requests import Request

from prefixgate.bind import is_loopback
from prefixgate.config import ConfigError, load_settings
from prefixgate.gateway.app import create_app
from prefixgate.gateway.dashboard.auth import require_reader
from prefixgate.gateway.exposure import summarize
from prefixgate.ledger import read_records
from prefixgate.policies import PolicyError, hash_key
from tests.gateway.support_gateway import policy_for, running_upstream, settings_for
from tests.support_services import ServerThread, wait_until

ADMIN = "admin-token-least-privilege-0001"
READER = "pg-reader-key-0002"
APP = "pg-app-key-0003"
ROUTES = [{"name": "kept", "models": ["gpt-*"], "targets": [{"upstream": "openai"}], "ledger_bodies": True},
          {"name": "private", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]}]
KEYS = [{"name": "analyst", "key_sha256": hash_key(READER), "dashboard": "read"},
        {"name": "app", "key_sha256": hash_key(APP)}]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp, running_upstream() as up:
        mp.setenv("OPENAI_API_KEY", "sk-openai-least-privilege")
        mp.setenv("ANTHROPIC_API_KEY", "sk-ant-least-privilege")
        settings = settings_for(up.url, tmp_path_factory.mktemp("lp"), admin_token=ADMIN)
        app = create_app(settings, policy=policy_for(settings, {"routes": ROUTES, "keys": KEYS}))
        with ServerThread(app) as gw:
            yield gw, app, settings


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def test_health_shows_the_exposure_summary_to_an_admin_only(stack):
    gw, _, _ = stack
    assert "exposure" not in httpx.get(gw.url + "/health").json()
    assert "exposure" not in httpx.get(gw.url + "/health", headers=bearer(READER)).json()
    assert "exposure" not in httpx.get(gw.url + "/health", headers=bearer(ADMIN + "x")).json()
    summary = httpx.get(gw.url + "/health", headers=bearer(ADMIN)).json()["exposure"]
    assert summary["bind"] == "127.0.0.1:8080 (loopback)" and summary["exposures"] == []
    assert summary["caller_keys"].startswith("virtual (2 keys, 1 with read-only dashboard access)")
    assert summary["dashboard_auth"] == "admin_token" and summary["ledger_bodies"].startswith("on for routes kept (")
    assert {"redis", "otel"} <= set(summary)


def test_a_dashboard_reader_key_opens_the_dashboard_and_api_and_nothing_more(stack):
    gw, app, _ = stack
    assert httpx.get(gw.url + "/api/summary", headers=bearer(READER)).status_code == 200
    assert httpx.get(gw.url + "/api/summary", headers=bearer(APP)).status_code == 401
    assert httpx.post(gw.url + "/dashboard/login", data={"token": APP}).status_code == 401
    login = httpx.post(gw.url + "/dashboard/login", data={"token": READER})
    assert login.status_code == 303
    with httpx.Client(base_url=gw.url, cookies=login.cookies) as browser:
        assert browser.get("/dashboard").status_code == 200 and browser.get("/api/overview").status_code == 200
    # Read-only: a method that could change state needs the admin token, whatever the route.
    def call(method: str, token: str) -> None:
        require_reader(Request({"type": "http", "method": method, "path": "/api/summary", "query_string": b"",
                                "headers": [(b"authorization", f"Bearer {token}".encode())], "app": app}))

    call("GET", READER)
    call("POST", ADMIN)
    with pytest.raises(HTTPException) as refused:
        call("POST", READER)
    assert refused.value.status_code == 401


def test_the_admin_token_is_compared_in_constant_time(stack, monkeypatch):
    gw, _, _ = stack
    compared = []
    real = secrets.compare_digest

    def spy(a, b):
        compared.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(secrets, "compare_digest", spy)
    assert httpx.get(gw.url + "/api/summary", headers=bearer("short")).status_code == 401
    assert httpx.get(gw.url + "/api/summary", headers=bearer(ADMIN)).status_code == 200
    assert (len("short"), len(ADMIN)) in compared and (len(ADMIN), len(ADMIN)) in compared


def test_ledger_bodies_are_kept_for_the_chosen_routes_only(stack):
    gw, _, settings = stack
    openai_answer = httpx.post(gw.url + "/v1/chat/completions", headers=bearer(APP),
                               json={"model": "gpt-5.4", "messages": [{"role": "user", "content": "kept prompt"}]})
    anthropic_answer = httpx.post(gw.url + "/v1/messages", headers={"x-api-key": APP}, json={
        "model": "claude-sonnet-4-6", "max_tokens": 5, "messages": [{"role": "user", "content": "private prompt"}]})
    assert openai_answer.status_code == 200 and anthropic_answer.status_code == 200, anthropic_answer.text

    def both() -> bool:
        return {"kept", "private"} <= {r["route"] for r in read_records(settings.ledger_path)}

    wait_until(both, 10, "both requests in the ledger")
    bodies = {r["route"]: r["body"] for r in read_records(settings.ledger_path)}
    assert "kept prompt" in bodies["kept"] and bodies["private"] == ""


@pytest.mark.parametrize(("spec", "message"), [
    ({"name": "a", "key": "pg-plain"}, "keys.0.key: keys are not accepted in plain text in the policy file; use key_env"),
    ({"name": "a", "api_key": "pg-plain"}, "keys.0.api_key: keys are not accepted in plain text"),
    ({"name": "a", "key_sha256": "pg-plain"}, "keys.0.key_sha256: must be 64 hex digits"),
    ({"name": "a", "key_sha256": hash_key("x"), "dashboard": "write"}, "keys.0.dashboard: must be 'read'"),
    # The sample in docs/gateway.md of old: sha256 of "test", typed from `printf test | sha256sum`.
    ({"name": "a", "key_sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
     "keys.0: this key is a sample value"),
])
def test_policy_keys_only_as_hashes_or_environment_names(tmp_path, spec, message):
    settings = settings_for("http://127.0.0.1:9", tmp_path)
    with pytest.raises(PolicyError, match=message):
        policy_for(settings, {"routes": ROUTES, "keys": [spec]})
    with pytest.raises(PolicyError, match="upstreams.openai.api_key: keys are not accepted in plain text"):
        policy_for(settings, {"routes": ROUTES, "upstreams": {"openai": {"api_key": "sk-plain"}}})
    with pytest.raises(PolicyError, match="routes.0.ledger_bodies: must be true or false"):
        policy_for(settings, {"routes": [{**ROUTES[0], "ledger_bodies": "yes"}]})


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("gateway.internal", False),
])
def test_only_loopback_addresses_count_as_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_self_hosted_compute_open_to_anyone_is_an_exposure(tmp_path, monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    settings = settings_for("http://127.0.0.1:9", tmp_path, host="0.0.0.0", admin_token=ADMIN,
                            backend_url="http://127.0.0.1:8100")
    summary = summarize(settings, policy_for(settings, {"routes": [
        {"name": "backend", "models": ["*"], "targets": [{"upstream": "local"}]}]}))
    assert [e.what for e in summary.exposures] == ["model requests from callers with no key spend self-hosted upstreams (local)"]


def test_a_weak_or_sample_admin_token_stops_serve(tmp_path):
    from tests.gateway.test_protected_mode import environment, prefixgate

    done = prefixgate("serve", "--check", env=environment(tmp_path, PREFIXGATE_ADMIN_TOKEN="x"))
    assert done.returncode != 0 and "admin_token must be at least 16 characters and not a sample" in done.stderr
    for token in ("0123456789abcde", "0123456789abcdef", "Change-Me-Please"):   # fifteen; sixteen but samples
        with pytest.raises(ConfigError, match="admin_token must be at least 16"):
            load_settings(admin_token=token)
    assert load_settings(admin_token="a-long-random-admin-token-7f3c").admin_token
