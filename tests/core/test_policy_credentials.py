"""An upstream that will answer every request 401 for want of the gateway's own key is named at start
(docs/configuration.md): `serve` used to start without a word, and each request then failed on its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixgate.cli import main

ROUTER = """upstreams:
  router: {kind: openai_compatible, provider: openrouter, api_key_env: TEAM_OPENROUTER_KEY}
routes:
  - name: r
    models: ["openai/gpt-5.4"]
    targets: [{upstream: router}]
"""
KEYED = """routes:
  - name: claude
    models: [claude-sonnet-5-5]
    targets: [{upstream: anthropic}]
keys:
  - name: team-a
    key_sha256: """ + "ab" * 32 + "\n"


@pytest.fixture(autouse=True)
def _no_keys_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.upper().startswith("PREFIXGATE_") or k.endswith("_API_KEY")]:
        monkeypatch.delenv(name)


def start_warnings(tmp_path: Path, policy: str | None, about: str = "upstreams.", **env: str) -> list[str]:
    """`serve --check`'s warning lines about `about` (a key path's start) for `policy` and `env`."""
    if policy is not None:
        (tmp_path / "policy.yaml").write_text(policy)
        env["PREFIXGATE_POLICY_FILE"] = str(tmp_path / "policy.yaml")
    result = CliRunner().invoke(main, ["serve", "--check"], env=env)
    assert result.exit_code in (0, 1), result.output
    return [line for line in result.output.splitlines() if line.startswith(f"warning: {about}")]



def test_a_compatible_provider_without_its_key(tmp_path: Path) -> None:
    assert start_warnings(tmp_path, ROUTER) == [
        "warning: upstreams.router: TEAM_OPENROUTER_KEY is not set, so every request routed to 'router' is answered "
        "401 (no credentials for the upstream)"]
    assert start_warnings(tmp_path, ROUTER, TEAM_OPENROUTER_KEY="sk-or-v1-" + "5" * 40) == []


def test_a_keyed_gateway_without_the_provider_key(tmp_path: Path) -> None:
    # Callers send gateway keys, so none of theirs can stand in for ANTHROPIC_API_KEY.
    assert start_warnings(tmp_path, KEYED) == [
        "warning: upstreams.anthropic: ANTHROPIC_API_KEY is not set, so every request routed to 'anthropic' is "
        "answered 401 (no credentials for the upstream)"]


def test_an_open_gateway_forwards_callers_keys_so_says_nothing(tmp_path: Path) -> None:
    assert start_warnings(tmp_path, None) == []
