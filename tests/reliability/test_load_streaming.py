"""500 concurrent streaming connections through one gateway worker (a real `prefixgate serve` process)
to the mock providers (another process) whose streams are slow enough to keep them all open: no errors,
no deadlock, gateway memory bounded. `make test` runs it for 8 s; `make soak` for 60 s."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from prefixgate.ledger import read_records
from tests.reliability.support_figures import report
from tests.reliability.support_gateway_process import GatewayProcess
from tests.reliability.support_load_driver import run_load
from tests.support_services import http_ok, start_on_free_port

CONNECTIONS = int(os.environ.get("PREFIXGATE_LOAD_CONNECTIONS", "500"))
DURATION_S = float(os.environ.get("PREFIXGATE_LOAD_S", "8"))
# ~25 events 0.1 s apart: each stream stays open ~2.5 s, so 500 connections are open at once.
FAULTS = 'faults:\n  - fault: "event_delay=0.1"\n'
RSS_LIMIT_MIB = 600


class MockProcess:
    def __init__(self, faults_file: Path) -> None:
        env = {**os.environ, "PREFIXGATE_LOG_LEVEL": "warning"}

        def launch(port: int) -> subprocess.Popen:
            return subprocess.Popen([str(Path(sys.executable).parent / "prefixgate"), "mock-providers", "--port",
                                     str(port), "--faults", str(faults_file)], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        self.proc, port = start_on_free_port(launch, lambda port: http_ok(f"http://127.0.0.1:{port}/health"),
                                             "mock providers process")
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def sample_rss(gw: GatewayProcess, stop: threading.Event, samples: list[int]) -> None:
    while not stop.is_set():
        samples.append(gw.rss_kib())
        stop.wait(0.5)


@pytest.mark.slow
def test_500_concurrent_streams_through_one_worker(tmp_path):
    faults = tmp_path / "faults.yaml"
    faults.write_text(FAULTS)
    mock = MockProcess(faults)
    try:
        # The same load straight at the mock: what the upstream and the driver cost without the gateway.
        direct = asyncio.run(asyncio.wait_for(run_load(mock.url, CONNECTIONS, DURATION_S), DURATION_S + 150))
        with GatewayProcess(mock.url, tmp_path / "ledger.sqlite") as gw:
            asyncio.run(run_load(gw.url, 20, 1.0))           # warm-up: tokenizer, pools, planner
            rss_before = gw.rss_kib()
            fds_before = len(os.listdir(f"/proc/{gw.proc.pid}/fd"))
            cpu_before = gw.cpu_s()
            samples: list[int] = []
            stop = threading.Event()
            sampler = threading.Thread(target=sample_rss, args=(gw, stop, samples), daemon=True)
            sampler.start()
            result = asyncio.run(asyncio.wait_for(run_load(gw.url, CONNECTIONS, DURATION_S), DURATION_S + 150))
            stop.set()
            sampler.join()
            cpu_per_stream_ms = (gw.cpu_s() - cpu_before) / max(1, result.completed) * 1000
            # Still serving after the load (no wall-clock bound: the timeout is only a generous wait for
            # a shared machine); every stream is in the ledger.
            after = httpx.post(gw.url + "/v1/chat/completions", timeout=60, json={
                "model": "gpt-5.4-mini", "messages": [{"role": "user", "content": "still there?"}]})
            assert after.status_code == 200
            rss_after = gw.rss_kib()
            fds_after = len(os.listdir(f"/proc/{gw.proc.pid}/fd"))
            ledger_rows = len(read_records(str(tmp_path / "ledger.sqlite")))
    finally:
        mock.stop()
    summary = result.summary()
    half = samples[len(samples) // 2:] or samples
    summary.update({"gateway_cpu_ms_per_stream": round(cpu_per_stream_ms, 2),
                    "gateway_cpu_share": round(cpu_per_stream_ms * result.completed / 1000 / result.seconds, 2),
                    "gateway_rss_mib_before": round(rss_before / 1024), "gateway_rss_mib_peak": round(max(samples) / 1024),
                    "gateway_rss_mib_second_half_max": round(max(half) / 1024),
                    "gateway_rss_mib_after": round(rss_after / 1024), "gateway_fds_before": fds_before,
                    "gateway_fds_after": fds_after})
    report("load_streaming", {"through_gateway": summary, "direct_to_mock": direct.summary()})
    assert summary["errors"] == 0, summary["error_kinds"]
    assert result.peak_open == CONNECTIONS
    assert result.completed >= CONNECTIONS
    assert ledger_rows >= result.completed
    assert max(samples) / 1024 < RSS_LIMIT_MIB
