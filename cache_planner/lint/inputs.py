"""What `prefixgate lint` reads: files found under the given paths, turned into requests and templates.

- `.json`: one native request body (Anthropic, OpenAI or Gemini, told apart by shape and model), or
  one trace record (`{"provider", "model", "body", ...}`).
- `.jsonl`: a trace in the replay format, or a raw request log (one body, or `{"body"|"request": ...}`,
  per line). Trace records keep their time, route and tenant for the cross-request rules.
- `.md`, `.txt`, `.prompt`: a prompt template, every placeholder style counted; `.j2`/`.jinja`: Jinja.
- `.py`: f-string and `.format` templates assigned to prompt-like names (`lint_python`).

A request that its provider would reject is still a subject (rule PG000 reports why).
"""

from __future__ import annotations

import bisect
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefixgate.cache_planner.detectors import Span
from prefixgate.cache_planner.lint.config import DEFAULT_INCLUDE, LintConfig, LintUsageError
from prefixgate.cache_planner.lint.evidence import name_evidence
from prefixgate.cache_planner.lint.jinja import Expanded, check_parses, expand
from prefixgate.cache_planner.lint.json_offsets import offset as json_offset
from prefixgate.cache_planner.lint.python_source import PyTemplate, python_templates
from prefixgate.cache_planner.lint.variables import names_in, template_spans
from prefixgate.dialects import request_dialect
from prefixgate.dialects.responses import is_responses_body
from prefixgate.errors import RequestError
from prefixgate.ir import CACHE_MARKERS, Conversation
from prefixgate.providers.pricing import resolve_model
from prefixgate.providers.rules import ModelRules
from prefixgate.providers.trace import TraceError, TraceRecord, parse_record

TEMPLATE_LANGUAGES = {".md": "any", ".txt": "any", ".prompt": "any", ".j2": "jinja", ".jinja": "jinja",
                      ".jinja2": "jinja"}
SUFFIXES = (".json", ".jsonl", ".py", *TEMPLATE_LANGUAGES)
DEFAULT_GEMINI_MODEL = "gemini-3.8-flash"


@dataclass(frozen=True)
class Location:
    path: str
    line: int       # 1-based
    col: int        # 1-based, in characters
    excerpt: str    # the source line


class Source:
    """A file's text, with offsets mapped to lines and columns."""

    def __init__(self, path: Path, display: str, text: str) -> None:
        self.path, self.display, self.text = path, display, text
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset)

    def location(self, offset: int) -> Location:
        offset = max(0, min(offset, len(self.text)))
        line = self.line_of(offset)
        return self.at(line, offset - self._starts[line - 1] + 1)

    def at(self, line: int, col: int) -> Location:
        start = self._starts[line - 1] if line - 1 < len(self._starts) else len(self.text)
        end = self.text.find("\n", start)
        return Location(self.display, line, col, self.text[start:end if end >= 0 else len(self.text)].rstrip("\r"))


@dataclass
class Request:
    """One native request body, parsed to the IR (`conv` is None when the provider would reject it)."""

    source: Source
    body: dict[str, Any]
    provider: str
    model_name: str
    conv: Conversation | None
    error: str = ""
    model: ModelRules | None = None
    start: int = 0                      # offset of the body's JSON in the source
    body_path: tuple[str | int, ...] = ()  # path of the body inside that JSON (trace records: ("body",))
    record: TraceRecord | None = None
    block_paths: list[tuple[str | int, ...]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.source.display}:{self.source.line_of(self.start)}" if self.record else self.source.display

    def where(self, block: int | None = None, index: int | None = None, path: tuple[str | int, ...] = ()) -> Location:
        """Location of character `index` of block `block`'s text (or of `path` in the body)."""
        if block is not None and self.conv is not None and block < len(self.block_paths):
            path = self.block_paths[block]
            value = _value_at(self.body, path)
            if isinstance(value, dict) and isinstance(value.get("text"), str):
                path, value = (*path, "text"), value["text"]
            if index is not None and value != self.conv.blocks()[block].text:
                index = None  # the block's text is derived (a tool's JSON), not one string in the file
        at = json_offset(self.source.text, self.body_path + path, index, self.start)
        return self.source.location(at)

    def where_marker(self, block: int) -> Location:
        """Location of the cache marker on block `block` (the block itself if it has none in the file)."""
        path = self.block_paths[block]
        native = _value_at(self.body, path)
        key = next((k for k in CACHE_MARKERS if isinstance(native, dict) and k in native), None)
        return self.where(path=(*path, key)) if key else self.where(block)


