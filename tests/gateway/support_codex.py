"""The Codex CLI (npm `@openai/codex`) for tests: installed once into a folder outside the repo
(~/.cache/prefixgate-test-clients), never into the repository; tests skip with a message when npm is absent."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CLIENTS = Path.home() / ".cache" / "prefixgate-test-clients"
CODEX = CLIENTS / "node_modules" / ".bin" / "codex"


def codex_binary() -> Path:
    """The codex executable, installing the package on first use; skips the test when it cannot be had."""
    if CODEX.exists():
        return CODEX
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the Codex CLI test needs `npm install @openai/codex`")
    CLIENTS.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(CLIENTS), "@openai/codex"],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not CODEX.exists():
        pytest.skip(f"could not install @openai/codex from npm: {done.stderr.strip()[-300:]}")
    return CODEX


def codex_config(home: Path, base_url: str, model: str) -> None:
    """A CODEX_HOME whose model provider is `base_url` over the Responses API, with no retries."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'''model = "{model}"
model_provider = "gateway"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.gateway]
name = "prefixgate"
base_url = "{base_url}"
env_key = "PREFIXGATE_TEST_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
''')
