"""Protected mode, as an operator meets it: the real `prefixgate serve` process on a non-loopback bind
(0.0.0.0; nothing outside this machine reaches it, and traffic goes to 127.0.0.1 only) refuses to start
with an exposure nobody accepted, names each one and the setting that closes it, and exits before it
listens; with caller keys and an admin token (or `--open`, warned at every start) it serves.
`serve --check` prints the exposure summary and fails on an exposure; `serve --config FILE` works and a
misspelt key is named with the closest known one."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml

from tests.gateway.support_gateway import running_upstream
from tests.support_services import free_port, wait_until

PROVIDER_KEY = "sk-provider-secret-for-protected-mode-0001"
CALLER_KEY = "pg-caller-key-protected-mode-0002"
ADMIN = "admin-token-protected-mode-0003"
CHAT = {"model": "gpt-5.4", "messages": [{"role": "user", "content": "Where is my parcel?"}]}
KEYED_POLICY = {"routes": [{"name": "chat", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}],
                "keys": [{"name": "app", "key_env": "PG_CALLER_KEY"}]}


def environment(tmp_path: Path, upstream_url: str = "http://127.0.0.1:9", **variables: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFIXGATE_", "OTEL_", "AWS_", "GOOGLE_"))
           and k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY")}
    env.update(PREFIXGATE_LEDGER_PATH=str(tmp_path / "ledger.sqlite"), PREFIXGATE_OPENAI_BASE_URL=upstream_url,
               PREFIXGATE_ANTHROPIC_BASE_URL=upstream_url, PREFIXGATE_GEMINI_BASE_URL=upstream_url,
               PG_CALLER_KEY=CALLER_KEY)
    env.update(variables)
    return env


def prefixgate(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "prefixgate.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)


@contextmanager
def serving(*args: str, env: dict[str, str], port: int) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen([sys.executable, "-m", "prefixgate.cli", "serve", "--host", "0.0.0.0", "--port", str(port),
                             *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def up() -> bool:
        assert proc.poll() is None, f"gateway exited: {proc.stdout.read()}"
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(up, 60, "the gateway answering /health")
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)


def policy_file(tmp_path: Path, data: dict) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def refused(result: subprocess.CompletedProcess, port: int) -> str:
    """The refusal's text, after checking it exited non-zero and nothing listens on its port."""
    assert result.returncode != 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
    return result.stderr


def test_an_open_relay_and_an_open_dashboard_are_refused_naming_each_and_its_setting(tmp_path):
    port = free_port()
    env = environment(tmp_path, OPENAI_API_KEY=PROVIDER_KEY)
    out = refused(prefixgate("serve", "--host", "0.0.0.0", "--port", str(port), env=env), port)
    assert "refusing to serve on 0.0.0.0:" in out and "protected mode" in out
    assert "spend this gateway's provider keys (OPENAI_API_KEY)" in out and "`keys:` in the policy file" in out
    assert "dashboard and /api/*" in out and "admin_token (PREFIXGATE_ADMIN_TOKEN)" in out
    assert "open_gateway: true (--open)" in out
    assert PROVIDER_KEY not in out


def test_the_dashboard_without_an_admin_token_is_refused_even_with_caller_keys(tmp_path):
    port = free_port()
    env = environment(tmp_path, OPENAI_API_KEY=PROVIDER_KEY, PREFIXGATE_POLICY_FILE=policy_file(tmp_path, KEYED_POLICY))
    out = refused(prefixgate("serve", "--host", "0.0.0.0", "--port", str(port), env=env), port)
    assert "admin_token (PREFIXGATE_ADMIN_TOKEN)" in out and "provider keys" not in out


