"""Detectors for volatile spans: text that changes from request to request and so ends a cacheable prefix.

Each detector is a named regular expression; `volatile_spans` returns every match, merged. The
lint CLI reports them and the planner moves the sentences that hold them out of the static prefix.
Results are memoised by text, because the same system prompt arrives again and again.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass

_MONTHS = r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|Jun(?:e)?|Jul(?:y)?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
_DAYS = r"(?:Mon(?:day)?|Tue(?:s(?:day)?)?|Wed(?:nesday)?|Thu(?:r(?:s(?:day)?)?)?|Fri(?:day)?|Sat(?:urday)?|Sun(?:day)?)"

DETECTORS: dict[str, re.Pattern[str]] = {
    "timestamp": re.compile(
        r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2}| ?UTC)?\b"),
    "date": re.compile(
        rf"\b(?:\d{{4}}-\d{{2}}-\d{{2}}|\d{{1,2}}/\d{{1,2}}/\d{{2,4}}|\d{{1,2}}\.\d{{1,2}}\.\d{{4}}"
        rf"|{_MONTHS}\.? \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}|\d{{1,2}}(?:st|nd|rd|th)? {_MONTHS}\.?,? \d{{4}})\b"),
    "time": re.compile(r"\b(?:[01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d)?(?: ?[AaPp]\.?[Mm]\.?)?\b|\b(?:1[0-2]|0?[1-9]) ?[AaPp]\.?[Mm]\.?(?=\W|$)"),
    "weekday": re.compile(rf"\b{_DAYS}\b(?=,|\s+\d|\s+{_MONTHS}|\.|$)", re.MULTILINE),
    "uuid": re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    "hex_id": re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{16,}\b"),
    "unix_time": re.compile(r"\b1[5-9]\d{8}(?:\d{3})?\b"),
    "request_id": re.compile(
        r"(?i)\b(?:request|req|trace|run|job|correlation|invocation|message|msg)"
        r"[ _-]?(?:id|no\.?|number|#)?\s*[:=#]?\s*(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9][A-Za-z0-9_-]{3,}\b"),
    # Per-conversation references (a ticket, an order, a customer): they change per session, not per request.
    "reference": re.compile(
        r"(?i)\b(?:ticket|order|case|session|conversation|account|customer|user)"
        r"[ _-]?(?:id|no\.?|number|#)?\s*[:=#]?\s*#?(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9][A-Za-z0-9_-]{3,}\b"),
    "ticket_ref": re.compile(r"(?<![\w#])#\d{3,}\b|\b[A-Z]{2,10}-\d{2,}\b"),
    "counter": re.compile(r"(?i)\b(?:turn|attempt|retry|iteration|step|call)\s*(?:#|no\.?)?\s*\d+\s*(?:of|/)\s*\d+\b"),
}


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    kind: str

    def text(self, source: str) -> str:
        return source[self.start:self.end]


_CACHE: OrderedDict[str, tuple[Span, ...]] = OrderedDict()
_CACHE_SIZE = 4096


def volatile_spans(text: str) -> tuple[Span, ...]:
    """Volatile spans in `text`, in order, overlapping matches merged (the first detector's kind wins)."""
    hit = _CACHE.get(text)
    if hit is not None:
        _CACHE.move_to_end(text)
        return hit
    found = sorted(
        (Span(m.start(), m.end(), kind) for kind, rx in DETECTORS.items() for m in rx.finditer(text)),
        key=lambda s: (s.start, -s.end),
    )
    merged: list[Span] = []
    for span in found:
        if merged and span.start < merged[-1].end:
            last = merged[-1]
            merged[-1] = Span(last.start, max(last.end, span.end), last.kind)
        else:
            merged.append(span)
    result = tuple(merged)
    _CACHE[text] = result
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return result


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(\[])")


def units(text: str) -> list[tuple[int, int]]:
    """The movable units of a prompt: lines, and sentences within long lines, as (start, end) offsets
    that tile `text` exactly (each unit keeps its trailing newline), so moving units never loses a byte."""
    out: list[tuple[int, int]] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        end = pos + len(line)
        if len(line) > 160:
            start = pos
            for m in _SENTENCE_END.finditer(line):
                out.append((start, pos + m.end()))
                start = pos + m.end()
            out.append((start, end))
        else:
            out.append((pos, end))
        pos = end
    return out
