"""A rule's record and registry, and what a check gets and gives: `Context` in, `Hit`s out."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from prefixgate.cache_planner.lint.config import LintConfig, Severity
from prefixgate.cache_planner.lint.inputs import Location, Request, Template
from prefixgate.providers.rules import Catalog, ModelRules

Scope = Literal["request", "template", "corpus"]


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    severity: Severity
    summary: str
    hint: str
    scope: tuple[Scope, ...]
    check: Callable[..., Iterable[Hit]]
    # How a trace's money lost is estimated: "replay" (re-run with the fix), "simulated" (from the
    # simulator's usage), "rejected" (the provider answers 400), or "" (no direct cost).
    cost: str = ""
    # The check's docstring: What it does / Why it matters / Example / Use instead (see `lint.explain`).
    doc: str = ""


@dataclass(frozen=True)
class Hit:
    message: str
    location: Location
    subject: Request | Template
    data: dict[str, Any] = field(default_factory=dict)
    # Later locations with the same cause (SARIF relatedLocations), and a severity set by the evidence.
    related: tuple[Location, ...] = ()
    severity: Severity | None = None


@dataclass
class Context:
    config: LintConfig
    catalog: Catalog
    template_model: ModelRules
    requests: list[Request] = field(default_factory=list)  # every request of the run, for trace evidence

    def minimum(self, model: ModelRules) -> int:
        return self.config.minimum_for(model.id, model.min_cache_tokens)


RULES: dict[str, Rule] = {}


def rule(id: str, name: str, severity: Severity, summary: str, hint: str, *scope: Scope, cost: str = ""
         ) -> Callable[[Callable[..., Iterable[Hit]]], Callable[..., Iterable[Hit]]]:
    def register(check: Callable[..., Iterable[Hit]]) -> Callable[..., Iterable[Hit]]:
        if not check.__doc__:
            raise TypeError(f"rule {id} needs a docstring: it is the rule's documentation")
        RULES[id] = Rule(id, name, severity, summary, hint, scope, check, cost, inspect.cleandoc(check.__doc__))
        return check
    return register
