"""Prompt templates inside Python source: f-strings, `.format` templates and template constants
assigned to a prompt-like name (`SYSTEM_PROMPT = f"..."`, `template = "...{x}...".format(...)`).

Only names matching the configured pattern are taken: every module has f-strings, few of them are
prompts. Positions are exact for f-string fields and per line for literal text (the line within the
literal plus the literal's start), which is what a finding needs.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from prefixgate.cache_planner.detectors import Span
from prefixgate.cache_planner.lint.variables import KIND, template_spans


@dataclass(frozen=True)
class PyTemplate:
    name: str
    text: str
    variables: tuple[Span, ...]
    line: int          # 1-based line of the literal's opening quote
    col: int           # 0-based column of the first character of the literal's text
    fields: tuple[tuple[int, int, int], ...] = ()  # f-string fields: (text index, line, col) exact


def python_templates(source: str, names: re.Pattern[str]) -> list[PyTemplate]:
    """The prompt templates assigned to matching names in `source` (raises SyntaxError)."""
    tree = ast.parse(source)
    formatted = {n.func.value.id for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "format"
                 and isinstance(n.func.value, ast.Name)}
    lines = source.splitlines()
    out = []
    for node in ast.walk(tree):
        for name, value in _assignments(node):
            if not names.search(name):
                continue
            template = _template(name, value, formatted, lines)
            if template is not None:
                out.append(template)
    return sorted(out, key=lambda t: t.line)


def _assignments(node: ast.AST) -> list[tuple[str, ast.expr]]:
    if isinstance(node, ast.Assign):
        return [(_target_name(t), node.value) for t in node.targets if _target_name(t)]
    if isinstance(node, ast.AnnAssign) and node.value is not None and _target_name(node.target):
        return [(_target_name(node.target), node.value)]
    return []


def _target_name(target: ast.expr) -> str:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    return ""


def _template(name: str, value: ast.expr, formatted: set[str], lines: list[str]) -> PyTemplate | None:
    if isinstance(value, ast.JoinedStr):
        return _fstring(name, value, lines)
    is_format_call = (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                      and value.func.attr == "format" and _is_str(value.func.value))
    literal = value.func.value if is_format_call else value  # type: ignore[union-attr]
    if not _is_str(literal):
        return None
    text = literal.value  # type: ignore[union-attr]
    language = "format" if is_format_call or name in formatted else "any"
    variables = template_spans(text, language)
    if not variables and not is_format_call:
        return None  # a constant prompt with no placeholders has nothing volatile to report
    line, col = _text_start(literal, lines)
    return PyTemplate(name, text, variables, line, col)


def _is_str(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _text_start(node: ast.expr, lines: list[str]) -> tuple[int, int]:
    """Line and column where the literal's text starts: past its prefix letters and quotes."""
    line = lines[node.lineno - 1] if node.lineno - 1 < len(lines) else ""
    m = re.compile(r"[rRbBfFuU]*('''|\"\"\"|'|\")").match(line, node.col_offset)
    return node.lineno, m.end() if m else node.col_offset


def _fstring(name: str, node: ast.JoinedStr, lines: list[str]) -> PyTemplate:
    text, variables, fields = "", [], []
    for part in node.values:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            text += part.value
        elif isinstance(part, ast.FormattedValue):
            placeholder = "{" + ast.unparse(part.value) + "}"
            variables.append(Span(len(text), len(text) + len(placeholder), KIND))
            # The expression's own position is exact; its brace is one column before it.
            fields.append((len(text), part.value.lineno, max(part.value.col_offset - 1, 0)))
            text += placeholder
    line, col = _text_start(node, lines)
    return PyTemplate(name, text, tuple(variables), line, col, tuple(fields))
