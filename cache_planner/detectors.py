"""Detectors for volatile spans: text that changes from request to request and so ends a cacheable prefix.

Each detector is a named regular expression; `volatile_spans` returns every match, merged. The
lint CLI reports them and the planner moves the sentences that hold them out of the static prefix.
Results are memoised by text, because the same system prompt arrives again and again.

Each detector also has a gate (`GATES`): a pattern that every one of its matches contains, which begins
with a literal or a set of characters, so the regex engine skips to candidates in C; a detector runs only
on a line where its gate is found. The detectors start with `\b` or `(?i)`, which the engine cannot skip
ahead to: it tries them at every character, and a client's first request (Claude Code's 62 KB of tool
schemas, all new) spent 22 ms of its 37 ms there. Gates change what runs, never what is found.
"""

from __future__ import annotations

import re
import sys
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from typing import NamedTuple

from prefixgate.reuse import memo, weigh

_MONTHS = r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|Jun(?:e)?|Jul(?:y)?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
_REQUEST_WORDS = "(?:request|req|trace|run|job|correlation|invocation|message|msg)"
_REFERENCE_WORDS = "(?:ticket|order|case|session|conversation|account|customer|user)"
_COUNTER_WORDS = "(?:turn|attempt|retry|iteration|step|call)"
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
        rf"(?i)\b{_REQUEST_WORDS}"
        r"[ _-]?(?:id|no\.?|number|#)?\s*[:=#]?\s*(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9][A-Za-z0-9_-]{3,}\b"),
    # Per-conversation references (a ticket, an order, a customer): they change per session, not per request.
    "reference": re.compile(
        rf"(?i)\b{_REFERENCE_WORDS}"
        r"[ _-]?(?:id|no\.?|number|#)?\s*[:=#]?\s*#?(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9][A-Za-z0-9_-]{3,}\b"),
    "ticket_ref": re.compile(r"(?<![\w#])#\d{3,}\b|\b[A-Z]{2,10}-\d{2,}\b"),
    "counter": re.compile(rf"(?i)\b{_COUNTER_WORDS}\s*(?:#|no\.?)?\s*\d+\s*(?:of|/)\s*\d+\b"),
}

# Gates: for each detector, patterns of which every match of the detector contains one (so a line without
# any holds none of its matches). Each starts with a literal or a case-sensitive set of characters, the
# starts the regex engine can search for in C. A gate marked True is searched in the line lower-cased, for
# the detectors that ignore case: lower() maps every character that matches an ASCII letter under `(?i)`
# to that letter, except the three in _UNFOLDED (a line that holds one is scanned without its gates).
_ID_TAIL = r"[ _-]?(?:id|no\.?|number|#)?\s*[:=#]?\s*#?[a-z0-9_-]*\d"
GATES: dict[str, tuple[tuple[re.Pattern[str], bool], ...]] = {
    "timestamp": ((re.compile(r"-\d\d[T ]\d\d:"), False),),
    "date": ((re.compile(r"-\d\d-\d\d"), False), (re.compile(r"/\d\d?/\d\d"), False),
             (re.compile(r"\.\d\d?\.\d{4}"), False), (re.compile(rf"{_MONTHS}\.?,? \d"), False)),
    # `:(?<=\d:)` is `\d:` found by its colon.
    "time": ((re.compile(r":(?<=\d:)[0-5]\d"), False), (re.compile(r"[0-9] ?[AaPp]\.?[Mm]"), False)),
    "weekday": ((re.compile(r"Mon|Tue|Wed|Thu|Fri|Sat|Sun"), False),),
    "uuid": ((re.compile(r"-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"), False),),
    "hex_id": ((re.compile(r"[0-9a-f][0-9a-f]{15}"), False),),
    "unix_time": ((re.compile(r"1[5-9]\d{8}"), False),),
    "request_id": ((re.compile(_REQUEST_WORDS + _ID_TAIL), True),),
    "reference": ((re.compile(_REFERENCE_WORDS + _ID_TAIL), True),),
    "ticket_ref": ((re.compile(r"#\d{3}"), False), (re.compile(r"-(?<=[A-Z]-)\d\d"), False)),
    "counter": ((re.compile(rf"{_COUNTER_WORDS}\s*(?:#|no\.?)?\s*\d+\s*(?:of|/)\s*\d"), True),),
}
_UNFOLDED = ("\u0130", "\u0131", "\u017f")  # İ (lower() makes it two characters), dotless ı, long ſ


def _matches(line: str) -> list[tuple[str, re.Match[str]]]:
    """Every detector's matches in `line`, in `DETECTORS` order; a detector whose gate is absent has none."""
    lowered = None if any(c in line for c in _UNFOLDED) else line.lower()
    return [(kind, m) for kind, rx in DETECTORS.items() if _gate_open(kind, line, lowered) for m in rx.finditer(line)]


def _gate_open(kind: str, line: str, lowered: str | None) -> bool:
    for gate, folded in GATES[kind]:
        if folded and lowered is None:
            return True
        if gate.search(lowered if folded else line):
            return True
    return False


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    kind: str

    def text(self, source: str) -> str:
        return source[self.start:self.end]


_CACHE: OrderedDict[str, tuple[Span, ...]] = OrderedDict()
_CACHE_SIZE = 65536
# Whole texts at least this long are memoised whole (`volatile_spans`); shorter ones are a line or two.
WHOLE_MIN_CHARS = 512
_WHOLE = memo("volatile_spans")


