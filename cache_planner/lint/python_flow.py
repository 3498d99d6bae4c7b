"""Following a Python module's data flow to the text of a prompt: `Flow.parts(expr)` flattens an
expression into literal text and values through local names, f-strings, `.format`, `%`, `+`,
`"".join`, `textwrap.dedent` and module constants; `Flow.evidence(expr)` says why a value changes per
request (the clock finer than a day, randomness, a fresh id, the request, user input, its name) or "".
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from prefixgate.cache_planner.lint.config import LintConfig
from prefixgate.cache_planner.lint.evidence import name_evidence
from prefixgate.cache_planner.lint.variables import names_in, template_spans

_CLOCK = re.compile(r"(?:^|\.)(?:now|utcnow|today)$|^time\.(?:time|time_ns|localtime|gmtime|strftime|ctime|asctime|monotonic|perf_counter)$")
_IDS = re.compile(r"(?:^|\.)(?:uuid\d|uuid|ulid|nanoid|ObjectId|token_hex|token_urlsafe|urandom|getrandbits)$")
_RANDOM = re.compile(r"^(?:random|secrets|np\.random|numpy\.random)\.")
# A generator built with a seed gives the same values every run: `random.Random(7)` is not randomness.
_SEEDED = (".Random", ".default_rng", ".RandomState")
_REQUEST_ROOTS = ("request", "req", "flask.request", "event", "payload")
_PERCENT = re.compile(r"%(?:\((\w+)\))?[-#0 +]*\d*(?:\.\d+)?[sdifr]")
_FIELD = re.compile(r"(?<!\{)\{([A-Za-z_]\w*|\d*)((?:\.\w+|\[\w+\])*)(?:![rsa])?(?::[^{}\n]*)?\}(?!\})")
_DEPTH = 8

@dataclass(frozen=True)
class Part:
    text: str
    line: int
    col: int            # 0-based column of the value's first character (of its opening brace for a field)
    value: bool = False
    evidence: str = ""  # why the value changes per request ("" when nothing says so)


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    if isinstance(node, ast.Call):
        return dotted(node.func)
    return ""


def is_str(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def key_of(node: ast.AST | None) -> str:
    return node.value if is_str(node) else ""  # type: ignore[union-attr]

class Flow:
    """One module's names, functions and assignments, for following values to where they come from."""

    def __init__(self, tree: ast.Module, lines: list[str], names: re.Pattern[str], config: LintConfig) -> None:
        self.tree, self.lines, self.names, self.config = tree, lines, names, config
        self.functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        self.module_functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
        self.imported = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
                         if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}
        self.formatted = {n.func.value.id for n in ast.walk(tree)
                          if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "format"
                          and isinstance(n.func.value, ast.Name)}
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
        if is_str(node):
            if literal_template:
                return self._template_literal(node)  # type: ignore[arg-type]
            return [Part(node.value, *self._text_start(node))]  # type: ignore[attr-defined]
        if isinstance(node, ast.JoinedStr):
            out: list[Part] = []
            for v in node.values:
                if is_str(v):
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
        if _repeated_literal(node):
            return [Part(node.left.value * node.right.value, *self._text_start(node.left))]  # type: ignore[attr-defined]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and (is_str(node.left) or isinstance(node.left, ast.Name)):
            return self._fill(self.parts(node.left, at, depth + 1), _PERCENT, node.right, at, depth)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr, base = node.func.attr, node.func.value
            if attr == "format":
                return self._fill(self.parts(base, at, depth + 1), _FIELD, node, at, depth)
            if attr == "join" and is_str(base) and len(node.args) == 1:
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
                                  literal_template=bool(self.names.search(node.id)) and is_str(resolved))
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
            keywords = {key_of(k): v for k, v in zip(args.keys, args.values, strict=True) if is_str(k)}
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
        for sub in _values(node):
            found = self._one(sub, at, depth)
            if found:
                return found
        return ""

    def _one(self, node: ast.AST, at: ast.AST, depth: int) -> str:
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if _daily(node):
                return ""  # the clock read to the day: changes once a day, like an expiring entry
            if self._scope(node) is self.tree and (_CLOCK.search(name) or _IDS.search(name) or _RANDOM.match(name)):
                return ""  # run once, when the module loads: fixed for the process's life, like a session value
            if _CLOCK.search(name):
                return f"it reads the clock ({name}())"
            if _IDS.search(name):
                return f"it is a fresh id ({name}())"
            if _RANDOM.match(name) and not _seeded(node):
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
            if node.id in self.imported:
                return ""  # a module or an imported constant: `time`, `random`, `PROMPT_PREFIX`
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
        if isinstance(node, ast.Subscript) and is_str(node.slice):
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
    if name.endswith(".strftime") and node.args and is_str(node.args[0]):
        return _daily_format(node.args[0].value)  # type: ignore[attr-defined]
    return False


def _seeded(node: ast.Call) -> bool:
    return dotted(node.func).endswith(_SEEDED) and bool(node.args)


def _values(node: ast.AST) -> list[ast.AST]:
    """The nodes whose values flow into `node`, in source order: a call's arguments and receiver, not the
    callable's own name (`random.Random` names a class, `x.now` a method), and nothing under a call
    that gives a fixed value (a seeded generator, the clock read to the day)."""
    out: list[ast.AST] = []
    stack = [node]
    while stack:
        n = stack.pop()
        out.append(n)
        if isinstance(n, ast.Call):
            if _seeded(n) or _daily(n):
                continue
            children = [*n.args, *(k.value for k in n.keywords)]
            if isinstance(n.func, ast.Attribute):
                children.insert(0, n.func.value)
        else:
            children = list(ast.iter_child_nodes(n))
        stack.extend(reversed(children))
    return out


def _advance(line: int, col: int, text: str, index: int) -> tuple[int, int]:
    """Source position of `text[index]` for text that starts at (line, col)."""
    newlines = text.count("\n", 0, index)
    if not newlines:
        return line, col + index
    return line + newlines, index - text.rfind("\n", 0, index) - 1


def _repeated_literal(node: ast.expr) -> bool:
    """`"-" * 40`: a literal repeated a literal number of times is static text (up to a size worth spelling out)."""
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and is_str(node.left)
            and isinstance(node.right, ast.Constant) and type(node.right.value) is int
            and 0 <= len(node.left.value) * node.right.value <= 1_000_000)  # type: ignore[attr-defined]


def _stringy(node: ast.expr) -> bool:
    if is_str(node) or isinstance(node, ast.JoinedStr) or _repeated_literal(node):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return _stringy(node.left) or _stringy(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in ("format", "join", "strip", "lstrip", "rstrip") or dotted(node.func).endswith("dedent")
    if isinstance(node, ast.Call):
        return dotted(node.func).split(".")[-1] in ("dedent", "cleandoc")
    return False
