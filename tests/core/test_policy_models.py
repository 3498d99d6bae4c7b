"""A policy naming a model the catalogue cannot price, or one its provider has retired, loads (a model newer than
the catalogue is still served) but `serve` says so at start (docs/configuration.md): it used to say nothing
until a budgeted key's request was refused or a retired model was sent."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixgate.cli import main
from prefixgate.config import Settings
from prefixgate.policies import Policy, builtin_upstreams
from prefixgate.policies.catalogued import model_warnings
from prefixgate.providers.rules import default_catalog


@pytest.fixture(autouse=True)
def _no_settings_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.upper().startswith("PREFIXGATE_")]:
        monkeypatch.delenv(name)


def _policy(*routes: dict) -> Policy:
    return Policy.from_dict({"routes": list(routes)}, builtin_upstreams(Settings()))


def test_an_unpriced_and_a_retired_model_are_named_with_their_route() -> None:
    policy = _policy(
        {"name": "typo", "models": ["claude-sonnet-5-5"], "targets": [{"upstream": "anthropic", "model": "claude-sonet-5-5"}]},
        # Anthropic retired Claude Opus 4 on 2026-06-15 (catalogue row, replacement claude-opus-5-5).
        {"name": "old", "models": ["claude-opus-4"], "targets": [{"upstream": "anthropic"}], "on_retired": "refuse"},
        {"name": "fine", "models": ["gpt-5.4", "gpt-5.*"], "targets": [{"upstream": "openai"}]},
        {"name": "own", "models": ["my-finetune"], "targets": [{"upstream": "local"}]},
    )
    assert model_warnings(policy, default_catalog(), date(2026, 11, 27)) == [
        "routes.0.targets.0.model: anthropic model 'claude-sonet-5-5' is not in the catalogue (prefixgate models): "
        "its cost is recorded as unknown, and budgeted keys are refused it unless route 'typo' declares a price or "
        "max_request_usd",
        "routes.1.targets.0: anthropic retired 'claude-opus-4' on 2026-06-15; route 'old' refuses it with a 400 "
        "(on_retired: refuse) (replacement: claude-opus-5-5)",
    ]


def test_a_declared_price_answers_the_unpriced_warning() -> None:
    policy = _policy({"name": "new", "models": ["claude-sonet-5-5"], "targets": [{"upstream": "anthropic"}],
                      "price": {"input": 3, "output": 15}})
    assert model_warnings(policy, default_catalog(), date(2026, 11, 27)) == []


def test_serve_says_it_before_it_starts(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("routes:\n  - name: old\n    models: [claude-opus-4]\n    targets: [{upstream: anthropic}]\n")
    result = CliRunner().invoke(main, ["serve", "--check"], env={"PREFIXGATE_POLICY_FILE": str(policy)})
    assert result.exit_code == 0, result.output
    assert "warning: routes.0.targets.0: anthropic retired 'claude-opus-4' on 2026-06-15" in result.output
