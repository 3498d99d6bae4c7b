"""`prefixgate lint` settings: `[tool.prefixgate.lint]` in pyproject.toml, then command-line overrides.

Validated here, at the edge: an unknown key, an unknown rule id, a bad severity or a bad pattern is a
`LintUsageError` naming the file and the key, which the CLI turns into exit code 2.

    [tool.prefixgate.lint]
    enable = ["PG001", "PG004"]        # only these rules (default: all)
    disable = ["PG011"]                # never these
    severity = { PG002 = "error" }     # per-rule severity overrides
    fail_on = "warning"                # exit 1 at or above: error | warning | info | never
    provider = "anthropic"             # for templates (request files carry their own)
    model = "claude-sonnet-5-5"
    min_cache_tokens = { "claude-sonnet-4-6" = 2048 }   # or one number for every model
    include = ["prompts/**/*.md"]      # directory walks only; named files are always linted
    exclude = ["tests/fixtures/**"]   # added to the default excludes (.git, virtualenvs, node_modules...)
    python_names = "(?i)prompt|template"
    per_file_ignores = { "legacy/**" = ["PG001"] }
    session_constants = ["repo_name", "fence"]   # template variables fixed for a session: never warned
    volatile = ["build_stamp"]                    # names that change per request, whatever they are called
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from prefixgate.cache_planner.target import PROVIDERS

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
FAIL_ON = ("error", "warning", "info", "never")

DEFAULT_INCLUDE = (
    "**/*.json", "**/*.jsonl", "**/*.j2", "**/*.jinja", "**/*.jinja2", "**/*.prompt", "**/*.py",
    # Markdown and text files are documentation as often as prompts: only those named or filed as prompts.
    "**/*prompt*/**/*.md", "**/*prompt*/**/*.txt", "**/*prompt*.md", "**/*prompt*.txt",
)
DEFAULT_EXCLUDE = (
    ".git/**", "**/.venv*/**", "**/node_modules/**", "**/__pycache__/**", "build/**", "dist/**",
    "**/*.egg-info/**", "**/.pytest_cache/**", "**/.ruff_cache/**", "**/package.json", "**/package-lock.json",
    "**/tsconfig.json", "**/*.sarif",
    # Test suites send their prompts to mocks and fixtures, not to a billed model; name the folder to lint it.
    "tests/**", "test/**", "**/tests/**", "**/test_*.py", "**/*_test.py", "**/conftest.py",
)
DEFAULT_PYTHON_NAMES = r"(?i)prompt|template|instruction|system|persona|preamble"


class LintUsageError(Exception):
    """A bad path, option or setting: the CLI prints the message and exits with code 2."""


@dataclass(frozen=True)
class LintConfig:
    enable: frozenset[str] | None = None
    disable: frozenset[str] = frozenset()
    severity: dict[str, Severity] = field(default_factory=dict)
    fail_on: str = "warning"
    provider: str = "anthropic"
    model: str = "claude-sonnet-5-5"
    min_cache_tokens: int | dict[str, int] | None = None
    include: tuple[str, ...] = DEFAULT_INCLUDE
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    python_names: re.Pattern[str] = re.compile(DEFAULT_PYTHON_NAMES)
    per_file_ignores: dict[str, frozenset[str]] = field(default_factory=dict)
    session_constants: frozenset[str] = frozenset()
    volatile: frozenset[str] = frozenset()
    source: str = "defaults"

    def active(self, rule: str) -> bool:
        return (self.enable is None or rule in self.enable) and rule not in self.disable

    def minimum_for(self, model: str, provider_minimum: int) -> int:
        """The minimum cacheable prefix of `model`: the configured override, else the provider rules'."""
        if isinstance(self.min_cache_tokens, int):
            return self.min_cache_tokens
        if isinstance(self.min_cache_tokens, dict):
            return self.min_cache_tokens.get(model, provider_minimum)
        return provider_minimum


