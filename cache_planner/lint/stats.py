"""Precision and recall of warnings against labels written in the linted files themselves.

A labelled file marks each warning it must produce with a comment on the flagged line or the line
before, like a suppression: `# prefixgate: expect=PG001` (Python), `{# prefixgate: expect=PG001 #}`
(Jinja), `<!-- prefixgate: expect=PG001 -->` (Markdown). Every other warning is one it must not
produce (`prefixgate: quiet=PG001` is a comment for the reader, marking a trap on purpose). `prefixgate lint --stats DIR` (or `python -m prefixgate.cache_planner.lint.stats DIR`)
prints the table for any folder; on unlabelled code every warning counts as a false positive, which is
how a new user's first run feels.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from prefixgate.cache_planner.lint.config import LintConfig
from prefixgate.cache_planner.lint.inputs import discover
from prefixgate.cache_planner.lint.run import LintReport, lint_paths

_EXPECT = re.compile(r"prefixgate:\s*expect\s*=\s*([A-Za-z0-9, ]+)")


@dataclass
class Stats:
    files: int
    true_positives: list[tuple[str, int, str]] = field(default_factory=list)
    false_positives: list[tuple[str, int, str]] = field(default_factory=list)
    missed: list[tuple[str, int, str]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        found = len(self.true_positives) + len(self.false_positives)
        return len(self.true_positives) / found if found else 1.0

    @property
    def recall(self) -> float:
        wanted = len(self.true_positives) + len(self.missed)
        return len(self.true_positives) / wanted if wanted else 1.0

    def table(self) -> str:
        tp, fp, fn = len(self.true_positives), len(self.false_positives), len(self.missed)
        lines = [f"files {self.files}  expected warnings {tp + fn}  reported warnings {tp + fp}",
                 "| true positives | false positives | missed | precision | recall |",
                 "|---|---|---|---|---|",
                 f"| {tp} | {fp} | {fn} | {self.precision:.3f} | {self.recall:.3f} |"]
        lines += [f"false positive: {p}:{n} {r}" for p, n, r in self.false_positives]
        lines += [f"missed: {p}:{n} {r}" for p, n, r in self.missed]
        return "\n".join(lines)


def expected(paths: Sequence[str], config: LintConfig) -> tuple[set[tuple[str, int, str]], int]:
    """(path, marker line, rule) for every `expect` label under `paths`, and the number of files."""
    files = discover(list(paths), config)
    out: set[tuple[str, int, str]] = set()
    for path, display in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            for m in _EXPECT.finditer(line):
                out |= {(display, number, r.strip().upper()) for r in m.group(1).split(",") if r.strip()}
    return out, len(files)


def score(report: LintReport, labels: set[tuple[str, int, str]], files: int) -> Stats:
    stats = Stats(files)
    open_labels = set(labels)
    for f in report.findings:
        if f.severity not in ("error", "warning"):
            continue
        loc = f.location
        match = next((lab for lab in ((loc.path, loc.line, f.rule), (loc.path, loc.line - 1, f.rule)) if lab in open_labels), None)
        if match:
            open_labels.discard(match)
            stats.true_positives.append((loc.path, loc.line, f.rule))
        else:
            stats.false_positives.append((loc.path, loc.line, f.rule))
    stats.missed = sorted(open_labels)
    return stats


def corpus_stats(paths: Sequence[str], config: LintConfig) -> Stats:
    labels, files = expected(paths, config)
    return score(lint_paths(list(paths), config, cost=False), labels, files)


if __name__ == "__main__":
    result = corpus_stats(sys.argv[1:] or ["."], LintConfig())
    print(result.table())
