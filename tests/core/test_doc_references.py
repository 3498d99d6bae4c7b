"""Every test a document cites exists: docs/, the README and ARCHITECTURE.md point readers at the test that
checks a promise, and a moved test file must not leave them pointing at nothing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITED = re.compile(r"\btests/[A-Za-z0-9_/]+\.py\b")


def test_every_cited_test_file_exists() -> None:
    pages = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = [f"{page.relative_to(ROOT)}: {path}" for page in pages
               for path in CITED.findall(page.read_text(encoding="utf-8")) if not (ROOT / path).is_file()]
    assert len(pages) > 10 and not missing, missing
