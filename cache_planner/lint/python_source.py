"""Prompts inside Python source, followed through the module's data flow.

A prompt is whatever reaches the provider: the `system`/`tools`/`messages`/`instructions`/`contents`
arguments of the OpenAI, Anthropic and Gemini SDK calls and request dicts, tool descriptions (plain
dicts and `Tool(...)`-style constructors), strings returned by functions whose name says prompt, and
templates assigned to a prompt-like name (`SYSTEM_PROMPT = f"..."`). Each is flattened into `Part`s of
literal text and values by following local names, f-strings, `.format`, `%`, `+`, `"".join`,
`textwrap.dedent` and module constants; each value carries its evidence of changing per request
(`evidence`): the clock, randomness, ids, the request, user input, or its name.

Positions are exact for values; literal text maps by line when the prompt is one literal.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from prefixgate.cache_planner.detectors import Span
from prefixgate.cache_planner.lint.config import LintConfig
from prefixgate.cache_planner.lint.evidence import name_evidence
from prefixgate.cache_planner.lint.variables import names_in, template_spans

# Keyword arguments and request-dict keys that become part of the prompt, and where they land.
SECTIONS = {"tools": "tools", "functions": "tools", "system": "system", "system_prompt": "system",
            "instructions": "system", "system_instruction": "system", "systemInstruction": "system",
            "system_message": "system", "messages": "messages", "contents": "messages"}
# More specific landings win when two readings of the code reach the same value.
_RANK = {"tools": 0, "system": 1, "messages": 2, "": 3}
_TOOL_KEYS = ("parameters", "input_schema", "inputSchema", "function", "args_schema", "schema")
_TOOL_CALL = re.compile(r"(?i)tool|functiondeclaration|from_function")
_CLOCK = re.compile(r"(?:^|\.)(?:now|utcnow|today)$|^time\.(?:time|time_ns|localtime|gmtime|strftime|ctime|asctime|monotonic|perf_counter)$")
_IDS = re.compile(r"(?:^|\.)(?:uuid\d|uuid|ulid|nanoid|ObjectId|token_hex|token_urlsafe|urandom|getrandbits)$")
_RANDOM = re.compile(r"^(?:random|secrets|np\.random|numpy\.random)\.")
_REQUEST_ROOTS = ("request", "req", "flask.request", "event", "payload")
_PERCENT = re.compile(r"%(?:\((\w+)\))?[-#0 +]*\d*(?:\.\d+)?[sdifr]")
_FIELD = re.compile(r"(?<!\{)\{([A-Za-z_]\w*|\d*)((?:\.\w+|\[\w+\])*)(?:![rsa])?(?::[^{}\n]*)?\}(?!\})")
_DEPTH = 8
KIND = "value"


@dataclass(frozen=True)
class Part:
    text: str
    line: int
    col: int            # 0-based column of the value's first character (of its opening brace for a field)
    value: bool = False
    evidence: str = ""  # why the value changes per request ("" when nothing says so)


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
    flow = _Flow(ast.parse(source), source.splitlines(), names, config or LintConfig())
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


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    if isinstance(node, ast.Call):
        return dotted(node.func)
    return ""


def _is_str(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _key(node: ast.AST | None) -> str:
    return node.value if _is_str(node) else ""  # type: ignore[union-attr]


class _Flow:
    def __init__(self, tree: ast.Module, lines: list[str], names: re.Pattern[str], config: LintConfig) -> None:
        self.tree, self.lines, self.names, self.config = tree, lines, names, config
        self.functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        self.module_functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
        self.formatted = {n.func.value.id for n in ast.walk(tree)
                          if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "format"
                          and isinstance(n.func.value, ast.Name)}

    # ---- where prompts are ------------------------------------------------------------------------

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
        keys = {_key(k): v for k, v in zip(node.keys, node.values, strict=True) if _is_str(k)}
        out: list[PyTemplate] = []
        if "description" in keys and "name" in keys and any(k in keys for k in _TOOL_KEYS):
            out += self._prompt(f"tool {_key(keys['name']) or '?'!r} description", keys["description"], "tools", node)
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
                    role = next((_key(v) for k, v in zip(message.keys, message.values, strict=True) if _key(k) == "role"), "")
                out += self._content(f"{key}[{role or '?'}]", message, "system" if role in ("system", "developer") else "messages", at)
            return out
        return []

    def _content(self, name: str, block: ast.expr, section: str, at: ast.AST) -> list[PyTemplate]:
        if isinstance(block, ast.Dict):
            for k, v in zip(block.keys, block.values, strict=True):
                if _key(k) in ("content", "text", "parts"):
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
        literal = value if _is_str(value) or isinstance(value, ast.JoinedStr) else None
        if literal is not None:
            line, col = self._text_start(literal)
        else:
            first = next((p for p in parts if not p.value), parts[0])
            line, col = first.line, first.col
        return [PyTemplate(name, text, tuple(spans), line, col, tuple(fields), tuple(evidence), section, literal is not None)]

    def _text_start(self, node: ast.expr) -> tuple[int, int]:
        """Line and column where the literal's text starts: past its prefix letters and quotes."""
        line = self.lines[node.lineno - 1] if node.lineno - 1 < len(self.lines) else ""
        m = re.compile(r"[rRbBfFuU]*('''|\"\"\"|'|\")").match(line, node.col_offset)
        return node.lineno, m.end() if m else node.col_offset

    # ---- following names ----------------------------------------------------------------------------

    def _scope(self, at: ast.AST) -> ast.AST:
        line = getattr(at, "lineno", 0)
        inside = [f for f in self.functions if f.lineno <= line <= (f.end_lineno or f.lineno)]
        return max(inside, key=lambda f: f.lineno) if inside else self.tree

    def resolve(self, name: str, at: ast.AST) -> ast.expr | None:
        """The expression last assigned to `name` before `at`, in `at`'s function, else in the module."""
        line = getattr(at, "lineno", 0)
        for scope in (self._scope(at), self.tree):
            body = scope.body if scope is self.tree else list(ast.walk(scope))  # type: ignore[attr-defined]
            best: ast.expr | None = None
            for node in body:
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                    if node.lineno < line or best is None:
                        best = node.value
                elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name
                      and node.value is not None and (node.lineno < line or best is None)):
                    best = node.value
            if best is not None:
                return best
            if scope is not self.tree and isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
                if name in {a.arg for a in (*scope.args.args, *scope.args.kwonlyargs, *scope.args.posonlyargs)}:
                    return None  # a parameter: only its name tells
        return None

    def _follow(self, value: ast.expr, at: ast.AST) -> ast.expr:
        for _ in range(_DEPTH):
            if not isinstance(value, ast.Name):
                break
            resolved = self.resolve(value.id, at)
            if resolved is None or resolved is value:
                break
            value = resolved
        return value

    # ---- flattening a string expression -----------------------------------------------------------------

    def parts(self, node: ast.expr, at: ast.AST, depth: int, literal_template: bool = False) -> list[Part]:
        if depth > _DEPTH:
            return [self._value(node, at, depth)]
        if _is_str(node):
            if literal_template:
                return self._template_literal(node)  # type: ignore[arg-type]
            return [Part(node.value, *self._text_start(node))]  # type: ignore[attr-defined]
        if isinstance(node, ast.JoinedStr):
            out: list[Part] = []
            for v in node.values:
                if _is_str(v):
                    out.append(Part(v.value, node.lineno, node.col_offset))  # type: ignore[attr-defined]
                elif isinstance(v, ast.FormattedValue) and v.format_spec is None and self._inlines(v.value, at):
                    out += self.parts(v.value, at, depth + 1)
                elif isinstance(v, ast.FormattedValue):
                    daily = isinstance(v.format_spec, ast.JoinedStr) and _daily_format(ast.unparse(v.format_spec))
                    out.append(Part("{" + ast.unparse(v.value) + "}", v.value.lineno, max(v.value.col_offset - 1, 0),
                                    True, "" if daily else self.evidence(v.value, at, depth + 1)))
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.parts(node.left, at, depth + 1) + self.parts(node.right, at, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and (_is_str(node.left) or isinstance(node.left, ast.Name)):
            return self._fill(self.parts(node.left, at, depth + 1), _PERCENT, node.right, at, depth)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr, base = node.func.attr, node.func.value
            if attr == "format":
                return self._fill(self.parts(base, at, depth + 1), _FIELD, node, at, depth)
            if attr == "join" and _is_str(base) and len(node.args) == 1:
                items = self._follow(node.args[0], at)
                if isinstance(items, ast.List | ast.Tuple):
                    out = []
                    for i, item in enumerate(items.elts):
                        if i:
                            out.append(Part(base.value, base.lineno, base.col_offset))  # type: ignore[attr-defined]
                        out += self.parts(item, at, depth + 1)
                    return out
            if attr in ("strip", "lstrip", "rstrip", "dedent", "cleandoc") and not node.args:
                return self.parts(base, at, depth + 1)
        if isinstance(node, ast.Call) and dotted(node.func).split(".")[-1] in ("dedent", "cleandoc", "str") and len(node.args) == 1:
            return self.parts(node.args[0], at, depth + 1)
        if isinstance(node, ast.Name):
            resolved = self.resolve(node.id, at)
            if resolved is not None and _stringy(resolved):
                return self.parts(resolved, node if resolved is None else resolved, depth + 1,
                                  literal_template=bool(self.names.search(node.id)) and _is_str(resolved))
        return [self._value(node, at, depth)]

    def _inlines(self, node: ast.expr, at: ast.AST) -> bool:
        """A name bound to a string built in this module: its text is part of the prompt."""
        if not isinstance(node, ast.Name):
            return False
        resolved = self.resolve(node.id, at)
        return resolved is not None and _stringy(resolved)

    def _template_literal(self, node: ast.Constant) -> list[Part]:
        """A literal assigned to a prompt-like name is a template: its placeholders are values."""
        text = node.value
        line, col = self._text_start(node)
        out: list[Part] = []
        last = 0
        for span in template_spans(text, "any"):
            out.append(Part(text[last:span.start], *_advance(line, col, text, last)))
            placeholder = text[span.start:span.end]
            names = names_in(placeholder)
            out.append(Part(placeholder, *_advance(line, col, text, span.start), True,
                            next((e for e in (name_evidence(n, self.config) for n in names) if e), "")))
            last = span.end
        out.append(Part(text[last:], *_advance(line, col, text, last)))
        return [p for p in out if p.text]

    def _fill(self, parts: list[Part], pattern: re.Pattern[str], args: ast.expr, at: ast.AST, depth: int) -> list[Part]:
        """Literal parts with their `%s`/`{name}` placeholders turned into values, each with the evidence
        of the argument that fills it."""
        keywords: dict[str, ast.expr] = {}
        positional: list[ast.expr] = []
        if isinstance(args, ast.Call):
            keywords = {k.arg: k.value for k in args.keywords if k.arg}
            positional = list(args.args)
        elif isinstance(args, ast.Dict):
            keywords = {_key(k): v for k, v in zip(args.keys, args.values, strict=True) if _is_str(k)}
        elif isinstance(args, ast.Tuple):
            positional = list(args.elts)
        else:
            positional = [args]
        out: list[Part] = []
        index = 0
        for p in parts:
            if p.value:
                out.append(p)
                continue
            last = 0
            for m in pattern.finditer(p.text):
                out.append(Part(p.text[last:m.start()], *_advance(p.line, p.col, p.text, last)))
                key = m.group(1) or ""
                arg = keywords.get(key) if key and not key.isdigit() else None
                if arg is None and not (key and not key.isdigit()):
                    i = int(key) if key.isdigit() else index
                    index += 1
                    arg = positional[i] if i < len(positional) else None
                if arg is not None and self._inlines(arg, at):
                    out += self.parts(arg, at, depth + 1)
                else:
                    evidence = self.evidence(arg, at, depth + 1) if arg is not None else name_evidence(key, self.config)
                    out.append(Part(m.group(), *_advance(p.line, p.col, p.text, m.start()), True, evidence))
                last = m.end()
            out.append(Part(p.text[last:], *_advance(p.line, p.col, p.text, last)))
        return [p for p in out if p.text]

    def _value(self, node: ast.expr, at: ast.AST, depth: int) -> Part:
        return Part("{" + ast.unparse(node) + "}", node.lineno, node.col_offset, True, self.evidence(node, at, depth + 1))

    # ---- evidence ---------------------------------------------------------------------------------------

    def evidence(self, node: ast.expr, at: ast.AST, depth: int) -> str:
        """Why `node`'s value changes per request, or ""."""
        if depth > _DEPTH or (isinstance(node, ast.Call) and _daily(node)):
            return ""
        for sub in ast.walk(node):
            found = self._one(sub, at, depth)
            if found:
                return found
        return ""

    def _one(self, node: ast.AST, at: ast.AST, depth: int) -> str:
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if _daily(node):
                return ""  # the clock read to the day: changes once a day, like an expiring entry
            if _CLOCK.search(name):
                return f"it reads the clock ({name}())"
            if _IDS.search(name):
                return f"it is a fresh id ({name}())"
            if _RANDOM.match(name):
                return f"it is random ({name}())"
            if name == "input":
                return "it is user input (input())"
            func = self.module_functions.get(name)
            if func is not None:
                for ret in ast.walk(func):
                    if isinstance(ret, ast.Return) and ret.value is not None:
                        found = self.evidence(ret.value, ret, depth + 1)
                        if found:
                            return f"{found}, via {name}()"
            return ""
        if isinstance(node, ast.Name):
            resolved = self.resolve(node.id, at)
            if resolved is not None:
                if isinstance(resolved, ast.Constant):
                    return ""  # a literal is fixed, whatever its name
                found = self.evidence(resolved, resolved, depth + 1)
                if found:
                    return found
            return name_evidence(node.id, self.config)
        if isinstance(node, ast.Attribute):
            name = dotted(node)
            if name.startswith(tuple(f"{r}." for r in _REQUEST_ROOTS)):
                return f"it comes from the request ({name})"
            return name_evidence(node.attr, self.config)
        if isinstance(node, ast.Subscript) and _is_str(node.slice):
            return name_evidence(node.slice.value, self.config)  # type: ignore[attr-defined]
        return ""


_SUB_DAY = re.compile(r"%[HIMSpXcTsfRrkl]")


def _daily_format(fmt: str) -> bool:
    return "%" in fmt and not _SUB_DAY.search(fmt)


def _daily(node: ast.Call) -> bool:
    """A clock read kept to the day: `date.today()`, `x.date()`, `now.strftime("%Y-%m-%d")`."""
    name = dotted(node.func)
    if name.endswith(("date.today", ".date")) or name == "today":
        return True
    if name.endswith(".strftime") and node.args and _is_str(node.args[0]):
        return _daily_format(node.args[0].value)  # type: ignore[attr-defined]
    return False


def _advance(line: int, col: int, text: str, index: int) -> tuple[int, int]:
    """Source position of `text[index]` for text that starts at (line, col)."""
    newlines = text.count("\n", 0, index)
    if not newlines:
        return line, col + index
    return line + newlines, index - text.rfind("\n", 0, index) - 1


def _stringy(node: ast.expr) -> bool:
    if _is_str(node) or isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return _stringy(node.left) or _stringy(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in ("format", "join", "strip", "lstrip", "rstrip") or dotted(node.func).endswith("dedent")
    if isinstance(node, ast.Call):
        return dotted(node.func).split(".")[-1] in ("dedent", "cleandoc")
    return False
