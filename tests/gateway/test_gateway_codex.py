"""The real Codex CLI (`codex exec`, npm `@openai/codex`) through the gateway to mock-providers: it completes
a task that takes a tool call and a second turn, and the later request reads the prefix from cache; separate
sessions (each with its own prompt_cache_key) share the instructions' cache only on a `prompt_cache_key: derive` route.
Nothing leaves loopback: the model provider's base_url is the gateway."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from prefixgate.ledger import read_records
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_codex import codex_binary, codex_config
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

pytestmark = pytest.mark.slow
TASK = 'Check the shell works. [[mock:call exec_command {"cmd":"echo prefixgate-ok"}]]'


def codex_runs(tmp_path, prompts: list[str], policy: dict | None = None, model: str = "gpt-5.4") -> list[dict]:
    """One `codex exec` session per prompt (each sends its own prompt_cache_key), through a gateway with
    `policy` in front of mock-providers; the Responses requests' ledger records, oldest first."""
    codex = codex_binary()
    tmp_path.mkdir(exist_ok=True)
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path)
        with running_gateway(settings, **({"policy": policy_for(settings, policy)} if policy else {})) as gw:
            home, work = tmp_path / "codex-home", tmp_path / "work"
            codex_config(home, gw.url + "/v1", model)
            work.mkdir()
            env = {**os.environ, "CODEX_HOME": str(home), "PREFIXGATE_TEST_KEY": "sk-test-" + uuid.uuid4().hex,
                   "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
            for n, prompt in enumerate(prompts):
                done = subprocess.run([str(codex), "exec", "--skip-git-repo-check", prompt], cwd=work, env=env,
                                      capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
                assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
                wait_until(lambda n=n: len(read_records(settings.ledger_path)) >= n + 1, 10, "the session's record")
    return [r for r in read_records(settings.ledger_path) if r["dialect"] == "responses"]


def test_codex_exec_completes_a_tool_task_and_reads_cache_on_later_requests(tmp_path):
    records = codex_runs(tmp_path, [TASK])
    assert len(records) >= 2 and all(r["status"] == 200 for r in records)
    first, later = records[0], records[-1]
    # The tool call, then its output in a second request: the task took two turns and ended in text.
    assert later["uncached_input"] + later["cache_read"] > first["uncached_input"] + first["cache_read"]
    assert later["cache_read"] >= 1024 and first["cache_read"] == 0
    assert later["stream"] and later["cost_usd"] is not None


def _codex_sessions(tmp_path, mode: str, sessions: int, model: str = "gpt-5.4") -> list[dict]:
    """`sessions` one-request Codex sessions on a route whose prompt_cache_key is `mode`."""
    policy = {"routes": [{"name": "codex", "models": ["gpt-*"], "targets": [{"upstream": "openai"}],
                          "prompt_cache_key": mode}]}
    records = codex_runs(tmp_path, [f"Say hello, session {n}." for n in range(sessions)], policy, model)
    assert len(records) == sessions and all(r["status"] == 200 for r in records)
    return records


def test_codex_sessions_share_the_instructions_cache_on_a_derive_route(tmp_path):
    # Each Codex session sends its own prompt_cache_key: passed as sent, each lands on a cold machine.
    kept = _codex_sessions(tmp_path / "keep", "keep", 2)
    assert len({r["prompt_cache_key"] for r in kept}) == 2
    assert [r["cache_read"] for r in kept] == [0, 0]
    # Derived from the static prefix (tools, instructions), the sessions share one key and one machine.
    derived = _codex_sessions(tmp_path / "derive", "derive", 3)
    assert len({r["prompt_cache_key"] for r in derived}) == 1 and derived[0]["cache_key_mode"] == "derive"
    assert derived[0]["cache_read"] == 0
    assert all(r["cache_read"] >= 1024 for r in derived[1:]), [r["cache_read"] for r in derived]


def test_codex_on_gpt_6_is_accepted_and_its_sessions_share_the_instructions(tmp_path):
    """On GPT-6 models Codex sends its tools as an `additional_tools` input item and its instructions as developer
    messages, each item with a new `id` on every request. The gateway once refused the item type (400), and then
    took the ids for content: each session's prefix looked new, so nothing was cached (GPT-5.6+ writes at 1.25x)."""
    derived = _codex_sessions(tmp_path, "derive", 3, model="gpt-6.2-sol")
    assert len({r["prompt_cache_key"] for r in derived}) == 1
    assert derived[0]["cache_read"] == 0
    assert all(r["cache_read"] >= 1024 for r in derived[1:]), [r["cache_read"] for r in derived]