def _value_at(value: Any, path: tuple[str | int, ...]) -> Any:
    for key in path:
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            return None
    return value


@dataclass
class Template:
    """A prompt template: its text, its variables, and how text offsets map to the source."""

    source: Source
    text: str
    variables: tuple[Span, ...]
    name: str = ""
    python: PyTemplate | None = None
    # Per variable: why its value changes per request ("" when nothing says so; see `evidence`).
    evidence: tuple[str, ...] = ()
    section: str = ""                  # where it lands in the provider's prefix, when the code says
    expanded: Expanded | None = None   # Jinja: includes inlined, an extends parent filled
    references: frozenset[Path] = frozenset()  # files this template includes, extends or imports

    @property
    def label(self) -> str:
        return f"{self.source.display} ({self.name})" if self.name else self.source.display

    def reason(self, span: Span) -> str:
        for s, why in zip(self.variables, self.evidence, strict=False):
            if s == span:
                return why
        return ""

    def where(self, index: int) -> Location:
        py = self.python
        if py is None:
            return self.source.location(self.expanded.origin(index) if self.expanded else index)
        for at, line, col in py.fields:
            if at == index:
                return self.source.at(line, col + 1)
        if not py.contiguous:
            return self.source.at(py.line, py.col + 1)
        line = py.line + self.text.count("\n", 0, index)
        last = self.text.rfind("\n", 0, index)
        col = index - last if last >= 0 else py.col + index + 1
        return self.source.at(line, col)


Subject = Request | Template


# ---- finding files ------------------------------------------------------------------------------

# A folder's own documentation, even in a folder the default globs file as prompts (`prompt_server/README.md`);
# an explicit --include of them lints them.
_DOCUMENTATION = re.compile(r"(?i)(README|CHANGELOG|CONTRIBUTING)\b.*\.(md|txt)$")


def discover(paths: list[str], config: LintConfig, force_exclude: bool = False) -> list[tuple[Path, str]]:
    """(file, display name) for each file to lint: named files as given, directories walked with the
    include and exclude globs (relative to the directory; an include glob may also match from the directory's
    own name, so `lint prompts/` finds what `lint .` finds in prompts/). A missing path is a usage error. With
    `force_exclude` (pre-commit passes every changed file) named files must match the globs too."""
    out: list[tuple[Path, str]] = []
    include = [_glob_regex(g) for g in config.include]
    exclude = [_glob_regex(g) for g in config.exclude]
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for file in sorted(_walk(path, exclude)):
                rel = file.relative_to(path).as_posix()
                filed = f"{path.resolve().name}/{rel}"
                if any(rx.match(rel) or rx.match(filed) for rx in include) and not any(
                        rx.match(rel) for rx in exclude) and not (
                        config.include == DEFAULT_INCLUDE and _DOCUMENTATION.match(file.name)):
                    out.append((file, _display(file)))
        elif path.is_file():
            display = _display(path)
            if force_exclude:
                if path.suffix in SUFFIXES and any(rx.match(display) for rx in include) and not any(
                        rx.match(display) for rx in exclude):
                    out.append((path, display))
                continue
            if path.suffix not in SUFFIXES:
                raise LintUsageError(f"{raw}: cannot lint {path.suffix or 'extensionless'} files "
                                     f"(supported: {', '.join(SUFFIXES)})")
            out.append((path, display))
        else:
            raise LintUsageError(f"{raw}: no such file or directory")
    seen: set[Path] = set()
    return [(p, d) for p, d in out if not (p.resolve() in seen or seen.add(p.resolve()))]  # type: ignore[func-returns-value]


def _walk(root: Path, exclude: list[re.Pattern[str]]) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        rel = Path(folder).relative_to(root).as_posix()
        # Prune excluded folders instead of walking into .venv and node_modules.
        dirs[:] = [d for d in dirs if not any(rx.match(f"{rel}/{d}/x".removeprefix("./")) for rx in exclude)]
        for name in files:
            if name.endswith(SUFFIXES):
                yield Path(folder) / name


