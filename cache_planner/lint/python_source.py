"""Prompts inside Python source, followed through the module's data flow.

A prompt is whatever reaches the provider: the `system`/`tools`/`messages`/`instructions`/`contents`
arguments of the OpenAI, Anthropic and Gemini SDK calls and request dicts, tool descriptions (plain
dicts and `Tool(...)`-style constructors), strings returned by functions whose name says prompt, and
templates assigned to a prompt-like name (`SYSTEM_PROMPT = f"..."`). Each is flattened into `Part`s of
literal text and values by `python_flow.Flow`, each value with its evidence of changing per request.

Positions are exact for values; literal text maps by line when the prompt is one literal.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from prefixgate.cache_planner.detectors import Span
from prefixgate.cache_planner.lint.config import LintConfig
from prefixgate.cache_planner.lint.python_flow import Flow, dotted, is_str, key_of

# Keyword arguments and request-dict keys that become part of the prompt, and where they land.
SECTIONS = {"tools": "tools", "functions": "tools", "system": "system", "system_prompt": "system",
            "instructions": "system", "system_instruction": "system", "systemInstruction": "system",
            "system_message": "system", "messages": "messages", "contents": "messages"}
# More specific landings win when two readings of the code reach the same value.
_RANK = {"tools": 0, "system": 1, "messages": 2, "": 3}
KIND = "value"  # how findings name a value in Python code
_TOOL_KEYS = ("parameters", "input_schema", "inputSchema", "function", "args_schema", "schema")
_TOOL_CALL = re.compile(r"(?i)tool|functiondeclaration|from_function")

@dataclass(frozen=True)
class PyTemplate:
    name: str
    text: str
    variables: tuple[Span, ...]
    line: int          # 1-based line of the prompt's first literal text
    col: int           # 0-based column of it
    fields: tuple[tuple[int, int, int], ...] = ()  # value positions: (text index, line, col) exact
    evidence: tuple[str, ...] = ()                 # per variable: why it changes per request, or ""
    section: str = ""                              # where it lands in the provider's prefix
    contiguous: bool = True                        # one literal: text lines map to source lines


def python_templates(source: str, names: re.Pattern[str], config: LintConfig | None = None) -> list[PyTemplate]:
    """The prompts in `source`, one per distinct first value (raises SyntaxError)."""
    flow = _Prompts(ast.parse(source), source.splitlines(), names, config or LintConfig())
    found: dict[tuple[int, int], PyTemplate] = {}
    for template in flow.templates():
        if not template.variables:
            continue
        first = next((f for f, e in zip(template.fields, template.evidence, strict=False) if e), None)
        key = (first[1], first[2]) if first else (template.fields[0][1], template.fields[0][2]) if template.fields else (template.line, template.col)
        kept = found.get(key)
        if kept is None or _RANK[template.section] < _RANK[kept.section]:
            found[key] = template
    return sorted(found.values(), key=lambda t: (t.line, t.col))

class _Prompts(Flow):
    """Where prompts are: SDK arguments, request dicts, tool descriptions, prompt functions and names."""

    def templates(self) -> list[PyTemplate]:
        out: list[PyTemplate] = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                out += self._call(node)
            elif isinstance(node, ast.Dict):
                out += self._dict(node)
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else ""
                    if name and self.names.search(name):
                        section = "tools" if "tool" in name.lower() else "system" if "system" in name.lower() else ""
                        out += self._prompt(name, node.value, section, node, literal_template=True)
        for func in self.functions:
            if self.names.search(func.name):
                section = "system" if "system" in func.name.lower() else ""
                for ret in ast.walk(func):
                    if isinstance(ret, ast.Return) and ret.value is not None:
                        out += self._prompt(f"{func.name}()", ret.value, section, ret)
        return out

    def _call(self, node: ast.Call) -> list[PyTemplate]:
        out: list[PyTemplate] = []
        name = dotted(node.func)
        for kw in node.keywords:
            if kw.arg in SECTIONS:
                out += self._argument(kw.arg, kw.value, node)
            elif kw.arg == "description" and _TOOL_CALL.search(name):
                out += self._prompt(f"{name}(description=)", kw.value, "tools", node)
        return out

    def _dict(self, node: ast.Dict) -> list[PyTemplate]:
        keys = {key_of(k): v for k, v in zip(node.keys, node.values, strict=True) if is_str(k)}
        out: list[PyTemplate] = []
        if "description" in keys and "name" in keys and any(k in keys for k in _TOOL_KEYS):
            out += self._prompt(f"tool {key_of(keys['name']) or '?'!r} description", keys["description"], "tools", node)
        if "model" in keys or "messages" in keys or "contents" in keys:
            for key, value in keys.items():
                if key in SECTIONS:
                    out += self._argument(key, value, node)
        return out

    def _argument(self, key: str, value: ast.expr, at: ast.AST) -> list[PyTemplate]:
        section = SECTIONS[key]
        value = self._follow(value, at)
        if section == "system":
            if isinstance(value, ast.List | ast.Tuple):  # Anthropic system blocks
                return [t for block in value.elts for t in self._content(key, block, "system", at)]
            return self._prompt(key, value, "system", at)
        if section == "tools":
            # Tool dicts and constructors are found where they are written; a tools list adds nothing.
            return []
        if isinstance(value, ast.List | ast.Tuple):
            # Every turn but the last: the last is where per-request values belong.
            out: list[PyTemplate] = []
            for message in value.elts[:-1]:
                message = self._follow(message, at)
                role = ""
                if isinstance(message, ast.Dict):
                    role = next((key_of(v) for k, v in zip(message.keys, message.values, strict=True) if key_of(k) == "role"), "")
                out += self._content(f"{key}[{role or '?'}]", message, "system" if role in ("system", "developer") else "messages", at)
            return out
        return []

    def _content(self, name: str, block: ast.expr, section: str, at: ast.AST) -> list[PyTemplate]:
        if isinstance(block, ast.Dict):
            for k, v in zip(block.keys, block.values, strict=True):
                if key_of(k) in ("content", "text", "parts"):
                    return self._prompt(name, v, section, at)
            return []
        return self._prompt(name, block, section, at)

    def _prompt(self, name: str, value: ast.expr, section: str, at: ast.AST, literal_template: bool = False) -> list[PyTemplate]:
        parts = self.parts(value, at, 0, literal_template=literal_template)
        if not any(p.value for p in parts):
            return []
        text, spans, fields, evidence = "", [], [], []
        for p in parts:
            if p.value:
                spans.append(Span(len(text), len(text) + len(p.text), KIND))
                fields.append((len(text), p.line, p.col))
                evidence.append(p.evidence)
            text += p.text
        literal = value if is_str(value) or isinstance(value, ast.JoinedStr) else None
        # The text is one run of the file only when nothing was inlined from elsewhere (a module constant).
        one_literal = literal is not None and all(literal.lineno <= p.line <= (literal.end_lineno or p.line) for p in parts)
        if literal is not None:
            line, col = self._text_start(literal)
        else:
            first = next((p for p in parts if not p.value), parts[0])
            line, col = first.line, first.col
        return [PyTemplate(name, text, tuple(spans), line, col, tuple(fields), tuple(evidence), section, one_literal)]
