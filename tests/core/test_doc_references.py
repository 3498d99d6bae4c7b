"""Every test path a document cites exists: docs/, the README and ARCHITECTURE.md point readers at the test (or
the test folder) that checks a promise, and a moved test must not leave them pointing at nothing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITED = re.compile(r"\btests/[\w/.-]*\w")


def cited_paths(text: str) -> list[str]:
    """`tests/...` paths (files or folders) in `text`; a glob (`tests/fixtures/**`, a config example) is no citation."""
    return [m.group() for m in CITED.finditer(text) if not text[m.end():m.end() + 2].lstrip("/").startswith("*")]


def test_every_cited_test_path_exists() -> None:
    pages = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
    cited = [(page, path) for page in pages for path in cited_paths(page.read_text(encoding="utf-8"))]
    missing = [f"{page.relative_to(ROOT)}: {path}" for page, path in cited if not (ROOT / path).exists()]
    assert len(pages) > 10 and len(cited) > 20 and not missing, missing


def test_a_citation_is_a_path_and_a_glob_is_not() -> None:
    text = "see tests/core/test_usage.py, the matrix in tests/clients. exclude = [\"tests/fixtures/**\"]"
    assert cited_paths(text) == ["tests/core/test_usage.py", "tests/clients"]
