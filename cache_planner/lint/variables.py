"""Template variables: the placeholders a prompt template fills per request, volatile by construction.

The planner's detectors (`detectors.DETECTORS`) see rendered prompts, so they look for dates and ids;
a template holds `{{ user }}` or `{name}` instead. These detectors are the linter's addition, kept
apart so they can be folded into the planner's table later. Each style is a named regular expression;
which styles apply depends on the template language (a `{name}` in a Jinja file is literal text).
"""

from __future__ import annotations

import re

from prefixgate.cache_planner.detectors import Span

TEMPLATE_DETECTORS: dict[str, re.Pattern[str]] = {
    # Jinja/Mustache/Handlebars expressions: {{ user.name }}, {{name|upper}}, {{{raw}}}.
    "jinja": re.compile(r"\{\{-?.+?-?\}\}", re.S),
    # Jinja branches and loops: what follows depends on the request. (include/block/set/end* do not.)
    "jinja_branch": re.compile(r"\{%-?\s*(?:if|elif|else|for)\b.*?-?%\}", re.S),
    # Shell and JavaScript template literals: ${var}.
    "dollar": re.compile(r"\$\{[^{}\n]+\}"),
    # str.format / f-string fields: {name}, {user.name}, {items[0]}, {0}, {x!r:>10}; not {{escaped}}.
    "format": re.compile(r"(?<!\{)\{(?:[A-Za-z_]\w*|\d+)(?:\.\w+|\[\w+\])*(?:![rsa])?(?::[^{}\n]*)?\}(?!\})"),
}

# Template languages and the styles that are variables in them.
STYLES: dict[str, tuple[str, ...]] = {
    "jinja": ("jinja", "jinja_branch"),
    "format": ("format",),
    # Plain .md/.txt prompts: filled by whatever the application uses, so every style counts.
    "any": ("jinja", "jinja_branch", "dollar", "format"),
}

KIND = "template variable"
BRANCH = "template branch"


def template_spans(text: str, language: str = "any") -> tuple[Span, ...]:
    """Variable spans of `text` in the given template language, in order, overlaps dropped
    (the first style listed wins: `{{ x }}` is one Jinja expression, not a format field inside one)."""
    found: list[Span] = []
    for style in STYLES[language]:
        for m in TEMPLATE_DETECTORS[style].finditer(text):
            if not any(s.start < m.end() and m.start() < s.end for s in found):
                found.append(Span(m.start(), m.end(), BRANCH if style == "jinja_branch" else KIND))
    return tuple(sorted(found, key=lambda s: s.start))
