"""`prefixgate mock-providers` and `prefixgate serve` as separate processes, the way a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from tests.support_services import http_ok, start_on_free_port


def policy_env(tmp: Path, policy: dict, **extra: str) -> dict[str, str]:
    """A `running_stack` gateway's environment for `policy` (written to `tmp`): its ledger in `tmp`, its own
    Gemini and OpenAI keys, and the mock's Vertex project and token; `extra` added (an admin token, more keys)."""
    (tmp / "policy.json").write_text(json.dumps(policy))
    return {"PREFIXGATE_POLICY_FILE": str(tmp / "policy.json"), "PREFIXGATE_LEDGER_PATH": str(tmp / "ledger.sqlite"),
            "GEMINI_API_KEY": "AIzaGatewayOwnKey0000000000000", "OPENAI_API_KEY": "sk-gateway-own-0000",
            "GOOGLE_CLOUD_PROJECT": "gw-project", "GOOGLE_CLOUD_LOCATION": "us-east5",
            "PREFIXGATE_VERTEX_ACCESS_TOKEN": "mock-vertex-token", **extra}


def slowed(tmp: Path, models: Iterable[str], fault: str = "latency=1.0") -> tuple[str, str]:
    """mock-providers' arguments for a faults file making each of `models` answer after a second (or `fault`):
    every request of a concurrent burst is admitted before the first one ends."""
    path = tmp / "faults.yaml"
    path.write_text(yaml.safe_dump({"faults": [{"fault": fault, "model": model} for model in models]}))
    return ("--faults", str(path))


def healthy(url: str) -> bool:
    return http_ok(url + "/health")


@contextmanager
def running_stack(tmp: Path, env: dict[str, str], mock_args: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    """(gateway URL, mock-providers URL), the gateway's hosted upstreams pointed at the mock; `env` is
    added to the gateway's environment, `mock_args` to the mock's command line (e.g. --faults FILE). Logs go to `tmp`; a server that does not start fails the test
    with its log's tail. Each child gets a free port, and another one if that was taken meanwhile."""
    procs: list[subprocess.Popen] = []

    def start(args: list[str], extra: dict[str, str], log: str) -> str:
        def launch(port: int) -> subprocess.Popen:
            return subprocess.Popen([sys.executable, "-m", "prefixgate.cli", *args, "--port", str(port)],
                                    env={**os.environ, **extra}, stdout=(tmp / log).open("w"), stderr=subprocess.STDOUT)
        try:
            proc, port = start_on_free_port(launch, lambda port: healthy(f"http://127.0.0.1:{port}"), log)
        except (TimeoutError, RuntimeError):
            pytest.fail((tmp / log).read_text()[-3000:])
        procs.append(proc)
        return f"http://127.0.0.1:{port}"

    try:
        mock_url = start(["mock-providers", *mock_args], {}, "mock.log")
        upstreams = {f"PREFIXGATE_{p}_BASE_URL": mock_url for p in ("OPENAI", "ANTHROPIC", "GEMINI", "VERTEX", "BEDROCK")}
        gw_url = start(["serve"], {**upstreams, **env}, "gateway.log")
        yield gw_url, mock_url
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(20)
