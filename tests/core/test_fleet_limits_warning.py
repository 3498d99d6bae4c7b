"""Replicas that share a PostgreSQL ledger but no Redis each count a key's budget and rate limit alone, so
behind a load balancer a key spends its budget once per replica: `serve` says so at start (docs/configuration.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.test_policy_credentials import _no_keys_from_outside, start_warnings  # noqa: F401 (a fixture)

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


def _warnings(tmp_path: Path, policy: str, **env: str) -> list[str]:
    return start_warnings(tmp_path, policy, "ledger_url", ANTHROPIC_API_KEY="sk-ant-fleet-0001", **env)


def test_a_shared_ledger_without_shared_counters_is_warned_about(tmp_path: Path) -> None:
    [line] = _warnings(tmp_path, POLICY, PREFIXGATE_LEDGER_URL="postgresql://pg@db.internal/ledger")
    assert "keys team-a alone" in line and "redis_url" in line      # team-b has no budget or rate limit


@pytest.mark.parametrize("env", [{}, {"PREFIXGATE_LEDGER_URL": "postgresql://pg@db.internal/ledger",
                                      "PREFIXGATE_REDIS_URL": "redis://cache.internal:6379/0"}])
def test_one_replica_or_shared_counters_are_not(tmp_path: Path, env: dict[str, str]) -> None:
    assert _warnings(tmp_path, POLICY, **env) == []
    assert _warnings(tmp_path, POLICY.split("    budget:")[0] + "\n", PREFIXGATE_LEDGER_URL="postgresql://pg@db/l") == []