def test_caller_keys_and_an_admin_token_serve_beyond_loopback(tmp_path):
    port = free_port()
    with running_upstream() as up:
        env = environment(tmp_path, up.url, OPENAI_API_KEY=PROVIDER_KEY, PREFIXGATE_ADMIN_TOKEN=ADMIN,
                          PREFIXGATE_POLICY_FILE=policy_file(tmp_path, KEYED_POLICY))
        with serving(env=env, port=port) as proc:
            url = f"http://127.0.0.1:{port}"
            assert httpx.post(url + "/v1/chat/completions", json=CHAT).status_code == 401
            ok = httpx.post(url + "/v1/chat/completions", json=CHAT, headers={"authorization": f"Bearer {CALLER_KEY}"})
            assert ok.status_code == 200, ok.text
            assert httpx.get(url + "/api/summary").status_code == 401
        log = proc.stdout.read()
    assert '"msg":"exposure: bind 0.0.0.0:' in log and "caller keys: virtual (1 key," in log and "exposures: 0" in log
    # No exposure warning (the anonymous call's refusal has its own warning line, paths.py: not an exposure).
    assert not [line for line in log.splitlines() if '"level":"warning"' in line and "answered 401" not in line], log


def test_open_serves_the_exposures_and_warns_at_every_start(tmp_path):
    with running_upstream() as up:
        env = environment(tmp_path, up.url, OPENAI_API_KEY=PROVIDER_KEY)
        for _ in range(2):
            port = free_port()
            with serving("--open", env=env, port=port) as proc:
                # Open means open: a caller with no key spends the gateway's provider key.
                answer = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=CHAT)
                assert answer.status_code == 200, answer.text
                assert up.received[-1].headers["authorization"] == f"Bearer {PROVIDER_KEY}"
            log = proc.stdout.read()
            warnings = [line for line in log.splitlines() if '"level":"warning"' in line and "open_gateway" in line]
            assert len(warnings) == 2, log
            assert any("provider keys (OPENAI_API_KEY)" in w for w in warnings)
            assert any("admin_token" in w for w in warnings)


def test_the_open_gateway_setting_in_a_config_file_is_the_same_as_open(tmp_path):
    config = tmp_path / "prefixgate.yaml"
    config.write_text("open_gateway: true\nhost: 0.0.0.0\n")
    result = prefixgate("serve", "--config", str(config), "--check", env=environment(tmp_path, OPENAI_API_KEY=PROVIDER_KEY))
    assert "accepted with open_gateway: true" in result.stdout


def test_a_loopback_bind_is_unchanged(tmp_path):
    result = prefixgate("serve", "--check", env=environment(tmp_path, OPENAI_API_KEY=PROVIDER_KEY))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "127.0.0.1:8080 (loopback)" in result.stdout and "exposures:      none" in result.stdout


def test_a_misspelt_setting_variable_is_named_and_the_setting_stays_unset(tmp_path):
    # The admin token under a misspelt name protects nothing: the dashboard stays open, so the exposed bind
    # still fails, and the warning says which variable was meant.
    env = environment(tmp_path, OPENAI_API_KEY=PROVIDER_KEY, PREFIXGATE_ADMN_TOKEN="admin-token-0005",
                      PREFIXGATE_KEY_TEAM_A="a caller key variable, not a setting")
    result = prefixgate("serve", "--host", "0.0.0.0", "--check", env=env)
    assert result.returncode == 1
    assert "PREFIXGATE_ADMN_TOKEN is not a setting and is ignored; did you mean PREFIXGATE_ADMIN_TOKEN?" in result.stderr
    assert "KEY_TEAM_A" not in result.stderr and "admin-token-0005" not in result.stderr + result.stdout