def _glob_regex(glob: str) -> re.Pattern[str]:
    """A path glob as a regex: `**/` any folders (or none), `*` within one name, `?` one character."""
    out, i = "", 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif glob.startswith("**", i):
            out, i = out + ".*", i + 2
        elif glob[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif glob[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(glob[i]), i + 1
    return re.compile(out + r"\Z")


def matches(glob: str, display: str) -> bool:
    return bool(_glob_regex(glob).match(display))


def _display(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


# ---- reading files ------------------------------------------------------------------------------

def read_subjects(path: Path, display: str, config: LintConfig, named: bool) -> list[Subject]:
    """The requests and templates in one file. Unreadable files are usage errors (the caller skips
    them, with a note, when a directory walk found them); so is a named .json file that is not a
    request (one found by a walk is left out silently: it is some other JSON)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise LintUsageError(f"{display}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise LintUsageError(f"{display}: cannot read: not UTF-8 text") from None
    source = Source(path, display, text)
    if path.suffix == ".json":
        return _json_file(source, config, named)
    if path.suffix == ".jsonl":
        return _jsonl_file(source, config, named)
    if path.suffix == ".py":
        try:
            found = python_templates(text, config.python_names, config)
        except SyntaxError as e:
            raise LintUsageError(f"{display}:{e.lineno}: not valid Python: {e.msg}") from None
        return [Template(source, t.text, t.variables, t.name, t, t.evidence, t.section) for t in found]
    if not named and _renders_other_files(path):
        return []
    return [read_template(source, TEMPLATE_LANGUAGES[path.suffix], config)]


# Jinja renders more than prompts: `Dockerfile.j2`, `config.yaml.j2` found by a directory walk are not prompts.
_NOT_PROMPTS = (".yaml", ".yml", ".toml", ".json", ".sh", ".py", ".html", ".xml", ".conf", ".cfg", ".ini", ".sql",
                ".js", ".ts", ".css", ".env", ".service")


def _renders_other_files(path: Path) -> bool:
    stem = Path(path.stem)
    return path.suffix in (".j2", ".jinja", ".jinja2") and (
        stem.suffix in _NOT_PROMPTS or stem.name.lower().startswith(("dockerfile", "makefile", "nginx")))


def read_template(source: Source, language: str, config: LintConfig) -> Template:
    """A template file, Jinja includes followed; each variable's evidence comes from the names it reads."""
    if language == "jinja":
        check_parses(source.text, source.display)
    expanded = expand(source.path, source.text) if language == "jinja" else None
    text = expanded.text if expanded else source.text
    spans = template_spans(text, language)
    evidence = tuple(next((e for e in (name_evidence(n, config) for n in names_in(text[s.start:s.end])) if e), "")
                     for s in spans)
    return Template(source, text, spans, evidence=evidence, expanded=expanded,
                    references=frozenset(expanded.references) if expanded else frozenset())


def _json_file(source: Source, config: LintConfig, named: bool) -> list[Subject]:
    try:
        value = json.loads(source.text)
    except json.JSONDecodeError as e:
        if named:
            raise LintUsageError(f"{source.display}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
        return []
    found = _as_request(value, source, config, start=0, line=1)
    if found is None:
        if named:
            raise LintUsageError(f"{source.display}: not a request body (no messages, contents or input) nor a trace record")
        return []
    if not named and found.provider != "gemini" and not found.model_name:
        # Every OpenAI and Anthropic request names its model (Gemini's is in the URL): a JSON file with
        # `input` or `messages` but no model is an app's state or a tool's config, not a request.
        raise LintUsageError(f"{source.display}: has no model, so it is not a request body")
    return [found]


def _jsonl_file(source: Source, config: LintConfig, named: bool) -> list[Subject]:
    out: list[Subject] = []
    start = 0
    for number, line in enumerate(source.text.splitlines(keepends=True), start=1):
        line_start, start = start, start + len(line)
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            raise LintUsageError(f"{source.display}:{number}:{e.colno}: not valid JSON: {e.msg}") from None
        if isinstance(value, dict) and value.get("endpoint", "generate") != "generate":
            continue  # a Gemini cachedContents call in a trace: nothing to lint
        found = _as_request(value, source, config, start=line_start, line=number)
        if found is None:
            raise LintUsageError(f"{source.display}:{number}: neither a trace record nor a request body")
        if not named and found.provider != "gemini" and not found.model_name:
            # As a .json file: messages with no model are a fine-tuning or eval dataset, not a request log.
            raise LintUsageError(f"{source.display}:{number}: has no model, so it is not a request log")
        out.append(found)
    return out


def _as_request(value: Any, source: Source, config: LintConfig, start: int, line: int) -> Request | None:
    if not isinstance(value, dict):
        return None
    record = None
    body_path: tuple[str | int, ...] = ()
    if isinstance(value.get("body"), dict) and value.get("provider"):
        try:
            record = parse_record(json.dumps(value), line, source.display)
        except TraceError as e:
            raise LintUsageError(str(e)) from None
        if record.endpoint != "generate":
            return None
        body, provider, model, body_path = record.body, record.provider, record.model, ("body",)
    else:
        for key in ("body", "request"):
            if isinstance(value.get(key), dict) and _looks_like_request(value[key]):
                body, body_path = value[key], (key,)
                break
        else:
            if not _looks_like_request(value):
                return None
            body = value
        provider = detect_provider(body, config)
        model = body.get("model") if isinstance(body.get("model"), str) else ""
        if provider == "gemini":
            model = (model or value.get("model") or (config.model if config.provider == "gemini" else DEFAULT_GEMINI_MODEL))
        t = value.get("t", value.get("timestamp", line))
        record = TraceRecord(line, float(t) if isinstance(t, int | float) else float(line), provider, model, body,
                             route=str(value.get("route") or "default")) if source.path.suffix == ".jsonl" else None
    return build_request(source, body, provider, str(model), start=start, body_path=body_path, record=record)


def _looks_like_request(body: dict) -> bool:
    return isinstance(body.get("messages"), list) or isinstance(body.get("contents"), list) or is_responses_body(body)


def detect_provider(body: dict, config: LintConfig) -> str:
    """Which API a body is for, from its shape: Gemini has `contents`; Anthropic has a top-level
    `system` or `cache_control`, or a claude model; OpenAI has system/developer messages or a gpt/o model."""
    if "contents" in body:
        return "gemini"
    if is_responses_body(body):
        return "openai"     # the Responses API: `input` / `instructions`, never `messages`
    model = str(body.get("model", "")).lower().split("/")[-1]
    if model.startswith("claude") or "system" in body or "cache_control" in body:
        return "anthropic"
    roles = {m.get("role") for m in body.get("messages", []) if isinstance(m, dict)}
    if roles & {"system", "developer", "tool", "function"} or model.startswith(("gpt", "o1", "o3", "o4", "chatgpt")):
        return "openai"
    return config.provider if config.provider in ("anthropic", "openai") else "openai"


def build_request(source: Source, body: dict, provider: str, model: str, *, start: int = 0,
                  body_path: tuple[str | int, ...] = (), record: TraceRecord | None = None) -> Request:
    dialect = request_dialect(provider, body)
    request = Request(source, body, provider, model, None, start=start, body_path=body_path, record=record)
    try:
        conv = dialect.parse_request(body, model=model)
    except RequestError as e:
        request.error = e.message
        return request
    request.conv = conv
    request.block_paths = block_paths(body, conv)
    try:
        request.model = resolve_model(provider, model)
    except RequestError:
        request.model = None
    return request


def block_paths(body: dict, conv: Conversation) -> list[tuple[str | int, ...]]:
    """The JSON path of each block in `body`. Parsers keep native dicts by identity, so each
    block's dict is found where it sits; a bare-string content is its message's `content`."""
    where: dict[int, tuple[str | int, ...]] = {}

    def walk(value: Any, path: tuple[str | int, ...]) -> None:
        if isinstance(value, dict):
            where[id(value)] = path
            for k, v in value.items():
                walk(v, (*path, k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, (*path, i))

    walk(body, ())
    out = []
    for seg in conv.segments:
        for block in seg.blocks:
            native = block.native
            if isinstance(native, dict) and id(native) in where:
                out.append(where[id(native)])
            elif isinstance(seg.native, dict) and id(seg.native) in where:
                out.append((*where[id(seg.native)], seg.blocks_field or "content"))
            elif seg.blocks_field in ("instructions", "input") and seg.form == "string":
                out.append((seg.blocks_field,))     # a Responses body's bare-string field
            else:
                out.append(("system",) if seg.role == "system" else ())
    return out
