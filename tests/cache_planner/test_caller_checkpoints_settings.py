"""Where `caller_checkpoints` is set: the policy file (per route, per key), `prefixgate plan` and
`prefixgate replay --strategy planner`, and `prefixgate.wrap()`; bad values are clear errors."""

from __future__ import annotations

import json

import anthropic
import pytest
from click.testing import CliRunner

import prefixgate
from prefixgate.cli import main
from prefixgate.config import Settings
from prefixgate.policies import Policy, PolicyError, builtin_upstreams, hash_key
from prefixgate.policies.router import caller_checkpoints_for
from tests.sdk.support_sdk import running_mock_providers

ROUTE = {"name": "a", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]}
BUILTINS = builtin_upstreams(Settings(ledger_path=":memory:"))


def test_policy_sets_it_per_route_and_a_key_overrides():
    policy = Policy.from_dict({"routes": [ROUTE | {"caller_checkpoints": "add"}, ROUTE | {"name": "b", "models": ["x"]}],
                               "keys": [{"name": "k", "key_sha256": hash_key("s"), "caller_checkpoints": "optimize"},
                                        {"name": "j", "key_sha256": hash_key("t")}]}, BUILTINS)
    a, b = policy.routes
    k, j = policy.keys
    assert (a.caller_checkpoints, b.caller_checkpoints) == ("add", "keep")
    assert caller_checkpoints_for(a, None) == "add"
    assert caller_checkpoints_for(a, j) == "add"
    assert caller_checkpoints_for(b, k) == "optimize"


@pytest.mark.parametrize("data,where", [
    ({"routes": [ROUTE | {"caller_checkpoints": "replace"}]}, "routes.0.caller_checkpoints"),
    ({"routes": [ROUTE], "keys": [{"name": "k", "key_sha256": hash_key("s"), "caller_checkpoints": True}]},
     "keys.0.caller_checkpoints"),
])
def test_policy_rejects_a_bad_value_naming_the_key(data, where):
    with pytest.raises(PolicyError, match=f"{where}: must be one of keep, add, optimize"):
        Policy.from_dict(data, BUILTINS)


def one_off(i: int) -> dict:
    """A long one-off prompt marked "system + last message": the markers never pay."""
    return {"t": i * 150, "provider": "anthropic", "model": "claude-sonnet-4-6", "route": "oneoff", "tenant": "acme",
            "output_tokens": 50, "body": {"model": "claude-sonnet-4-6", "max_tokens": 100, "system": [
                {"type": "text", "text": "You summarise reports.", "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": [{"type": "text", "text": f"report {i} " * 3000,
                                                          "cache_control": {"type": "ephemeral"}}]}]}}


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(one_off(i)) for i in range(6)) + "\n")
    return path


def test_plan_command_flag(trace):
    for flag, markers in (("keep", 2), ("optimize", 0)):
        result = CliRunner().invoke(main, ["plan", str(trace), "--caller-checkpoints", flag])
        assert result.exit_code == 0, result.output
        last = json.loads(result.output.splitlines()[-1])
        assert json.dumps(last["body"]).count("cache_control") == markers
    assert any("dropped the caller's" in line for line in last["plan"])
    bad = CliRunner().invoke(main, ["plan", str(trace), "--caller-checkpoints", "replace"])
    assert bad.exit_code == 2 and "'replace' is not one of 'keep', 'add', 'optimize'" in bad.output


def test_replay_command_flag(trace):
    def savings(*flags: str) -> float:
        result = CliRunner().invoke(main, ["replay", str(trace), "--strategy", "planner", "--json", *flags])
        assert result.exit_code == 0, result.output
        return float(json.loads(result.output[result.output.index("{"):])["total"]["savings"])

    assert savings("--caller-checkpoints", "optimize") > savings() == savings("--caller-checkpoints", "keep")
    misuse = CliRunner().invoke(main, ["replay", str(trace), "--caller-checkpoints", "add"])
    assert misuse.exit_code == 2 and "applies to --strategy planner only" in misuse.output


def test_wrap_passes_it_to_the_planner():
    with pytest.raises(ValueError, match="caller_checkpoints=...\\) must be one of keep, add, optimize"):
        prefixgate.wrap(anthropic.Anthropic(api_key="k", base_url="http://127.0.0.1:9"), caller_checkpoints="all")
    with running_mock_providers() as url:
        plain = anthropic.Anthropic(api_key="sk-test-wrap-cc", base_url=url, max_retries=0)
        for mode, expected in (("keep", 2), ("optimize", 0)):
            client = prefixgate.wrap(plain, caller_checkpoints=mode, route="oneoff")
            for i in range(4):
                body = one_off(i)["body"]
                raw = client.messages.with_raw_response.create(**body)
            sent = json.loads(raw.http_request.content)
            assert json.dumps(sent).count("cache_control") == expected, mode
