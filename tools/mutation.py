"""`make mutation`: mutation testing of the money, limit and planner-limit modules with cosmic-ray.

Each module is mutated in place, one mutant at a time (cosmic-ray restores the file after each), and the
tests that cover it run against the mutant: a mutant the tests do not notice "survives" and is printed
with its diff. Run it on a clean work tree; `git status` afterwards must show nothing changed.

    python tools/mutation.py                       # every module below (about 1,800 mutants, hours)
    python tools/mutation.py prefixgate/bind.py    # one module or more, by path

Sessions are kept in `test-artifacts/mutation/` so an interrupted run resumes where it stopped (delete
a module's `.sqlite` to start it again). docs/mutation.md says how to read the report.
"""

from __future__ import annotations

import json
import subprocess  # nosec B404: runs cosmic-ray, a development tool, on this checkout
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = ROOT / "test-artifacts" / "mutation"

# Module -> the tests that pin its behaviour down (the fast ones: each mutant runs them once).
MODULES: dict[str, list[str]] = {
    "prefixgate/bind.py": ["tests/core/test_bind.py"],
    "prefixgate/ledger_rollup.py": ["tests/core/test_rollup_statuses.py", "tests/core/test_ledger_rollups.py"],
    "prefixgate/prefix_shape.py": ["tests/core/test_prefix_shape_resent.py", "tests/cache_planner/test_carried.py",
                                   "tests/gateway/dashboard/test_dashboard_misses.py",
                                   "tests/core/test_prefix_shape_entries.py"],
    "prefixgate/providers/pricing.py": ["tests/core/providers/test_platform_premiums.py",
                                        "tests/core/providers/test_cost_properties.py"],
    "prefixgate/providers/vertex_prices.py": ["tests/core/providers/test_platform_premiums.py"],
    "prefixgate/cost.py": ["tests/core/providers/test_cost_properties.py", "tests/core/test_usage.py"],
    "policies/limits.py": ["tests/gateway/test_gateway_policies.py"],
    "cache_planner/checkpoints.py": ["tests/cache_planner/test_planner_limits.py", "tests/cache_planner/test_plan.py"],
    # The caps and TTL orders of each regime (Claude's breakpoint cap, OpenAI's four) moved out of checkpoints.py.
    "cache_planner/regimes/breakpoints.py": ["tests/cache_planner/test_planner_limits.py", "tests/cache_planner/test_plan.py"],
    "cache_planner/regimes/prefix_routing.py": ["tests/cache_planner/test_planner_limits.py",
                                                "tests/cache_planner/test_plan.py"],
}

CONFIG = """[cosmic-ray]
module-path = "{module}"
timeout = 120.0
excluded-modules = []
test-command = "{python} -m pytest -x -q -p no:cacheprovider {tests}"

[cosmic-ray.distributor]
name = "local"
"""


def run_module(module: str, tests: list[str]) -> list[dict]:
    """Mutate one module (resuming its session) and return its surviving mutants."""
    name = module.replace("/", "_").removesuffix(".py")
    config, session = SESSIONS / f"{name}.toml", SESSIONS / f"{name}.sqlite"
    config.write_text(CONFIG.format(module=module, python=sys.executable, tests=" ".join(tests)))
    tool = Path(sys.executable).parent
    if not session.exists():
        subprocess.run([tool / "cosmic-ray", "init", config, session], check=True, cwd=ROOT)  # nosec B603
    subprocess.run([tool / "cosmic-ray", "exec", config, session], check=True, cwd=ROOT,  # nosec B603
                   stdout=subprocess.DEVNULL)
    dump = subprocess.run([tool / "cosmic-ray", "dump", session], check=True, cwd=ROOT,  # nosec B603
                          capture_output=True, text=True).stdout
    survivors = []
    total = 0
    for line in dump.splitlines():
        job, result = json.loads(line)
        total += 1
        if result and result.get("test_outcome") == "survived":
            mutation = job["mutations"][0]
            survivors.append({"module": module, "operator": mutation["operator_name"],
                              "line": mutation["start_pos"][0], "diff": result.get("diff", "")})
    print(f"{module}: {total} mutants, {len(survivors)} survived")
    return survivors


def main(argv: list[str]) -> int:
    unknown = [m for m in argv if m not in MODULES]
    if unknown:
        print(f"not in tools/mutation.py's MODULES: {', '.join(unknown)}", file=sys.stderr)
        return 2
    SESSIONS.mkdir(parents=True, exist_ok=True)
    survivors = [s for module in (argv or list(MODULES)) for s in run_module(module, MODULES[module])]
    for s in survivors:
        print(f"\nSURVIVED {s['module']}:{s['line']} {s['operator']}\n{s['diff']}")
    print(f"\n{len(survivors)} surviving mutant(s); docs/mutation.md explains the known ones.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
