"""Which spans of a route's system prompt vary, learned from the route's requests themselves.

Evidence, not shapes: each request's system text is compared with the route's previous one word by word
(`differing_spans`); each span that differs, wherever it lies (inside a line, a sentence, a JSON value), is
widened to a unit a reader would choose (`widen`: the field on a structured line, else the sentence, else the
clause, else the words) and remembered as a *site*: the static text just before and after it. Two requests
are enough to see a span vary, so the route's third request finds the site, moves it, and reads the rest.

A site holds (hysteresis): it is moved whenever its anchors are found, whatever it holds this time (the same
customer twice in a row), and forgotten only after the route's prompts stop containing it. Detectors are
priors only: a per-request value (timestamp, request id) moves from the route's first request.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from dataclasses import dataclass
from difflib import SequenceMatcher

from prefixgate.cache_planner.detectors import common_prefix, common_suffix, volatile_spans
from prefixgate.ir import Stability

# Kinds of volatile span that change every request; the others change per session or per day.
DYNAMIC_KINDS = frozenset({"timestamp", "time", "unix_time", "uuid", "hex_id", "request_id", "counter"})
ANCHOR_CHARS = 48        # static text kept on each side of a site to find it again
MIN_GAP = 16             # units closer than this merge (the text between them could not anchor either)
FIELD_TAIL_WORDS = 3     # words after a field's changed value that still belong to it, when a sentence ends there
MAX_SENTENCE = 400       # a longer sentence gives up its clause instead, a longer clause its words
SITE_UNSEEN_LIMIT = 32   # requests without the site before it is forgotten
MAX_SITES = 64
MAX_DIFF_TOKENS = 50_000
_WORD = re.compile(r"\w+|[^\w\s]")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")
_CLAUSE_END = re.compile(r"[,;:)]\s+|\s+(?=\()|\s+[-\u2013\u2014]\s+")
_FIELD = re.compile(r"[ \t]*[\w#/.-]+(?: [\w#/.-]+){0,3}:[ \t]+")
_STRUCTURED = re.compile(r"[{}\[\]]|\"\s*:|^\s*[\w .-]{1,40}:\s")


@dataclass(frozen=True)
class Rule:
    """A route's own say over its rewrite (policy `volatile` / `never_move`): text matching a `volatile`
    pattern moves from the first request; text matching `never_move` stays where the caller put it."""

    volatile: tuple[re.Pattern[str], ...] = ()
    never_move: tuple[re.Pattern[str], ...] = ()


NO_RULE = Rule()


def rule_of(volatile: list[str], never_move: list[str]) -> Rule:
    """A route's rule from its policy's patterns (Python regular expressions); `re.error` on a bad one."""
    return Rule(tuple(map(re.compile, volatile)), tuple(map(re.compile, never_move)))


@dataclass
class Found:
    """A span of this request's text to move: `why` is `learned`, `held`, `detected` or `declared`."""

    start: int
    end: int
    stability: Stability
    why: str


def differing_spans(old: str, new: str) -> list[tuple[int, int]]:
    """Spans of `new` (character offsets) whose words differ from `old`'s; a deletion is an empty span."""
    if old == new:
        return []
    head = common_prefix(old, new)
    while head > 0 and new[head - 1].isalnum():     # back to a word start
        head -= 1
    tail = min(common_suffix(old, new), len(old) - head, len(new) - head)
    while tail > 0 and new[len(new) - tail].isalnum():
        tail -= 1
    a_mid, b_mid = old[head:len(old) - tail], new[head:len(new) - tail]
    a_words, b_words = list(_WORD.finditer(a_mid)), list(_WORD.finditer(b_mid))
    if not a_words or not b_words or len(a_words) + len(b_words) > MAX_DIFF_TOKENS:
        return [(head, len(new) - tail)]
    matcher = SequenceMatcher(None, [m.group() for m in a_words], [m.group() for m in b_words], autojunk=False)
    out = []
    for op, _, _, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        if j1 < j2:
            out.append((head + b_words[j1].start(), head + b_words[j2 - 1].end()))
        else:
            at = head + (b_words[j1].start() if j1 < len(b_words) else len(b_mid))
            out.append((at, at))
    return out


