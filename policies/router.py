"""Which route serves a model name, for which caller."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from prefixgate.cache_planner import CallerCheckpoints, Mode
from prefixgate.errors import RequestError
from prefixgate.policies.schema import CallerKey, Policy, Route


def is_pattern(model: str) -> bool:
    """Whether a route's model entry is a glob (`gpt-*`) rather than one model's name."""
    return any(c in model for c in "*?[")


@dataclass(frozen=True)
class Decision:
    route: Route
    mode: Mode


@cache
def pattern_regex(pattern: str) -> re.Pattern[str]:
    """A route's model pattern: `*` and `?` stop at `/` (an OpenRouter-style `vendor/model` is two names,
    and a model name that smuggles a path must not match a route by accident); `**` crosses it; `[...]` is
    a character class, as in fnmatch."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and "]" in pattern[i + 2:]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1:end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            i = end + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


class Router:
    """Exact model names win over patterns; patterns are tried in route order. A route that names the
    callers' wire formats it serves (`formats`) is passed over for callers of any other."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._exact: dict[str, list[Route]] = {}
        for route in policy.routes:
            for m in route.models:
                if not is_pattern(m):
                    self._exact.setdefault(m, []).append(route)
        self._patterns = [(m, r) for r in policy.routes for m in r.models if is_pattern(m)]

    def route_for(self, model: str, dialect: str = "") -> Route | None:
        route = next((r for r in self._exact.get(model, ()) if r.serves(dialect)), None)
        if route is not None:
            return route
        return next((r for pattern, r in self._patterns if r.serves(dialect) and pattern_regex(pattern).fullmatch(model)), None)

    def decide(self, model: str, caller: CallerKey | None, dialect: str = "") -> Decision:
        route = self.route_for(model, dialect)
        if route is None:
            raise RequestError(f"model {model!r} is not served by this gateway; known: {', '.join(self.model_names())}",
                               field="model", status=404, kind="not_found")
        if caller is not None and caller.routes and route.name not in caller.routes:
            raise RequestError(f"key {caller.name!r} may not use model {model!r} (route {route.name!r})",
                               field="model", status=403, kind="permission")
        mode = caller.planner if caller is not None and caller.planner else route.planner
        return Decision(route, mode)

    def model_names(self) -> list[str]:
        return [m for r in self.policy.routes for m in r.models]


def caller_checkpoints_for(route: Route, caller: CallerKey | None) -> CallerCheckpoints:
    """The key's `caller_checkpoints` where it sets one, else the route's."""
    return caller.caller_checkpoints if caller is not None and caller.caller_checkpoints else route.caller_checkpoints


def priority_for(route: Route, caller: CallerKey | None) -> str:
    """The key's scheduling class where it sets one, else the route's, else normal."""
    return (caller.priority if caller is not None and caller.priority else None) or route.priority or "normal"
