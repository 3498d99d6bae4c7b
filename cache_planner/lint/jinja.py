"""Jinja templates as the engine sees them: `{% include %}` and `{% extends %}` followed, so a fragment
is judged in the prompt it ends up in, and a fragment that is only ever included (or imported for its
macros) is not judged alone. Names resolve like a FileSystemLoader rooted at the template's folder or
one of its parents. A file the engine itself would refuse to parse is a usage error (check_parses)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from prefixgate.cache_planner.lint.config import LintUsageError

_INCLUDE = re.compile(r"\{%-?\s*include\s+['\"]([^'\"]+)['\"][^%]*?-?%\}")
_EXTENDS = re.compile(r"\{%-?\s*extends\s+['\"]([^'\"]+)['\"]\s*-?%\}")
_IMPORT = re.compile(r"\{%-?\s*(?:import|from)\s+['\"]([^'\"]+)['\"]")
_BLOCK = re.compile(r"\{%-?\s*block\s+(\w+)\s*-?%\}(.*?)\{%-?\s*endblock(?:\s+\w+)?\s*-?%\}", re.S)
_PARENTS = 4  # how far up a loader root may sit above the template


@dataclass(frozen=True)
class Piece:
    start: int      # offset in the expanded text
    text: str
    origin: int     # offset in the file's own text: of the text itself, or of the tag that brought it in
    own: bool       # the file's own text (offsets map one to one) or inlined from elsewhere


@dataclass
class Expanded:
    text: str
    pieces: list[Piece]
    references: set[Path] = field(default_factory=set)

    def origin(self, index: int) -> int:
        """Offset in the file's own text of expanded offset `index` (an inlined part: its tag)."""
        for p in self.pieces:
            if p.start <= index < p.start + len(p.text) or (index == p.start + len(p.text) and p is self.pieces[-1]):
                return p.origin + (index - p.start if p.own else 0)
        return 0


def check_parses(text: str, display: str) -> None:
    """A Jinja file the engine would refuse is a usage error, as invalid Python is: its prompt never renders.
    Parsed by Jinja itself, with the extensions whose tags prompt templates use (`trans`, `do`, `break`)."""
    import jinja2

    # Parsed, never rendered: autoescape changes nothing here (set for the scanners).
    env = jinja2.Environment(autoescape=True, extensions=["jinja2.ext.i18n", "jinja2.ext.do", "jinja2.ext.loopcontrols"])
    try:
        env.parse(text)
    except jinja2.TemplateSyntaxError as e:
        raise LintUsageError(f"{display}:{e.lineno}: not valid Jinja: {e.message}") from None


def resolve(name: str, folder: Path) -> Path | None:
    for base in (folder, *list(folder.parents)[:_PARENTS]):
        candidate = base / name
        if candidate.is_file():
            return candidate
    return None


def expand(path: Path, text: str, seen: frozenset[Path] = frozenset()) -> Expanded:
    """`text` with includes inlined and an `extends` parent filled with this file's blocks."""
    seen = seen | {path.resolve()}
    refs = {p.resolve() for m in _IMPORT.finditer(text) if (p := resolve(m.group(1), path.parent))}
    parent = _EXTENDS.search(text)
    if parent and (base := resolve(parent.group(1), path.parent)) and base.resolve() not in seen:
        blocks = {m.group(1): m for m in _BLOCK.finditer(text)}
        inner = expand(base, base.read_text(encoding="utf-8"), seen)
        pieces, out, last = [], "", 0
        for m in _BLOCK.finditer(inner.text):
            mine = blocks.get(m.group(1))
            pieces.append(Piece(len(out), inner.text[last:m.start()], parent.start(), False))
            out += inner.text[last:m.start()]
            if mine:
                pieces.append(Piece(len(out), mine.group(2), mine.start(2), True))
                out += mine.group(2)
            else:
                pieces.append(Piece(len(out), m.group(2), parent.start(), False))
                out += m.group(2)
            last = m.end()
        pieces.append(Piece(len(out), inner.text[last:], parent.start(), False))
        out += inner.text[last:]
        return Expanded(out, [p for p in pieces if p.text], refs | inner.references | {base.resolve()})
    pieces, out, last = [], "", 0
    for m in _INCLUDE.finditer(text):
        target = resolve(m.group(1), path.parent)
        if target is None or target.resolve() in seen:
            continue
        pieces.append(Piece(len(out), text[last:m.start()], last, True))
        out += text[last:m.start()]
        inner = expand(target, target.read_text(encoding="utf-8"), seen)
        pieces.append(Piece(len(out), inner.text, m.start(), False))
        out += inner.text
        refs |= inner.references | {target.resolve()}
        last = m.end()
    pieces.append(Piece(len(out), text[last:], last, True))
    out += text[last:]
    return Expanded(out, [p for p in pieces if p.text] or [Piece(0, "", 0, True)], refs)
