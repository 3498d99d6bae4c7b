"""A settings or policy file (or variable) the gateway cannot use stops `serve` with one line naming the file or
variable and the key at fault, exit status 2 (a usage error), never a traceback, and nothing is silently
dropped (docs/configuration.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from prefixgate.cli import main
from prefixgate.config import Settings
from prefixgate.policies import Policy, PolicyError, builtin_upstreams
from prefixgate.yaml_file import read_mapping

ROUTE = "routes:\n  - name: claude\n    models: [claude-sonnet-5-5]\n    targets: [{upstream: anthropic}]\n"
KEY = "keys:\n  - name: team-a\n    key_sha256: " + "ab" * 32 + "\n"


@pytest.fixture(autouse=True)
def _no_settings_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.upper().startswith("PREFIXGATE_")]:
        monkeypatch.delenv(name)


def _check(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, [*args, "serve", "--check"], env=env)


def _refused(result: Result, *said: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    for text in said:
        assert text in result.output, result.output


def test_a_config_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "prefixgate.yaml"
    path.write_bytes(b"port: 9000\nhost: caf\xe9\n")     # Latin-1, as an old editor saves it
    _refused(_check("--config", str(path)), f"config file {path} is not UTF-8 text: byte 0xe9 at offset 20")


def test_a_setting_written_twice_is_refused_not_the_first_dropped(tmp_path: Path) -> None:
    path = tmp_path / "prefixgate.yaml"
    path.write_text("admin_token: 7c1e0a9b3f5d2e8a6c4b1d9f\nport: 9000\nadmin_token: ''\n")
    _refused(_check("--config", str(path)), "key 'admin_token' appears twice (lines 1 and 3)")


def test_cors_origins_from_the_environment_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    # The variable used to end `serve` in a pydantic-settings traceback unless it held a JSON list.
    origins = "https://app.example.com, https://admin.example.com"
    assert CliRunner().invoke(main, ["serve", "--check"], env={"PREFIXGATE_CORS_ORIGINS": origins}).exit_code == 0
    monkeypatch.setenv("PREFIXGATE_CORS_ORIGINS", origins)
    assert Settings().cors_origins == ["https://app.example.com", "https://admin.example.com"]


def test_a_bad_value_names_where_it_came_from(tmp_path: Path) -> None:
    path = tmp_path / "prefixgate.yaml"
    path.write_text("port: eighty\n")
    _refused(_check("--config", str(path)), f"config file {path}: port: Input should be a valid integer")
    _refused(_check(env={"PREFIXGATE_CONNECT_TIMEOUT_S": "soon"}), "PREFIXGATE_CONNECT_TIMEOUT_S: Input should be")


def test_an_infinite_timeout_is_refused() -> None:
    _refused(_check(env={"PREFIXGATE_CONNECT_TIMEOUT_S": "inf"}), "PREFIXGATE_CONNECT_TIMEOUT_S: Input should be a finite number")


@pytest.mark.parametrize("usd", [".nan", ".inf"])
def test_a_budget_that_is_not_a_finite_number_is_refused(tmp_path: Path, usd: str) -> None:
    # A NaN or infinite budget used to load; admission then raised on every request of the key.
    policy = tmp_path / "policy.yaml"
    policy.write_text(ROUTE + KEY + f"    budget: {{usd: {usd}}}\n")
    _refused(_check(env={"PREFIXGATE_POLICY_FILE": str(policy)}),
             f"policy file {policy}: keys.0.budget.usd: expected a finite number, got {usd[1:]}")
    data = {"routes": [{"name": "claude", "models": ["claude-sonnet-5-5"], "targets": [{"upstream": "anthropic"}]}],
            "keys": [{"name": "team-a", "key_sha256": "ab" * 32, "budget": {"usd": float(usd[1:])}}]}
    with pytest.raises(PolicyError, match=r"keys\.0\.budget\.usd: expected a non-negative number"):
        Policy.from_dict(data, builtin_upstreams(Settings()))


def test_a_policy_error_names_the_policy_file(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(ROUTE + KEY + "    budget: {usd: 5, budgte: 3}\n")
    _refused(_check(env={"PREFIXGATE_POLICY_FILE": str(policy)}),
             f"policy file {policy}: keys.0.budget.budgte: unknown key")


def test_a_policy_that_is_a_list_says_so(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("- name: claude\n  models: [claude-sonnet-5-5]\n")
    _refused(_check(env={"PREFIXGATE_POLICY_FILE": str(policy)}), f"policy file {policy} must hold a mapping")


def test_a_key_written_twice_in_the_policy_is_refused(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(ROUTE + KEY + "    budget: {usd: 5}\n    budget: {usd: 500}\n")
    _refused(_check(env={"PREFIXGATE_POLICY_FILE": str(policy)}), "key 'budget' appears twice (lines 8 and 9)")


def test_yaml_merge_keys_still_override(tmp_path: Path) -> None:
    # `<<: *base` then a key of the base again is YAML's override, not a key written twice.
    policy = tmp_path / "policy.yaml"
    policy.write_text("base: &base {a: 1, b: 2}\nover:\n  <<: *base\n  b: 3\n")
    assert read_mapping(policy, "policy file") == {"base": {"a": 1, "b": 2}, "over": {"a": 1, "b": 3}}


def test_files_the_gateway_opens_as_it_starts_are_checked_first(tmp_path: Path) -> None:
    # Each used to pass `serve --check` and end `serve` in a traceback with exit status 3 as it started.
    providers = tmp_path / "providers.toml"
    providers.write_text("[anthropic\n")
    _refused(_check(env={"PREFIXGATE_PROVIDERS_FILE": str(providers)}), f"providers file {providers} does not parse")
    providers.write_bytes(b"# caf\xe9\n")
    _refused(_check(env={"PREFIXGATE_PROVIDERS_FILE": str(providers)}),
             f"providers file {providers} is not UTF-8 text: byte 0xe9 at offset 5")
    _refused(_check(env={"PREFIXGATE_LEDGER_PATH": str(tmp_path)}), f"ledger_path {tmp_path} is a directory")
    _refused(_check(env={"PREFIXGATE_LEDGER_PATH": str(tmp_path / "no" / "l.sqlite")}),
             f"its folder {tmp_path / 'no'} does not exist")
    _refused(_check(env={"PREFIXGATE_LOG_LEVEL": "loud"}), "PREFIXGATE_LOG_LEVEL: log_level must be one of")


def test_a_refused_url_never_echoes_what_may_be_a_password() -> None:
    result = _check(env={"PREFIXGATE_REDIS_URL": "http://:hunter2hunter2@cache.internal:6379"})
    _refused(result, "redis_url must be a redis://, rediss:// or unix:// URL, got http://...")
    result = _check(env={"PREFIXGATE_REDIS_URL": "hunter2hunter2"})      # the password pasted alone
    _refused(result, "got a value with no URL scheme")
    result = _check(env={"PREFIXGATE_LEDGER_URL": "hunter2hunter2"})
    _refused(result, "ledger_url must be a postgresql:// URL")
    assert "hunter2" not in result.output


@pytest.mark.parametrize("rpm", ["0.5", "2.9"])
def test_a_fractional_rate_limit_is_refused_not_rounded_down(tmp_path: Path, rpm: str) -> None:
    # int() made 0.5 requests a minute 0, which counts as no limit: the key could send without bound.
    policy = tmp_path / "policy.yaml"
    policy.write_text(ROUTE + KEY + f"    rate_limit: {{requests_per_minute: {rpm}}}\n")
    _refused(_check(env={"PREFIXGATE_POLICY_FILE": str(policy)}),
             f"keys.0.rate_limit.requests_per_minute: expected a whole number of 0 or more (0: no limit), got {rpm}")


def test_ledger_export_from_no_ledger_leaves_no_files_behind(tmp_path: Path) -> None:
    # sqlite created the missing ledger (an empty file) and the export emptied the trace named, then said
    # "no such table: requests".
    trace = tmp_path / "trace.jsonl"
    trace.write_text("kept\n")
    missing = tmp_path / "prefixgate-ledger.sqlite"
    result = CliRunner().invoke(main, ["ledger", "export", "--trace", str(trace)], env={"PREFIXGATE_LEDGER_PATH": str(missing)})
    assert result.exit_code == 2 and f"no ledger at {missing}" in result.output
    assert not missing.exists() and trace.read_text() == "kept\n"
    other = tmp_path / "notes.db"
    other.write_bytes(b"")
    result = CliRunner().invoke(main, ["ledger", "export", "--trace", str(trace), "--ledger", str(other)])
    assert result.exit_code == 1 and f"{other} is not a prefixgate ledger" in result.output
    assert trace.read_text() == "kept\n"


def test_an_upstream_url_refused_never_echoes_its_password(tmp_path: Path) -> None:
    # A self-hosted server behind basic auth, its scheme misspelt: the whole URL, password and all, was echoed.
    policy = tmp_path / "policy.yaml"
    policy.write_text("upstreams:\n  vllm: {kind: openai_compatible, url: 'htps://gate:hunter2hunter2@vllm.internal:8000'}\n"
                      "routes:\n  - name: own\n    models: [my-model]\n    targets: [{upstream: vllm}]\n")
    result = _check(env={"PREFIXGATE_POLICY_FILE": str(policy)})
    _refused(result, "upstreams.vllm.url: an http(s) URL is required for kind openai_compatible, got htps://...")
    assert "hunter2" not in result.output


@pytest.mark.parametrize(("where", "message"), [
    ("routes.0.priority", "routes.0.priority: must be one of high, normal, low, got ['high']"),
    ("routes.0.targets.0.upstream", "routes.0.targets.0: unknown upstream ['high']"),
    ("keys.0.budget.period", "keys.0.budget.period: must be one of"),
    ("keys.0.routes.0", "keys.0.routes: unknown routes [['high']]"),
    ("routes.0.keepalive.mode", "routes.0.keepalive.mode: must be on or off, got ['high']"),
])
def test_a_list_where_a_name_belongs_is_named_not_a_type_error(where: str, message: str) -> None:
    # `priority: [high]` (a list where one name belongs) raised TypeError: unhashable type 'list', a traceback.
    data = {"routes": [{"name": "claude", "models": ["claude-sonnet-5-5"], "targets": [{"upstream": "anthropic"}],
                        "keepalive": {"mode": "on", "route_usd": 1, "key_usd": 1}}],
            "keys": [{"name": "team-a", "key_sha256": "ab" * 32, "routes": ["claude"], "budget": {"usd": 5}}]}
    *parents, last = [int(p) if p.isdigit() else p for p in where.split(".")]
    node = data
    for p in parents:
        node = node[p]
    node[last] = ["high"]
    with pytest.raises(PolicyError) as e:
        Policy.from_dict(data, builtin_upstreams(Settings()))
    assert str(e.value).startswith(message), str(e.value)


def test_an_upstream_base_url_without_a_scheme_is_refused() -> None:
    # `localhost:8200` loaded, and every request to that provider then failed one by one.
    _refused(_check(env={"PREFIXGATE_ANTHROPIC_BASE_URL": "localhost:8200"}),
             "PREFIXGATE_ANTHROPIC_BASE_URL: an http:// or https:// URL is required, got a value with no URL scheme")
    _refused(_check(env={"PREFIXGATE_BACKEND_URL": "ftp://vllm.internal"}), "PREFIXGATE_BACKEND_URL: an http:// or https://")
    assert _check(env={"PREFIXGATE_ANTHROPIC_BASE_URL": "http://127.0.0.1:8200"}).exit_code == 0


def test_a_bad_alert_webhook_variable_is_refused_before_start() -> None:
    # It passed `serve --check`, then ended `serve`'s start-up and `alerts list` in a ValueError traceback.
    env = {"PREFIXGATE_ALERT_WEBHOOKS": "https://hooks.example.com/T0/B0/ok, hooks.example.com/T0/B1/hunter2hunter2"}
    result = _check(env=env)
    _refused(result, "PREFIXGATE_ALERT_WEBHOOKS: URL #1: an http:// or https:// URL is required")
    assert "hunter2" not in result.output
    _refused(CliRunner().invoke(main, ["alerts", "list"], env=env), "PREFIXGATE_ALERT_WEBHOOKS: URL #1")


@pytest.mark.parametrize("secret", ["x", "secret", "changeme"])
def test_a_weak_tenant_secret_is_refused(secret: str) -> None:
    # Tenants' cache salts and isolation tags are HMACs under it; `x` loaded and made them guessable.
    _refused(_check(env={"PREFIXGATE_TENANT_SECRET": secret}),
             "PREFIXGATE_TENANT_SECRET: tenant_secret must be at least 16 characters and not a sample value")