def volatile_spans(text: str) -> tuple[Span, ...]:
    """Volatile spans in `text`, in order, overlapping matches merged (the first detector's kind wins).

    A text of `WHOLE_MIN_CHARS` or more is memoised whole in the reuse store (an agent's system prompt comes
    back on every request, and the planner and the ledger both ask for its spans: splitting it into lines and
    looking each up cost ~20 us a block); the spans are frozen, so every caller may share them. Below that, or
    on a miss, it scans line by line with a per-line memo: a long system prompt differs from the last one in
    a line or two, so after a route's first request only those lines are scanned again.
    """
    if len(text) < WHOLE_MIN_CHARS:
        return _spans(text)
    found = _WHOLE.get(text)
    if found is None:
        found = _spans(text)
        # The entry keeps its text alive (it is the key), so it is charged for it.
        _WHOLE.put(text, found, sys.getsizeof(text) + weigh(found))
    return found


def _spans(text: str) -> tuple[Span, ...]:
    out: list[Span] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        out.extend(Span(pos + s.start, pos + s.end, s.kind) for s in _line_spans(line))
        pos += len(line)
    return tuple(out)


def _line_spans(line: str) -> tuple[Span, ...]:
    hit = _CACHE.get(line)
    if hit is not None:
        return hit
    found = sorted((Span(m.start(), m.end(), kind) for kind, m in _matches(line)), key=lambda s: (s.start, -s.end))
    merged: list[Span] = []
    for span in found:
        if merged and span.start < merged[-1].end:
            last = merged[-1]
            merged[-1] = Span(last.start, max(last.end, span.end), last.kind)
        else:
            merged.append(span)
    result = tuple(merged)
    _CACHE[line] = result
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return result


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(\[])")


class Unit(NamedTuple):
    """A movable piece of prompt text, `text[start:end]`, with the kinds of volatile span inside it."""

    start: int
    end: int
    kinds: frozenset[str]


_UNITS: OrderedDict[str, tuple[Unit, ...]] = OrderedDict()
# Whole texts: the planner analyses a request's system prompt more than once. Each entry is the units
# and their texts (kept together so the incremental path can reuse both).
_TEXTS: OrderedDict[str, tuple[list[Unit], list[str]]] = OrderedDict()


def units(text: str) -> list[Unit]:
    """The movable units of a prompt, tiling `text` exactly (each keeps its trailing newline), so
    moving units never loses a byte: lines, and the sentences of a long line that holds a volatile
    span (so "Today is X. You are Y." moves only its first sentence). Memoised per line."""
    return _analysed(text)[0]


def unit_texts(text: str) -> list[str]:
    """The text of each unit of `text`."""
    return _analysed(text)[1]


def _analysed(text: str) -> tuple[list[Unit], list[str]]:
    hit = _TEXTS.get(text)
    if hit is None:
        hit = _incremental(text)
        if hit is None:
            found = _scan(text, 0)
            hit = (found, [text[u.start:u.end] for u in found])
        _TEXTS[text] = hit
        if len(_TEXTS) > 256:
            _TEXTS.popitem(last=False)
    return hit


def _scan(text: str, offset: int) -> list[Unit]:
    out: list[Unit] = []
    pos = offset
    for line in text.splitlines(keepends=True):
        out.extend(Unit(pos + u.start, pos + u.end, u.kinds) for u in _line_units(line))
        pos += len(line)
    return out


def _incremental(text: str) -> tuple[list[Unit], list[str]] | None:
    """Reuse the last analysed text's units for the lines both share at the start and the end.

    A route's system prompt usually differs from its previous one in a line or two (a timestamp),
    so this turns a scan of every line into a scan of the changed ones."""
    if not _TEXTS:
        return None
    last_text, (last, last_pieces) = next(reversed(_TEXTS.items()))
    head = common_prefix(text, last_text)
    head = last_text.rfind("\n", 0, head) + 1  # back to a line start both share
    shift = len(text) - len(last_text)
    tail = common_suffix(text, last_text)
    # The shared tail starts at the first position that begins a line in both texts.
    start = max(len(text) - tail, head)
    while start < len(text) and not (_line_start(text, start) and _line_start(last_text, start - shift)):
        start = text.find("\n", start) + 1 or len(text)
    tail_start_new = start
    if head + (len(text) - tail_start_new) < len(text) // 2:
        return None
    n_head = bisect_right([u.end for u in last], head)
    n_tail = len(last) - bisect_left([u.start + shift for u in last], tail_start_new)
    tail_units = last[len(last) - n_tail:]
    # A timestamp of the same width leaves the offsets alone: the old units serve as they are.
    keep_tail = tail_units if shift == 0 else [Unit(u.start + shift, u.end + shift, u.kinds) for u in tail_units]
    middle = _scan(text[head:tail_start_new], head)
    pieces = last_pieces[:n_head] + [text[u.start:u.end] for u in middle] + last_pieces[len(last) - n_tail:]
    return last[:n_head] + middle + keep_tail, pieces


def _line_start(text: str, i: int) -> bool:
    return i == 0 or (0 < i <= len(text) and text[i - 1] == "\n")


def common_prefix(a: str, b: str) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # binary search; only the unknown middle is compared, so O(n) bytes in all
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_suffix(a: str, b: str) -> int:
    lo, hi = 0, min(len(a), len(b))
    la, lb = len(a), len(b)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[la - mid:la - lo] == b[lb - mid:lb - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _line_units(line: str) -> tuple[Unit, ...]:
    hit = _UNITS.get(line)
    if hit is not None:
        return hit
    spans = _line_spans(line)
    bounds = [0]
    if len(line) > 160 and spans:
        bounds += [m.end() for m in _SENTENCE_END.finditer(line)]
    bounds.append(len(line))
    result = tuple(
        Unit(a, b, frozenset(s.kind for s in spans if s.start < b and s.end > a))
        for a, b in zip(bounds, bounds[1:], strict=False) if b > a
    )
    _UNITS[line] = result
    if len(_UNITS) > _CACHE_SIZE:
        _UNITS.popitem(last=False)
    return result
