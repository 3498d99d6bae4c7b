"""Volatile-span detectors: what they find, and what they must leave alone."""

import pytest

from prefixgate.cache_planner.detectors import units, volatile_spans
from prefixgate.cache_planner.stability import DYNAMIC_KINDS


@pytest.mark.parametrize(("text", "kind", "found"), [
    ("Current time: 2026-11-22T10:42:13Z.", "timestamp", "2026-11-22T10:42:13Z"),
    ("Now: 2026-11-22 10:42 UTC", "timestamp", "2026-11-22 10:42 UTC"),
    ("Today is 2026-11-22.", "date", "2026-11-22"),
    ("Today is November 22, 2026.", "date", "November 22, 2026"),
    ("Today is 22 Nov 2026", "date", "22 Nov 2026"),
    ("Date: 11/22/2026", "date", "11/22/2026"),
    ("It is 10:42 now", "time", "10:42"),
    ("Meeting at 3pm", "time", "3pm"),
    ("It is Sunday, the best day", "weekday", "Sunday"),
    ("trace 123e4567-e89b-12d3-a456-426614174000 done", "uuid", "123e4567-e89b-12d3-a456-426614174000"),
    ("commit 9fceb02d0ae598e95dc970b74767f19372d61af8", "hex_id", "9fceb02d0ae598e95dc970b74767f19372d61af8"),
    ("epoch 1763805733 s", "unix_time", "1763805733"),
    ("Request ID: req_8f3k2m9x", "request_id", "Request ID: req_8f3k2m9x"),
    ("See ticket #48213 please", "reference", "#48213"),
    ("Customer ID: C-99812", "reference", "C-99812"),
    ("Escalate JIRA-4821 now", "ticket_ref", "JIRA-4821"),
    ("This is turn 3 of 10.", "counter", "turn 3 of 10"),
])
def test_detects(text, kind, found):
    spans = volatile_spans(text)
    start = text.index(found)
    # Overlapping detectors merge; the span must cover the value, and carry this kind unless another
    # detector of the same cadence (per request / per session) matched first.
    span = next((s for s in spans if s.start <= start and s.end >= start + len(found)), None)
    assert span is not None, [(s.kind, s.text(text)) for s in spans]
    assert (span.kind in DYNAMIC_KINDS) == (kind in DYNAMIC_KINDS)


@pytest.mark.parametrize("text", [
    "You are a helpful assistant for ACME Corp.",
    "Refunds are accepted within 30 days of purchase.",
    "Answer in at most 3 sentences. Use Markdown.",
    "Follow the style guide: be concise, friendly and accurate.",
    "We support Python 3.11 and GPT-4 class models.",
    "Step 1: read the question. Step 2: answer it.",
])
def test_leaves_static_text_alone(text):
    assert volatile_spans(text) == ()


def test_units_tile_the_text_exactly():
    text = "Line one.\nToday is 2026-11-22. " + "It has many sentences. " * 10 + "\nlast line without newline"
    pieces = units(text)
    assert "".join(text[u.start:u.end] for u in pieces) == text
    assert all(u.start < u.end for u in pieces) and len(pieces) > 3
    assert pieces[1].kinds == {"date"} and text[pieces[1].start:pieces[1].end] == "Today is 2026-11-22. "


def test_incremental_units_equal_a_full_scan():
    import random

    from prefixgate.cache_planner import detectors

    rng = random.Random(0)
    base = [f"Line {i} " + "words " * rng.randint(0, 60) + ("Date 2026-11-22. More text here. " * 8 if i % 7 == 0 else "")
            for i in range(120)]
    for trial in range(200):
        lines = list(base)
        for _ in range(rng.randint(0, 3)):
            lines[rng.randrange(len(lines))] = f"Changed {trial} at 10:{trial % 60:02d} " + "x " * rng.randint(0, 100)
        if rng.random() < 0.3:
            lines.insert(rng.randrange(len(lines)), "inserted " * rng.randint(1, 30))
        if rng.random() < 0.2:
            del lines[rng.randrange(len(lines))]
        text = "\n".join(lines) + ("\n" if rng.random() < 0.5 else "")
        assert units(text) == detectors._scan(text, 0), trial
        assert detectors.unit_texts(text) == [text[u.start:u.end] for u in detectors._scan(text, 0)], trial
    # A shared tail that starts inside a line of the previous text.
    long_line = "Policy: refunds within 30 days. " * 50
    units(long_line * 3)
    text = "Header at 10:00\n" + long_line
    assert units(text) == detectors._scan(text, 0)
