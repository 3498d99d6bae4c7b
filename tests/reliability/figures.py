"""Measured figures: printed (pytest -s shows them) and, when PREFIXGATE_FIGURES names a file, appended
to it as JSON lines, from which the tables in docs/reliability.md are written."""

from __future__ import annotations

import json
import os
import platform
import time


def report(name: str, values: dict) -> None:
    line = {"name": name, "at": time.strftime("%Y-%m-%dT%H:%M:%S"), "cpus": os.cpu_count(),
            "machine": platform.machine(), **values}
    print(f"\n[figures] {json.dumps(line)}")
    path = os.environ.get("PREFIXGATE_FIGURES")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")
