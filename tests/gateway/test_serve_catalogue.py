"""`serve` reads the operator's providers file once: the start-up check's parse is the one the gateway runs on."""

from __future__ import annotations

from pathlib import Path

import uvicorn
from click.testing import CliRunner
from starlette.testclient import TestClient

from prefixgate.cli import main
from prefixgate.providers import rules


def test_serve_parses_the_providers_file_once_and_serves_with_that_catalogue(tmp_path, monkeypatch):
    providers = tmp_path / "providers.toml"
    providers.write_text("")        # the packaged rules, unchanged
    reads: list[Path] = []
    read = rules._read_user
    monkeypatch.setattr(rules, "_read_user", lambda path: reads.append(path) or read(path))
    served = []

    def run(app, **_options) -> None:      # instead of listening: start the app and stop it
        with TestClient(app):
            served.append(app.state.proxy.catalog)

    monkeypatch.setattr(uvicorn, "run", run)
    env = {"PREFIXGATE_PROVIDERS_FILE": str(providers), "PREFIXGATE_LEDGER_PATH": str(tmp_path / "ledger.sqlite"),
           "PREFIXGATE_CONFIG": ""}
    result = CliRunner().invoke(main, ["serve"], env=env)
    assert result.exit_code == 0, result.output
    assert reads == [providers]
    assert served and served[0].openai is not None
