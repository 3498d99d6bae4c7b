"""PG002 static-prefix-below-minimum."""

from __future__ import annotations

import re
from collections.abc import Iterator

from prefixgate.cache_planner.lint.inputs import Request, Template
from prefixgate.cache_planner.lint.rules.base import Context, Hit, rule
from prefixgate.cache_planner.lint.rules.prefix import location_of, pieces_for, static_prefix_tokens

# PG002 speaks up when the static prefix is at least this share of the minimum: close enough that
# merging shared material into it is realistic; a 50-token prompt is simply too small to cache.
NEAR_MINIMUM = 0.5


# `info`: a prefix below the minimum is never cached, so nothing is billed twice; it is advice on what
# could be cached, not money the prompt loses (warnings are kept for findings that cost money).
@rule("PG002", "static-prefix-below-minimum", "info",
      "The static prefix is shorter than the target model's minimum cacheable length, so it is never cached.",
      "Put the material every request shares (instructions, examples, reference text) first so the prefix "
      "reaches the minimum, or set [tool.prefixgate.lint] min_cache_tokens if your usage shows another minimum.",
      "request", "template")
def static_prefix_below_minimum(subject: Request | Template, ctx: Context) -> Iterator[Hit]:
    """## What it does
    Measures the static prefix (up to the first volatile value) and reports it when it is between half
    and all of the model's minimum cacheable length. Only prompts that start a request are judged:
    not a Jinja fragment another template includes, not a template named as a part (an example, a
    suffix, a user turn, a partial), not a tool description or an early message in Python code.

    ## Why it matters
    Below the minimum (1,024 tokens for most Claude models) the provider caches nothing and says
    nothing: no error, cache counters stay 0.

    ## Example
    A 700-token system prompt followed by a per-request date.

    ## Use instead
    Put the material every request shares (instructions, examples, reference text) first, so the static
    prefix passes the minimum; move the date after it.
    """
    if isinstance(subject, Request) and subject.conv is None:
        return
    if isinstance(subject, Template) and not starts_a_prompt(subject):
        return
    pieces, model = pieces_for(subject, ctx)
    if model is None or not pieces:
        return
    minimum = ctx.minimum(model)
    static = static_prefix_tokens(pieces)
    if not NEAR_MINIMUM * minimum <= static < minimum:
        return
    cut = next((p for p in pieces if p.spans), None)
    why = "; it ends at the first volatile value" if cut else ""
    at = location_of(subject, cut.block, cut.spans[0].start) if cut else location_of(subject, pieces[0].block, 0)
    yield Hit(f"static prefix is about {static:,} tokens, below {model.id}'s minimum of {minimum:,}: the provider "
              f"caches none of it (no error, cache counters stay 0){why}", at, subject,
              {"static": static, "minimum": minimum})


# Template names that say the template is a part of a prompt, appended after something else.
_PART = re.compile(r"(?i)example|suffix|partial|fragment|snippet|include|user|^_")


def starts_a_prompt(t: Template) -> bool:
    if t.section in ("tools", "messages"):
        return False
    if t.python is not None:
        return True
    return not _PART.search(t.source.path.stem) and t.source.path.parent.name not in ("partials", "includes")
