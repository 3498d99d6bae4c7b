"""The detectors' gates skip work, never a span: gated detection finds what every detector's own regex finds."""

import json
import random
import re
import string
import sys
from pathlib import Path

import pytest

from prefixgate.cache_planner import detectors
from prefixgate.cache_planner.detectors import DETECTORS, volatile_spans
from tests.cache_planner.support_planning import DETECTOR_CASES

FIXTURES = Path(__file__).resolve().parents[2] / "bench" / "fixtures"


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _captured() -> list[str]:
    """The captured Claude Code and Codex requests: every string in them, and each whole body as sent."""
    out = []
    for path in sorted(FIXTURES.glob("*.json")):
        body = json.loads(path.read_text())
        out += [*_strings(body), json.dumps(body, separators=(",", ":"), ensure_ascii=False)]
    return out


# Letters that match an ASCII letter only when case is ignored (the dotless i, the long s, the dotted
# capital I, the Kelvin sign), each in a value the detectors must find.
UNICODE_CASES = [
    ("ınvocation id: abc123 done", [("request_id", "ınvocation id: abc123")]),
    ("ſession 12345 open", [("reference", "ſession 12345")]),
    ("İnvocation #4821 x", [("request_id", "İnvocation #4821")]),
    ("tic\u212aet no. 77ab9", [("reference", "tic\u212aet no. 77ab9")]),
    ("TURN 3 OF 10", [("counter", "TURN 3 OF 10")]),
    ("MESSAGE ID = 77aa", [("request_id", "MESSAGE ID = 77aa")]),
]


def _ungated(line: str) -> list[tuple[str, int, int]]:
    return [(kind, m.start(), m.end()) for kind, rx in DETECTORS.items() for m in rx.finditer(line)]


def _gated(line: str) -> list[tuple[str, int, int]]:
    return [(kind, m.start(), m.end()) for kind, m in detectors._matches(line)]


def _random_lines(n: int) -> list[str]:
    """Lines pieced together from what the detectors and their gates look for, and near misses."""
    rng = random.Random(35)
    pieces = [t for t, _, _ in DETECTOR_CASES] + [t for t, _ in UNICODE_CASES] + [
        "2026-11-22", "T10:42", " 10:42", ":59", "9am", "12 P.M.", "Mon", "Monday.", "Tue 3", "Sept", "March 5, 2026",
        "5th March 2026", "3/4/25", "1.2.2026", "-1234-", "abcdef0123456789", "1763805733123", "#123", "AB-12",
        "request", "req_", "id", "no.", "number", "#", ":", "=", " ", "  ", "\t", "-", "_", "x9", "user", "case",
        "Order", "call 2 / 3", "step", " of ", "/", "ı", "ſ", "İ", "\u212a", "Ω", "é", "日本", "🙂", "\"", ",", ".",
    ]
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 24))) for _ in range(n)]


def test_gated_detection_equals_every_detector_on_a_corpus():
    corpus = _captured() + [t for t, _, _ in DETECTOR_CASES] + [t for t, _ in UNICODE_CASES] + _random_lines(4000)
    for text in corpus:
        for line in text.splitlines(keepends=True):
            assert _gated(line) == _ungated(line), line


def test_captured_claude_code_request_spans():
    """What the documented rules find in Claude Code's request (its tool schemas hold cron examples)."""
    body = json.loads((FIXTURES / "claude-code.json").read_text())
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    found = [(s.kind, s.text(text)) for s in volatile_spans(text)]
    assert found == [
        ("date", "2026-11-27"),                       # "Today's date is 2026-11-27."
        ("time", "9am"), ("time", "2:30pm"), ("time", "9am"), ("time", "9am"), ("time", "9am"),
        ("time", "9:00"), ("time", "2:30pm"),         # the scheduling tool's examples
        ("uuid", "00000000-0000-4000-8000-000000000000"),  # metadata's session id
    ]


@pytest.mark.parametrize(("text", "expected"), UNICODE_CASES)
def test_case_blind_detectors_find_unicode_case_variants(text, expected):
    assert [(s.kind, s.text(text)) for s in volatile_spans(text)] == expected


def test_lower_maps_case_blind_ascii_matches_to_ascii():
    """The premise of the lower-cased gates: a character that `(?i)` matches to an ASCII letter lower-cases
    to that letter, or is one of the few a line is scanned without its gates for."""
    letter = re.compile("(?i)[a-z]")
    for code in range(128, sys.maxunicode + 1):
        c = chr(code)
        if letter.fullmatch(c) and c not in detectors._UNFOLDED:
            assert {x for x in string.ascii_lowercase if re.fullmatch(f"(?i){x}", c)} == {c.lower()}, c