def test_check_prints_every_item_and_fails_on_an_exposure(tmp_path):
    env = environment(tmp_path, OPENAI_API_KEY=PROVIDER_KEY, PREFIXGATE_REDIS_URL="redis://:redis-password-0004@cache.internal:6379/0",
                      PREFIXGATE_OTEL="on", OTEL_EXPORTER_OTLP_ENDPOINT="http://collector.internal:4318",
                      PREFIXGATE_LEDGER_BODIES="true")
    result = prefixgate("serve", "--host", "0.0.0.0", "--check", env=env)
    assert result.returncode == 1
    lines = dict(line.split(":", 1) for line in result.stdout.splitlines() if not line.startswith((" ", "EXPOSED", "or ")))
    assert lines["bind"].strip() == "0.0.0.0:8080 (reachable beyond this machine)"
    assert lines["caller keys"].strip().startswith("none (anyone may send model requests")
    assert lines["dashboard auth"].strip().startswith("none")
    assert lines["ledger bodies"].strip() == "on for every route (the ledger holds those prompts)"
    assert lines["redis"].strip().startswith("no TLS (cache.internal")
    assert lines["otel export"].strip().startswith("on (OTLP to http://collector.internal:4318")
    assert result.stdout.count("EXPOSED:") == 2 and "close it with admin_token" in result.stdout
    assert "redis-password-0004" not in result.stdout


