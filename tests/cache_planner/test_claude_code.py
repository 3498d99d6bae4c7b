"""A real coding agent through the gateway: Claude Code (npm `@anthropic-ai/claude-code`, installed outside
the repo) runs `claude -p` several times against `prefixgate serve` in front of `prefixgate mock-providers`.
Its requests carry its own cache markers (system prompt, last message) and a `system` message inside
`messages`; the planner must not move anything between requests, so every request after the first
reads the tools and system prompt the one before it wrote."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from prefixgate.ledger import read_records
from tests.support_stack import running_stack

pytestmark = pytest.mark.slow

INSTALL_DIR = Path(os.environ.get("PREFIXGATE_TEST_NPM_DIR", Path.home() / ".cache" / "prefixgate-tests" / "npm"))
RUNS = 3
# Nothing may leave the machine: no telemetry, update checks, error reports or other side traffic.
QUIET = {"DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
         "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_BUG_COMMAND": "1"}


def claude_binary() -> Path:
    binary = INSTALL_DIR / "node_modules" / ".bin" / "claude"
    if binary.exists():
        return binary
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the Claude Code test needs `npm install @anthropic-ai/claude-code`")
    INSTALL_DIR.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["npm", "install", "--prefix", str(INSTALL_DIR), "--no-audit", "--no-fund",
                           "@anthropic-ai/claude-code"], capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not binary.exists():
        pytest.skip(f"could not install @anthropic-ai/claude-code from npm: {done.stderr[-500:]}")
    return binary


@pytest.fixture(params=["keep", "add", "optimize"])
def gateway(request, tmp_path) -> Iterator[tuple[str, Path, str]]:
    """The gateway with Claude's models routed to Anthropic under each `caller_checkpoints` policy."""
    ledger, policy = tmp_path / "ledger.sqlite", tmp_path / "policy.yaml"
    policy.write_text("routes:\n  - {name: claude, models: ['claude-*'], targets: [{upstream: anthropic}], "
                      f"caller_checkpoints: {request.param}}}\n")
    env = {"ANTHROPIC_API_KEY": "sk-ant-upstream-0123456789", "PREFIXGATE_LEDGER_PATH": str(ledger),
           "PREFIXGATE_POLICY_FILE": str(policy)}
    with running_stack(tmp_path, env) as (gw_url, _):
        yield gw_url, ledger, request.param


def test_claude_code_reads_the_prefix_the_previous_run_wrote(gateway, tmp_path) -> None:
    claude = claude_binary()
    url, ledger, caller_checkpoints = gateway
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_BASE_URL": url,
           "ANTHROPIC_API_KEY": "sk-ant-dummy-caller", **QUIET}
    for i in range(RUNS):
        done = subprocess.run([str(claude), "-p", f"Say hello, run {i}"], cwd=project, env=env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0 and "API Error" not in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    records = [r for r in read_records(str(ledger)) if r["status"] == 200]
    assert len(records) >= RUNS
    # The planner moved no text, and saw (and, under keep, kept) the caller's own markers.
    for r in records:
        assert r["route"] == "claude"
        assert not any(line.startswith("rewrite:") for line in r["explanation"]), r["explanation"]
        assert any(line.startswith(("cache: the caller placed", "cache: caller's")) for line in r["explanation"])
        if caller_checkpoints == "keep":
            assert any("kept as sent" in line for line in r["explanation"])

    def static(r: dict) -> list[str]:
        """The planned prefix's tools and system segments (role:hash:chained-hash:tokens...)."""
        return [s for s in r["segments"] if s.split(":")[0] in ("tools", "system")][:2]

    for before, after in zip(records, records[1:], strict=False):
        # No request after the first changes the prefix the previous one wrote ...
        assert static(after) == static(before)
        # ... and each reads it back: at least the tools and system prompt come from cache.
        static_tokens = sum(int(s.split(":")[3]) for s in static(after))
        assert after["cache_read"] >= static_tokens > 1024, (after["cache_read"], static(after))
    assert records[0]["cache_read"] == 0 and sum(records[0]["cache_writes"].values()) > 0