_KEYS = {"enable", "disable", "severity", "fail_on", "provider", "model", "min_cache_tokens", "include",
         "exclude", "python_names", "per_file_ignores", "session_constants", "volatile"}


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start`."""
    for folder in (start.resolve(), *start.resolve().parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(pyproject: Path | None, rule_ids: set[str]) -> LintConfig:
    """Settings from `pyproject`'s `[tool.prefixgate.lint]` table (defaults without one)."""
    if pyproject is None:
        return LintConfig()
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except OSError as e:
        raise LintUsageError(f"cannot read {pyproject}: {e.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise LintUsageError(f"{pyproject} is not valid TOML: {e}") from None
    table = data.get("tool", {}).get("prefixgate", {}).get("lint")
    if table is None:
        return LintConfig()
    return apply(LintConfig(source=str(pyproject)), table, rule_ids, f"{pyproject} [tool.prefixgate.lint]")


def apply(config: LintConfig, raw: dict[str, Any], rule_ids: set[str], where: str) -> LintConfig:
    """`config` with the settings in `raw` (from a file or the command line) validated and applied."""
    if not isinstance(raw, dict):
        raise LintUsageError(f"{where}: expected a table of settings")
    unknown = set(raw) - _KEYS
    if unknown:
        raise LintUsageError(f"{where}: unknown key {sorted(unknown)[0]!r} (known: {', '.join(sorted(_KEYS))})")
    changes: dict[str, Any] = {}
    for key in ("enable", "disable"):
        if key in raw:
            ids = frozenset(_rule_list(raw[key], rule_ids, f"{where}.{key}"))
            changes[key] = ids
    if "severity" in raw:
        table = _table(raw["severity"], f"{where}.severity")
        for rule, sev in table.items():
            _rule_list([rule], rule_ids, f"{where}.severity")
            if sev not in SEVERITIES:
                raise LintUsageError(f"{where}.severity.{rule}: expected one of {', '.join(SEVERITIES)}, got {sev!r}")
        changes["severity"] = {**config.severity, **table}
    if "fail_on" in raw:
        if raw["fail_on"] not in FAIL_ON:
            raise LintUsageError(f"{where}.fail_on: expected one of {', '.join(FAIL_ON)}, got {raw['fail_on']!r}")
        changes["fail_on"] = raw["fail_on"]
    if "provider" in raw:
        if raw["provider"] not in PROVIDERS or raw["provider"] == "local":
            raise LintUsageError(f"{where}.provider: expected anthropic, openai or gemini, got {raw['provider']!r}")
        changes["provider"] = raw["provider"]
    if "model" in raw:
        if not isinstance(raw["model"], str) or not raw["model"]:
            raise LintUsageError(f"{where}.model: expected a model name, got {raw['model']!r}")
        changes["model"] = raw["model"]
    if "min_cache_tokens" in raw:
        changes["min_cache_tokens"] = _minimums(raw["min_cache_tokens"], f"{where}.min_cache_tokens")
    if "include" in raw:
        changes["include"] = tuple(_strings(raw["include"], f"{where}.include"))
    if "exclude" in raw:
        # Added to the excludes so far (the defaults: .git, virtualenvs, node_modules, ...), never replacing them.
        changes["exclude"] = config.exclude + tuple(_strings(raw["exclude"], f"{where}.exclude"))
    if "python_names" in raw:
        try:
            changes["python_names"] = re.compile(str(raw["python_names"]))
        except re.error as e:
            raise LintUsageError(f"{where}.python_names: not a regular expression: {e}") from None
    if "per_file_ignores" in raw:
        table = _table(raw["per_file_ignores"], f"{where}.per_file_ignores")
        changes["per_file_ignores"] = {glob: frozenset(_rule_list(ids, rule_ids, f"{where}.per_file_ignores.{glob}"))
                                       for glob, ids in table.items()}
    for key in ("session_constants", "volatile"):
        if key in raw:
            changes[key] = getattr(config, key) | frozenset(_strings(raw[key], f"{where}.{key}"))
    return replace(config, **changes)


def _rule_list(value: Any, rule_ids: set[str], where: str) -> list[str]:
    ids = [v.strip().upper() for v in _strings(value, where)]
    bad = [i for i in ids if i not in rule_ids and i != "ALL"]
    if bad:
        raise LintUsageError(f"{where}: unknown rule {bad[0]!r} (rules: {', '.join(sorted(rule_ids))})")
    return sorted(rule_ids) if "ALL" in ids else ids


def _strings(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise LintUsageError(f"{where}: expected a list of strings")
    return value


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise LintUsageError(f"{where}: expected a table")
    return value


def _minimums(value: Any, where: str) -> int | dict[str, int]:
    def number(v: Any, at: str) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise LintUsageError(f"{at}: expected a token count >= 0, got {v!r}")
        return v

    if isinstance(value, dict):
        return {str(k): number(v, f"{where}.{k}") for k, v in value.items()}
    return number(value, where)
