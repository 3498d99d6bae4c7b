"""Every relative link in the README, ARCHITECTURE.md and docs/ reaches a file, and its `#fragment` a heading there
(GitHub's anchors: lower case, punctuation dropped, spaces as hyphens). docs/gateway.md sent readers of its
benchmark figures to `benchmarks.md#gateway-benchmarkgatewaypy`; the heading's anchor is `gateway-benchgatewaypy`."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {anchor(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}


def broken_links(page: Path) -> list[str]:
    out = []
    for link in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", link):
            continue
        path, _, fragment = link.partition("#")
        target = (page.parent / path) if path else page
        if not target.exists():
            out.append(f"{page.relative_to(ROOT)}: {link} (no such file)")
        elif fragment and target.suffix == ".md" and fragment not in anchors(target):
            out.append(f"{page.relative_to(ROOT)}: {link} (no such heading)")
    return out


def test_every_relative_link_reaches_its_file_and_heading() -> None:
    pages = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert len(pages) > 10
    assert [b for page in pages for b in broken_links(page)] == []


def test_anchors_are_githubs() -> None:
    assert anchor("Gateway (`bench/gateway.py`)") == "gateway-benchgatewaypy"
    assert anchor("Keep-alive") == "keep-alive"
    assert anchor("OpenAI's prompt_cache_key per route") == "openais-prompt_cache_key-per-route"
