"""`prefixgate serve` as a real child process (one uvicorn worker), for kill -9, RSS and load runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support_services import http_ok, start_on_free_port

PROVIDER_KEYS = {"OPENAI_API_KEY": "sk-proc-openai-secret-0001", "ANTHROPIC_API_KEY": "sk-ant-proc-secret-0002",
                 "GEMINI_API_KEY": "AIzaProcGeminiSecret000000003"}


class GatewayProcess:
    def __init__(self, upstream_url: str, ledger_path: Path, **settings: str) -> None:
        self.port = 0
        self.url = ""
        self.log_path = ledger_path.with_suffix(".log")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFIXGATE_")}
        env.update(PROVIDER_KEYS)
        env.update({"PREFIXGATE_OPENAI_BASE_URL": upstream_url, "PREFIXGATE_ANTHROPIC_BASE_URL": upstream_url,
                    "PREFIXGATE_GEMINI_BASE_URL": upstream_url, "PREFIXGATE_LEDGER_PATH": str(ledger_path),
                    "PREFIXGATE_LOG_LEVEL": "warning"})
        env.update({f"PREFIXGATE_{k.upper()}": v for k, v in settings.items()})
        self.env = env
        self.proc: subprocess.Popen | None = None

    def start(self) -> GatewayProcess:
        binary = Path(sys.executable).parent / "prefixgate"
        self._log = open(self.log_path, "ab")

        def launch(port: int) -> subprocess.Popen:
            return subprocess.Popen([str(binary), "serve", "--port", str(port)], env=self.env,
                                    stdout=self._log, stderr=subprocess.STDOUT)

        try:
            self.proc, self.port = start_on_free_port(
                launch, lambda port: http_ok(f"http://127.0.0.1:{port}/health"), "gateway process")
        except (TimeoutError, RuntimeError) as e:
            raise RuntimeError(f"{e}: {self.log_path.read_text()[-2000:]}") from e
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

    def cpu_s(self) -> float:
        """User + system CPU seconds the process has used."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return self.proc.returncode

    def __enter__(self) -> GatewayProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