def widen(text: str, start: int, end: int) -> tuple[int, int]:
    """The unit a reader would move with `text[start:end]`, with its trailing whitespace: the whole line when
    it is structured (a JSON field, `key: value`), else the sentence, the clause, or the words around it."""
    if start >= len(text):
        # A deletion at the very end (the prompt shrank to its own start): no unit around it to move.
        return len(text), len(text)
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", max(end, start))
    line_end = len(text) if line_end < 0 else line_end + 1
    line = text[line_start:line_end]
    if len(line) <= MAX_SENTENCE and _STRUCTURED.search(line):
        return line_start, line_end
    group = _json_group(text, line_start, line_end, start, end)
    if group is not None:
        return group[0], _words_end(text, group[1])
    field = _FIELD.match(line)
    if field and start >= line_start + field.end() and not _SENTENCE_END.search(text, line_start, start):
        # `Label: value` opening a long line: the field is the label and the value, through the sentence's end
        # when that is a few words on (the value's own last words), else through the value's words.
        stop = _SENTENCE_END.search(text, end, line_end)
        if stop is not None and len(text[end:stop.start()].split()) <= FIELD_TAIL_WORDS:
            return line_start, stop.end()
        return line_start, _words_end(text, end)
    for pattern in (_SENTENCE_END, _CLAUSE_END):
        bounds = [line_start, *(line_start + m.end() for m in pattern.finditer(line)), line_end]
        a = max(b for b in bounds if b <= start)
        b = min(x for x in bounds if x >= end and x > a)
        if b - a <= MAX_SENTENCE:
            return a, b
        line_start, line = a, text[a:b]     # the clause search stays inside this sentence
    a = start
    while a > 0 and not text[a - 1].isspace():
        a -= 1
    return a, _words_end(text, end)


def _json_group(text: str, line_start: int, line_end: int, start: int, end: int) -> tuple[int, int] | None:
    """The outermost JSON object or array on the line that holds `text[start:end]`, if one does."""
    stack: list[int] = []
    quoted = escaped = False
    for i in range(line_start, line_end):
        c = text[i]
        if quoted:
            escaped, quoted = (not escaped and c == "\\"), quoted and (escaped or c != '"')
        elif c == '"':
            quoted = True
        elif c in "{[":
            stack.append(i)
        elif c in "}]" and stack:
            opened = stack.pop()
            if not stack and opened <= start and end <= i + 1:
                return opened, i + 1
        if i >= end and not stack:
            return None
    return None


def _words_end(text: str, end: int) -> int:
    """The end of the word at `end`, with the spaces after it (up to and including a newline)."""
    while end < len(text) and not text[end].isspace():
        end += 1
    while end < len(text) and text[end].isspace() and text[end - 1] != "\n":
        end += 1
    return end


def _merge(found: list[Found], text: str) -> list[Found]:
    out: list[Found] = []
    for f in sorted(found, key=lambda f: f.start):
        if out and f.start - out[-1].end < MIN_GAP:
            last = out[-1]
            stability: Stability = "dynamic" if "dynamic" in (last.stability, f.stability) else "session"
            why = last.why if last.why == f.why else f"{last.why}+{f.why}"
            out[-1] = Found(last.start, max(last.end, f.end), stability, why)
        else:
            out.append(f)
    return out


def _stability(text: str, start: int, end: int) -> Stability:
    kinds = {s.kind for s in volatile_spans(text[start:end])}
    return "dynamic" if kinds & DYNAMIC_KINDS else "session"


