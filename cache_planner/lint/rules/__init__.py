"""The lint rules, one module per rule, named by code. Each rule's docstring is its documentation
(What it does / Why it matters / Example / Use instead): `prefixgate lint --explain`, the rules table in
docs/lint-rules.md and SARIF's `fullDescription` are generated from it (`lint.explain`).

The checks reuse the planner's own pieces so the linter and the gateway never disagree: volatile
values come from `detectors` (plus template variables), per-request values from `DYNAMIC_KINDS`,
minimums, breakpoint limits and TTLs from the provider rules, token counts from `prefixgate.tokens`.
Importing a rule module registers it in `RULES`.
"""

from prefixgate.cache_planner.lint.rules import (  # noqa: F401  (imported to register the rules)
    pg000_invalid_request,
    pg001_volatile_before_static,
    pg002_static_prefix_below_minimum,
    pg003_checkpoint_below_minimum,
    pg004_too_many_breakpoints,
    pg005_checkpoint_after_volatile,
    pg006_ttl_order,
    pg007_unstable_key_order,
    pg008_whitespace_only_system_diff,
    pg009_gemini_cached_content_conflict,
    pg010_conversation_rewrite,
    pg011_document_after_question,
    pg012_anthropic_no_checkpoint,
)
from prefixgate.cache_planner.lint.rules.base import RULES, Context, Hit, Rule

__all__ = ["RULES", "Context", "Hit", "Rule"]
