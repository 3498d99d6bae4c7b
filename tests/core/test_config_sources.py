"""Where settings come from (docs/configuration.md): a YAML file named by `serve --config FILE`, by
`prefixgate --config FILE serve` (before the command) or by PREFIXGATE_CONFIG, with PREFIXGATE_* variables
overriding the file. Checked through the CLI's `serve --check`, which prints the bind it would use."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixgate.cli import main


@pytest.fixture(autouse=True)
def _no_settings_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith("PREFIXGATE_")]:
        monkeypatch.delenv(name)


def _check(*args: str, env: dict[str, str] | None = None) -> str:
    return CliRunner().invoke(main, list(args), env=env).output


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "prefixgate.yaml"
    path.write_text("host: 127.0.0.2\nport: 9345\n")
    return path


def test_the_file_after_the_command(config: Path) -> None:
    assert "bind:           127.0.0.2:9345" in _check("serve", "--config", str(config), "--check")


def test_the_file_before_the_command(config: Path) -> None:
    assert "bind:           127.0.0.2:9345" in _check("--config", str(config), "serve", "--check")


def test_the_file_from_the_environment(config: Path) -> None:
    assert "bind:           127.0.0.2:9345" in _check("serve", "--check", env={"PREFIXGATE_CONFIG": str(config)})


def test_environment_variables_override_the_file(config: Path) -> None:
    out = _check("--config", str(config), "serve", "--check", env={"PREFIXGATE_PORT": "9346"})
    assert "bind:           127.0.0.2:9346" in out


def test_without_a_file_the_defaults() -> None:
    assert "bind:           127.0.0.1:8080" in _check("serve", "--check")


def test_flags_override_the_environment_and_the_file(config: Path) -> None:
    # docs/configuration.md: flags, then PREFIXGATE_* variables, then the file.
    out = _check("--config", str(config), "serve", "--check", "--port", "9347", env={"PREFIXGATE_PORT": "9346"})
    assert "bind:           127.0.0.2:9347" in out
