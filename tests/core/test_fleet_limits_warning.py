"""Replicas that share a PostgreSQL ledger but no Redis each count a key's budget and rate limit alone, so
behind a load balancer a key spends its budget once per replica: `serve` says so at start (docs/configuration.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixgate.cli import main

POLICY = """routes:
  - name: claude
    models: [claude-sonnet-5-5]
    targets: [{upstream: anthropic}]
keys:
  - name: team-a
    key_sha256: """ + "ab" * 32 + """
    budget: {usd: 100, period: month}
  - name: team-b
    key_sha256: """ + "cd" * 32 + "\n"


@pytest.fixture(autouse=True)
def _nothing_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.upper().startswith("PREFIXGATE_") or k.endswith("_API_KEY")]:
        monkeypatch.delenv(name)


def _warnings(tmp_path: Path, policy: str, **env: str) -> list[str]:
    (tmp_path / "policy.yaml").write_text(policy)
    env = {"PREFIXGATE_POLICY_FILE": str(tmp_path / "policy.yaml"), "ANTHROPIC_API_KEY": "sk-ant-fleet-0001", **env}
    result = CliRunner().invoke(main, ["serve", "--check"], env=env)
    assert result.exit_code in (0, 1), result.output
    return [line for line in result.output.splitlines() if line.startswith("warning: ledger_url")]


def test_a_shared_ledger_without_shared_counters_is_warned_about(tmp_path: Path) -> None:
    [line] = _warnings(tmp_path, POLICY, PREFIXGATE_LEDGER_URL="postgresql://pg@db.internal/ledger")
    assert "keys team-a alone" in line and "redis_url" in line      # team-b has no budget or rate limit


@pytest.mark.parametrize("env", [{}, {"PREFIXGATE_LEDGER_URL": "postgresql://pg@db.internal/ledger",
                                      "PREFIXGATE_REDIS_URL": "redis://cache.internal:6379/0"}])
def test_one_replica_or_shared_counters_are_not(tmp_path: Path, env: dict[str, str]) -> None:
    assert _warnings(tmp_path, POLICY, **env) == []
    assert _warnings(tmp_path, POLICY.split("    budget:")[0] + "\n", PREFIXGATE_LEDGER_URL="postgresql://pg@db/l") == []