@dataclass
class Site:
    before: str
    after: str
    at: int               # where the unit started when learned: the nearest anchor match wins
    stability: Stability
    unseen: int = 0

    def key(self) -> str:
        return hashlib.blake2b(f"{self.before}\0{self.after}".encode(), digest_size=8).hexdigest()

    def locate(self, text: str) -> tuple[int, int] | None:
        start = 0
        if self.before:
            best, i = None, text.find(self.before)
            while i >= 0:
                if best is None or abs(i + len(self.before) - self.at) < abs(best - self.at):
                    best = i + len(self.before)
                i = text.find(self.before, i + 1)
            if best is None:
                return None
            start = best
        end = text.find(self.after, start) if self.after else len(text)
        if end < 0 or end - start > max(4 * MAX_SENTENCE, len(text) // 2):
            return None
        return start, end

    def to_list(self) -> list:
        return [self.before, self.after, self.at, self.stability, self.unseen]


class Sites:
    """A route's learned sites, per system block index, most recently seen last (bounded)."""

    def __init__(self, items: list | None = None) -> None:
        self.by_key: OrderedDict[str, tuple[int, Site]] = OrderedDict()
        for block, before, after, at, stability, unseen in items or []:
            site = Site(before, after, at, stability, unseen)
            self.by_key[site.key()] = (block, site)

    def to_list(self) -> list:
        return [[block, *site.to_list()] for block, site in self.by_key.values()]

    def of_block(self, block: int) -> list[Site]:
        return [site for b, site in self.by_key.values() if b == block]

    def add(self, block: int, site: Site) -> None:
        key = site.key()
        self.by_key[key] = (block, site)
        self.by_key.move_to_end(key)
        while len(self.by_key) > MAX_SITES:
            self.by_key.popitem(last=False)

    def forget(self, site: Site) -> None:
        self.by_key.pop(site.key(), None)


def volatile_units(text: str, previous: str | None, sites: Sites, block: int, rule: Rule = NO_RULE) -> list[Found]:
    """The units of `text` (system block `block`) to move, learning new sites from its difference with the
    route's `previous` text of that block. A unit over half the text is never moved: that is a new prompt."""
    found: list[Found] = []
    for site in sites.of_block(block):
        where = site.locate(text)
        if where is None:
            site.unseen += 1
            if site.unseen > SITE_UNSEEN_LIMIT:
                sites.forget(site)
            continue
        site.unseen = 0
        found.append(Found(*where, site.stability, "held"))
    if previous is not None:
        spans = differing_spans(previous, text)
        # Most of the prompt changed: a new version of it, not a value inside it.
        if sum(b - a for a, b in spans) <= len(text) // 2:
            for a, b in spans:
                a, b = widen(text, a, b)
                if not any(f.start <= a and b <= f.end for f in found):
                    found.append(Found(a, b, _stability(text, a, b), "learned"))
    for span in volatile_spans(text):
        if span.kind in DYNAMIC_KINDS:
            a, b = widen(text, span.start, span.end)
            if not any(f.start <= a and b <= f.end for f in found):
                found.append(Found(a, b, "dynamic", "detected"))
    for pattern in rule.volatile:
        for m in pattern.finditer(text):
            if m.end() > m.start():
                a, b = widen(text, m.start(), m.end())
                found.append(Found(a, b, _stability(text, a, b), "declared"))
    kept = [m.span() for pattern in rule.never_move for m in pattern.finditer(text)]
    units = [f for f in _merge(found, text)
             if f.end - f.start <= len(text) // 2 and text[f.start:f.end].strip()
             and not any(a < f.end and f.start < b for a, b in kept)]
    _learn(text, units, sites, block)
    return units


def _learn(text: str, units: list[Found], sites: Sites, block: int) -> None:
    """Remember each unit as a site: the static text before it and after it (at least `MIN_GAP` characters
    between units, or all there is up to the text's edge)."""
    for i, unit in enumerate(units):
        floor = units[i - 1].end if i else 0
        ceiling = units[i + 1].start if i + 1 < len(units) else len(text)
        before = text[max(floor, unit.start - ANCHOR_CHARS):unit.start]
        after = text[unit.end:min(ceiling, unit.end + ANCHOR_CHARS)]
        site = Site(before, after, unit.start, unit.stability)
        if site.key() not in sites.by_key:
            sites.add(block, site)
