"""Volatile-span detectors: what they find, and what they must leave alone."""

import pytest

from prefixgate.cache_planner.detectors import DETECTORS, units, volatile_spans
from tests.cache_planner.support_planning import DETECTOR_CASES


@pytest.mark.parametrize(("text", "kind", "found"), DETECTOR_CASES)
def test_detects(text, kind, found):
    spans = volatile_spans(text)
    start = text.index(found)
    # The span covers the value and carries the kind the dashboard and the lint report show.
    span = next((s for s in spans if s.start <= start and s.end >= start + len(found)), None)
    assert span is not None, [(s.kind, s.text(text)) for s in spans]
    assert span.kind == kind, [(s.kind, s.text(text)) for s in spans]


def test_every_detector_has_a_case():
    assert set(DETECTORS) <= {kind for _, kind, _ in DETECTOR_CASES}


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


def test_a_long_text_is_memoised_whole_and_found_alike_with_the_store_off():
    from prefixgate import reuse
    from prefixgate.cache_planner.detectors import _WHOLE

    # A system prompt of 600+ characters with a date at a known place: 'Today is ' starts after 610 characters.
    text = "You are a careful coding assistant.\n" * 17 + "Today is 2026-11-27.\n"
    start = 36 * 17 + len("Today is ")
    expected = [("date", start, start + 10)]
    hits = _WHOLE.hits
    assert [(s.kind, s.start, s.end) for s in volatile_spans(text)] == expected
    again = volatile_spans("".join(list(text)))     # an equal text, another object: found by content
    assert [(s.kind, s.start, s.end) for s in again] == expected
    assert _WHOLE.hits == hits + 1
    # One character moves the date: a memoised text never answers for another.
    assert [(s.start, s.end) for s in volatile_spans("x" + text)] == [(start + 1, start + 11)]
    saved = reuse.STORE.max_bytes
    reuse.keep(0)
    try:
        assert [(s.kind, s.start, s.end) for s in volatile_spans(text)] == expected
    finally:
        reuse.keep(saved)
