"""The real Codex CLI (`codex exec`, npm `@openai/codex`) through the gateway to mock-providers: it completes
a task that takes a tool call and a second turn, and the later request reads the prefix from cache.
Nothing leaves loopback: the model provider's base_url is the gateway."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from prefixgate.ledger import read_records
from prefixgate.providers.mock.server import MockContext
from prefixgate.providers.mock.server import create_app as mock_app
from tests.gateway.support_codex import codex_binary, codex_config
from tests.gateway.support_gateway import running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

pytestmark = pytest.mark.slow
TASK = 'Check the shell works. [[mock:call exec_command {"cmd":"echo prefixgate-ok"}]]'


def test_codex_exec_completes_a_tool_task_and_reads_cache_on_later_requests(tmp_path):
    codex = codex_binary()
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path)
        with running_gateway(settings) as gw:
            home, work = tmp_path / "codex-home", tmp_path / "work"
            codex_config(home, gw.url + "/v1", "gpt-5.1")
            work.mkdir()
            env = {**os.environ, "CODEX_HOME": str(home), "PREFIXGATE_TEST_KEY": "sk-test-" + uuid.uuid4().hex,
                   "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
            done = subprocess.run([str(codex), "exec", "--skip-git-repo-check", TASK], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
            wait_until(lambda: len(read_records(settings.ledger_path)) >= 2, 10, "two ledger records")
    records = [r for r in read_records(settings.ledger_path) if r["dialect"] == "responses"]
    assert len(records) >= 2 and all(r["status"] == 200 for r in records)
    first, later = records[0], records[-1]
    # The tool call, then its output in a second request: the task took two turns and ended in text.
    assert later["uncached_input"] + later["cache_read"] > first["uncached_input"] + first["cache_read"]
    assert later["cache_read"] >= 1024 and first["cache_read"] == 0
    assert later["stream"] and later["cost_usd"] is not None
