"""Helpers for the lint tests: lint fixture paths in-process and look at the findings."""

from __future__ import annotations

from pathlib import Path

from prefixgate.cache_planner.lint.config import LintConfig
from prefixgate.cache_planner.lint.run import LintReport, lint_paths

FIXTURES = Path(__file__).parent / "fixtures"


def lint(*paths: str | Path, config: LintConfig | None = None, cost: bool = False) -> LintReport:
    return lint_paths([str(p) for p in paths], config or LintConfig(), cost=cost)


def rules_of(report: LintReport) -> set[str]:
    return {f.rule for f in report.findings}
