"""Capture one real request each from Claude Code and the Codex CLI through the gateway, sanitised, as fixtures
for bench/gateway.py (`--workloads claude-code codex`).

Starts `prefixgate mock-providers` and `prefixgate serve` (ledger bodies kept), runs each client once on a small
task that takes a tool call and a second turn (the mock answers the marker `[[mock:call TOOL {args}]]` with
that call), and keeps the largest request each sent: its body as the gateway parsed it, re-encoded compactly
(the IR's round trip is byte-faithful). Sanitising replaces what names this machine or run: the temporary
folders, the home folder, user and host names, the session and user ids and the date the clients write into
their prompts; no key is in a body (keys travel in headers), and the script checks for key-like strings.

The clients are npm packages installed outside the repository (as the tests install them):
`@anthropic-ai/claude-code` in ~/.cache/prefixgate-tests/npm, `@openai/codex` in ~/.cache/prefixgate-test-clients.

    .venv/bin/python bench/capture_clients.py [--only claude-code|codex]
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from gateway import ROOT, free_port, start, stop, wait_ready
from prefixgate.ledger import read_records

sys.path.insert(0, str(ROOT))
from tests.gateway.support_codex import CODEX, codex_config  # noqa: E402  the Codex test's install and CODEX_HOME

FIXTURES = ROOT / "bench" / "fixtures"
CLAUDE = Path.home() / ".cache" / "prefixgate-tests" / "npm" / "node_modules" / ".bin" / "claude"
# Nothing may leave the machine: no telemetry, update checks, error reports or other side traffic.
QUIET = {"DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
         "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_BUG_COMMAND": "1",
         "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
NOTES = "Release checklist\n- bump the version\n- update the changelog\n- tag the release\n"
KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,})")


def run_claude(gw: str, tmp: Path) -> None:
    home, project = tmp / "home", tmp / "project"
    home.mkdir()
    project.mkdir()
    (project / "notes.txt").write_text(NOTES)
    task = (f"Read notes.txt and tell me what the checklist says. "
            f"[[mock:call Read {json.dumps({'file_path': str(project / 'notes.txt')})}]]")
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "ANTHROPIC_BASE_URL": gw,
           "ANTHROPIC_API_KEY": "sk-ant-capture-" + uuid.uuid4().hex, **QUIET}
    done = subprocess.run([str(CLAUDE), "-p", task], cwd=project, env=env, capture_output=True, text=True,
                          timeout=240, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"claude failed: {done.stdout[-1500:]}{done.stderr[-1500:]}")


def run_codex(gw: str, tmp: Path) -> None:
    home, work = tmp / "codex-home", tmp / "work"
    home.mkdir()
    work.mkdir()
    (work / "notes.txt").write_text(NOTES)
    codex_config(home, gw + "/v1", "gpt-5.1")
    task = 'Show me notes.txt. [[mock:call exec_command {"cmd":"cat notes.txt"}]]'
    env = {**os.environ, **QUIET, "CODEX_HOME": str(home), "HOME": str(tmp), "PREFIXGATE_TEST_KEY": "sk-capture-" + uuid.uuid4().hex}
    done = subprocess.run([str(CODEX), "exec", "--skip-git-repo-check", task], cwd=work, env=env,
                          capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"codex failed: {done.stdout[-1500:]}{done.stderr[-1500:]}")


def sanitise(text: str, tmp: Path) -> str:
    """`text` with what names this machine or run replaced by neutral values."""
    for folder in {str(tmp.resolve()), str(tmp)}:
        text = text.replace(folder, "/home/dev")
        text = text.replace(re.sub(r"[^A-Za-z0-9]", "-", folder), "-home-dev")    # Claude Code's project folder names
    text = text.replace(str(Path.home()) + "/", "/home/dev/").replace(socket.gethostname(), "devbox")
    user = getpass.getuser()
    if user != "root":      # "root" is a word prompts use
        text = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(user)}(?![A-Za-z0-9_])", "dev", text)
    text = re.sub(r"OS Version: [^\\\n]*", "OS Version: Linux 6.8.0-generic", text)
    # Ids of the run: sessions, devices (Claude Code's metadata.user_id), prompt cache keys.
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "00000000-0000-4000-8000-000000000000", text)
    text = re.sub(r"\b[0-9a-f]{64}\b", "0" * 64, text)
    # The date the clients write into their prompts.
    text = re.sub(r"\b20\d\d-\d\d-\d\d\b", "2026-11-27", text)
    if KEYLIKE.search(text):
        raise SystemExit(f"a key-like string is left in the capture: {KEYLIKE.search(text).group(0)[:8]}...")
    return text


def capture(name: str, dialect: str, run, tmp: Path) -> None:
    ledger = tmp / "ledger.sqlite"
    procs: list[subprocess.Popen] = []
    try:
        mock_port, gw_port = free_port(), free_port()
        procs.append(start([str(ROOT / ".venv" / "bin" / "prefixgate"), "mock-providers", "--port", str(mock_port)], {},
                           tmp / "mock.log"))
        wait_ready(mock_port, "/health", 60)
        mock = f"http://127.0.0.1:{mock_port}"
        env = {f"PREFIXGATE_{p}_BASE_URL": mock for p in ("OPENAI", "ANTHROPIC", "GEMINI")}
        env.update(PREFIXGATE_LEDGER_PATH=str(ledger), PREFIXGATE_LEDGER_BODIES="true", OPENAI_API_KEY="",
                   ANTHROPIC_API_KEY="")
        procs.append(start([str(ROOT / ".venv" / "bin" / "prefixgate"), "serve", "--port", str(gw_port)], env,
                           tmp / "gateway.log"))
        wait_ready(gw_port, "/health", 60)
        run(f"http://127.0.0.1:{gw_port}", tmp)
        time.sleep(1.0)     # the ledger writer's last records
        records = [r for r in read_records(str(ledger)) if r["dialect"] == dialect and r["status"] == 200 and r["body"]]
    finally:
        stop(procs)
    if not records:
        raise SystemExit(f"{name}: no {dialect} request with a body in the ledger")
    body = max(records, key=lambda r: len(r["body"]))["body"]
    text = sanitise(json.dumps(json.loads(body), ensure_ascii=False, separators=(",", ":")), tmp)
    FIXTURES.mkdir(exist_ok=True)
    out = FIXTURES / f"{name}.json"
    out.write_text(text + "\n")
    print(f"{name}: {len(records)} requests, kept the largest ({len(text.encode()) / 1000:.1f} KB) as {out.relative_to(ROOT)}",
          file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["claude-code", "codex"])
    args = parser.parse_args()
    for name, dialect, run, binary in (("claude-code", "anthropic", run_claude, CLAUDE), ("codex", "responses", run_codex, CODEX)):
        if args.only and args.only != name:
            continue
        if not binary.exists():
            raise SystemExit(f"{binary} not found: install it with npm (see this script's docstring)")
        capture(name, dialect, run, Path(tempfile.mkdtemp(prefix="pg-capture-")))


if __name__ == "__main__":
    main()
