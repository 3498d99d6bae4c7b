"""Evidence that a value changes per request: what turns a template variable or a detector match into
a PG001 warning. Without evidence a value may well be fixed for a whole session (a repository name, a
fence pair, a reminders block), so it is at most `info`: a linter that cries wolf gets switched off.

A value that changes at most once a day (today's date) is not evidence: cache entries live 5 minutes
to an hour, so a daily change costs no more than the entry expiring, and the value is a session
constant in practice.

Evidence is one of: the value comes from the clock (finer than a day), randomness or a fresh id
(Python data flow); from
a request or user input; its name says so (`time`, `now`, `request_id`, `user_id`, `query`, ...); a
detected value whose kind changes every request (a timestamp, a request id); or a trace in which the value differs between requests of one route. A project declares
names either way in `[tool.prefixgate.lint]`: `session_constants` and `volatile`.
"""

from __future__ import annotations

import re

from prefixgate.cache_planner.lint.config import LintConfig
from prefixgate.cache_planner.stability import DYNAMIC_KINDS

# Name parts that say a value differs between requests: the clock, ids, and per-user or per-request input.
_VOLATILE_WORDS = (
    "time", "now", "timestamp", "datetime", "ts", "clock", "hour", "minute", "uuid", "guid", "nonce", "random",
    "user", "username", "customer", "query", "question", "input",
    "message", "msg", "email", "ticket", "order", "location", "weather", "ip", "turn", "attempt",
    # Retrieval and conversation state: new for every question.
    "retrieved", "retrieval", "chunks", "passages", "snippets", "results", "hits", "history", "transcript", "memories",
)
# Words that, next to a volatile-sounding one, describe something fixed: `date_format`, `user_guide`.
_FIXED_WORDS = ("format", "fmt", "guide", "guidelines", "instructions", "role", "template", "prompt",
                "schema", "type", "types", "zone", "timezone", "tz", "limit", "max", "min", "budget", "out",
                "timeout", "style", "system", "agent", "tool", "tools", "name_field", "label", "labels", "key", "keys")
# Ids of a request or event, not the words alone: `request_verb` ("PR" or "MR") is fixed per deployment.
_ID_OWNERS = ("request", "req", "trace", "span", "message", "msg", "call", "run", "event", "correlation")
_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
# Detector kinds that are never static text in practice: every request carries a new one. A bare clock
# time ("run it at 9am" in a cron tool's description) or a step counter is often fixed text: the planner
# learns those from traffic (`DYNAMIC_KINDS`), the linter seeing one request does not take them as evidence.
STRONG_KINDS = DYNAMIC_KINDS - {"time", "counter"}


def words(name: str) -> list[str]:
    return [w.lower() for w in _SPLIT.split(name) if w]


def name_evidence(name: str, config: LintConfig) -> str:
    """Why the name says its value changes per request, or "" (declared names win)."""
    leaf = name.split(".")[-1]
    if name in config.session_constants or leaf in config.session_constants:
        return ""
    if name in config.volatile or leaf in config.volatile:
        return "declared volatile in [tool.prefixgate.lint]"
    parts = [w for part in name.split(".") for w in words(part)]
    if any(w in _FIXED_WORDS for w in parts):
        return ""
    hit = next((w for w in parts if w in _VOLATILE_WORDS), None)
    if hit is None:
        hit = next((f"{a}_{b}" for a, b in zip(parts, parts[1:], strict=False) if a in _ID_OWNERS and b == "id"), None)
    return f"its name says it changes per request ({hit!r} in {name!r})" if hit else ""


def detected_evidence(kind: str) -> str:
    """Evidence carried by a detector's match in rendered text, seen once: only kinds that are new on
    every request. Anything else ("issue #123" in instructions, a date) is not."""
    if kind in STRONG_KINDS:
        return f"a {kind.replace('_', ' ')} is new on every request"
    return ""
