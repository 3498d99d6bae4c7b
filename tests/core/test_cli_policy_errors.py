"""A bad policy file stops every command that loads it with one line starting `policy file FILE:`, as
docs/configuration.md promises, and exit status 2: `alerts list` and `alerts test` used to say
`policy: policy file FILE: ...`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixgate.cli import main

FILES = {
    "not YAML": ("routes: [\n", "is not valid YAML"),
    "a misspelt key": ("routes:\n  - {name: support, modles: [claude-sonnet-5-5]}\n",
                       "routes.0.modles: unknown key; did you mean models?"),
}


@pytest.mark.parametrize("command", [["serve", "--check"], ["alerts", "list"], ["alerts", "test"]])
@pytest.mark.parametrize("fault", FILES)
def test_a_bad_policy_file_is_one_line_naming_it(tmp_path: Path, command: list[str], fault: str) -> None:
    text, says = FILES[fault]
    policy = tmp_path / "policy.yaml"
    policy.write_text(text, encoding="utf-8")
    env = {"PREFIXGATE_POLICY_FILE": str(policy), "PREFIXGATE_LEDGER_PATH": str(tmp_path / "ledger.sqlite")}
    result = CliRunner().invoke(main, command, env=env)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    assert errors[0].startswith(f"Error: policy file {policy}"), errors[0]
    assert says in errors[0]
    assert "Traceback" not in result.output
