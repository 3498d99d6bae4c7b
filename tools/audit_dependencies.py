"""`make audit`: pip-audit over the installed environment, as a CI gate that cannot fail on the network.

Fails (exit 1) only when pip-audit names a known vulnerability. When the vulnerability service cannot be
reached, or it knows none of the installed versions (an offline mirror answers 404 for each), it says
so plainly and exits 0: "skipped" is printed, never "clean".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def main() -> int:
    binary = Path(sys.executable).parent / "pip-audit"
    try:
        done = subprocess.run([str(binary), "--skip-editable", "--progress-spinner", "off", "-f", "json"],
                              capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        print("pip-audit skipped: no answer from the vulnerability service within 600 s")
        return 0
    try:
        report = json.loads(done.stdout)
    except ValueError:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        print(f"pip-audit skipped: it could not reach its vulnerability service ({reason})")
        return 0
    deps = report.get("dependencies", [])
    vulnerable = [d for d in deps if d.get("vulns")]
    for d in vulnerable:
        ids = ", ".join(v["id"] + (f" (fixed in {', '.join(v['fix_versions'])})" if v.get("fix_versions") else "")
                        for v in d["vulns"])
        print(f"VULNERABLE {d['name']} {d['version']}: {ids}")
    audited = [d for d in deps if "skip_reason" not in d]
    unknown = [d for d in deps if "skip_reason" in d and "editable" not in d["skip_reason"]]
    if vulnerable:
        return 1
    if not audited:
        print(f"pip-audit skipped: the vulnerability service knew none of the {len(unknown)} installed "
              "distributions (an index that answers 404 for every version, e.g. an offline mirror)")
        return 0
    print(f"pip-audit: {len(audited)} distributions audited, no known vulnerabilities"
          + (f"; {len(unknown)} not known to the service: {', '.join(d['name'] for d in unknown)}" if unknown else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