def test_check_passes_a_closed_configuration_and_reports_each_mode(tmp_path):
    policy = {**KEYED_POLICY, "routes": [{**KEYED_POLICY["routes"][0], "ledger_bodies": True},
                                         {"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]}],
              "keys": [{**KEYED_POLICY["keys"][0], "dashboard": "read"}]}
    env = environment(tmp_path, OPENAI_API_KEY=PROVIDER_KEY, PREFIXGATE_ADMIN_TOKEN=ADMIN,
                      PREFIXGATE_POLICY_FILE=policy_file(tmp_path, policy), PREFIXGATE_REDIS_URL="rediss://cache.internal:6380",
                      PREFIXGATE_OTEL="off")
    result = prefixgate("serve", "--host", "0.0.0.0", "--check", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "caller keys:    virtual (1 key, 1 with read-only dashboard access)" in out
    assert "dashboard auth: admin_token" in out and "ledger bodies:  on for routes chat (" in out
    assert "redis:          TLS (cache.internal)" in out and "otel export:    off" in out
    assert "exposures:      none" in out
    # No provider key on the gateway, no caller keys and no signing upstream routed: callers' own keys are
    # forwarded, not an open relay.
    keyed_only = policy_file(tmp_path, {"routes": [policy["routes"][1]]})
    forwarded = prefixgate("serve", "--host", "0.0.0.0", "--check",
                           env=environment(tmp_path, PREFIXGATE_ADMIN_TOKEN=ADMIN, PREFIXGATE_POLICY_FILE=keyed_only))
    assert forwarded.returncode == 0 and "caller keys:    forwarded" in forwarded.stdout


def test_serve_takes_config_after_the_subcommand(tmp_path):
    config = tmp_path / "prefixgate.yaml"
    config.write_text(f"host: 0.0.0.0\nport: 9123\nadmin_token: {ADMIN}\n")
    keyed_only = policy_file(tmp_path, {"routes": [KEYED_POLICY["routes"][0]]})    # no signing upstream routed
    result = prefixgate("serve", "--config", str(config), "--check",
                        env=environment(tmp_path, PREFIXGATE_POLICY_FILE=keyed_only))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0.0.0.0:9123" in result.stdout and "dashboard auth: admin_token" in result.stdout


def test_a_misspelt_setting_is_named_with_the_closest_key_before_listening(tmp_path):
    config = tmp_path / "prefixgate.yaml"
    config.write_text(f"admn_token: {ADMIN}\nledger_body: true\n")
    port = free_port()
    result = prefixgate("serve", "--config", str(config), "--port", str(port), env=environment(tmp_path))
    out = refused(result, port)
    assert "admn_token: unknown key; did you mean admin_token?" in out and "Extra inputs" not in out
    far = tmp_path / "far.yaml"
    far.write_text("colour: blue\n")
    result = prefixgate("serve", "--config", str(far), "--check", env=environment(tmp_path))
    assert result.returncode == 2 and "colour: unknown key; known keys: admin_token, alert_webhooks, anthropic_base_url" in result.stderr


def test_a_misspelt_policy_key_is_named_with_the_closest_key(tmp_path):
    policy = {"routes": [{"name": "chat", "model": ["gpt-*"], "targets": [{"upstream": "openai"}]}]}
    result = prefixgate("serve", "--check", env=environment(tmp_path, PREFIXGATE_POLICY_FILE=policy_file(tmp_path, policy)))
    assert result.returncode == 2 and "routes.0.model: unknown key; did you mean models?" in result.stderr


AWS = {"AWS_ACCESS_KEY_ID": "AKIDGATEWAYRELAY0001", "AWS_SECRET_ACCESS_KEY": "gateway/relay+secret", "AWS_REGION": "us-east-1"}
BEDROCK_MODEL = "anthropic.claude-haiku-4-5-20251001-v1:0"


@pytest.mark.parametrize("cloud", [{}, AWS, {"GOOGLE_APPLICATION_CREDENTIALS": "/etc/gcp/adc.json",
                                           "GOOGLE_CLOUD_PROJECT": "gateway-project"}],
                         ids=["nothing set (instance role, metadata ADC)", "aws keys", "google adc"])
def test_a_reachable_signing_upstream_without_caller_keys_is_an_open_relay(tmp_path, cloud):
    # Bedrock and Vertex sign with whatever the gateway can resolve, and on EC2/ECS/GKE that resolves from
    # metadata with nothing in the environment: routed and reachable, they are an open relay either way.
    env = environment(tmp_path, PREFIXGATE_ADMIN_TOKEN=ADMIN, **cloud)
    result = prefixgate("serve", "--host", "0.0.0.0", "--check", env=env)
    assert result.returncode == 1, result.stdout
    assert "EXPOSED: model requests from callers with no key spend this gateway's cloud credentials" in result.stdout
    assert "upstreams bedrock, vertex" in result.stdout and "`keys:` in the policy file" in result.stdout
    assert "gateway/relay+secret" not in result.stdout
    port = free_port()
    out = refused(prefixgate("serve", "--host", "0.0.0.0", "--port", str(port), env=env), port)
    assert "cloud credentials, signed for upstreams bedrock, vertex" in out


def test_open_still_serves_a_signing_upstream_and_caller_keys_close_it(tmp_path, monkeypatch):
    from prefixgate.simulation.mock.server import MockContext
    from prefixgate.simulation.mock.server import create_app as mock_app
    from tests.support_services import ServerThread

    for name, value in AWS.items():       # the mock checks SigV4 against its own environment's credentials
        monkeypatch.setenv(name, value)
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 20,
            "messages": [{"role": "user", "content": "Where is my parcel?"}]}
    with ServerThread(mock_app(MockContext())) as mock:
        env = environment(tmp_path, PREFIXGATE_ADMIN_TOKEN=ADMIN, PREFIXGATE_BEDROCK_BASE_URL=mock.url, **AWS)
        port = free_port()
        with serving("--open", env=env, port=port):
            answer = httpx.post(f"http://127.0.0.1:{port}/model/{BEDROCK_MODEL}/invoke", json=body, timeout=30)
            assert answer.status_code == 200, answer.text      # open means open: signed with the gateway's keys
        keyed = policy_file(tmp_path, {"routes": [{"name": "bedrock", "models": ["anthropic.*"],
                                                   "targets": [{"upstream": "bedrock"}]}],
                                       "keys": KEYED_POLICY["keys"]})
        port = free_port()
        with serving(env={**env, "PREFIXGATE_POLICY_FILE": keyed}, port=port):
            url = f"http://127.0.0.1:{port}/model/{BEDROCK_MODEL}/invoke"
            anonymous = httpx.post(url, json=body, timeout=30)
            # Bedrock's own shape for a missing credential: 403 (AWS's UnrecognizedClientException).
            assert anonymous.status_code == 403 and "missing API key" in anonymous.text, anonymous.text
            ok = httpx.post(url, json=body, headers={"authorization": f"Bearer {CALLER_KEY}"}, timeout=30)
            assert ok.status_code == 200, ok.text
