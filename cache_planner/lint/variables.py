"""Template variables: the placeholders a prompt template fills per request.

The planner's detectors (`detectors.DETECTORS`) see rendered prompts, so they look for dates and ids;
a template holds `{{ user }}` or `{name}` instead. Each style is a named regular expression; which
styles apply depends on the template language (a `{name}` in a Jinja file is literal text). Jinja tags
are not variables: only the names an `{% if %}`/`{% for %}` tests or loops over are (`{% else %}`,
`{% endif %}`, `{% set %}`, `{% macro %}` are structure, fixed for every request).
"""

from __future__ import annotations

import re

from prefixgate.cache_planner.detectors import Span

TEMPLATE_DETECTORS: dict[str, re.Pattern[str]] = {
    # Jinja/Mustache/Handlebars expressions: {{ user.name }}, {{name|upper}}, {{{raw}}}.
    "jinja": re.compile(r"\{\{-?.+?-?\}\}", re.S),
    # Jinja branches and loops on a value: what follows depends on it.
    "jinja_branch": re.compile(r"\{%-?\s*(?:if|elif|for)\b.*?-?%\}", re.S),
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

_NAME = re.compile(r"[A-Za-z_][\w.]*")
_STRING = re.compile(r"'[^']*'|\"[^\"]*\"")
_NOT_NAMES = frozenset({"and", "or", "not", "in", "is", "if", "elif", "else", "for", "none", "None", "true",
                        "false", "True", "False", "loop", "recursive", "defined", "endif", "endfor"})


def template_spans(text: str, language: str = "any") -> tuple[Span, ...]:
    """Variable spans of `text` in the given template language, in order, overlaps dropped
    (the first style listed wins: `{{ x }}` is one Jinja expression, not a format field inside one)."""
    found: list[Span] = []
    for style in STYLES[language]:
        for m in TEMPLATE_DETECTORS[style].finditer(text):
            if not any(s.start < m.end() and m.start() < s.end for s in found):
                found.append(Span(m.start(), m.end(), BRANCH if style == "jinja_branch" else KIND))
    return tuple(sorted(found, key=lambda s: s.start))


def names_in(placeholder: str) -> list[str]:
    """The names a placeholder reads: `{{ user.name | upper }}` -> user.name; `{% for t in tools %}` -> tools;
    `{x!r:>10}` -> x. Filters, tests, keywords and string literals are not names."""
    inner = placeholder.strip("{}$%- \n\t")
    inner = _STRING.sub("", inner)
    m = re.match(r"for\s+[\w, ]+\s+in\s+(.*)", inner, re.S)
    if m:
        inner = m.group(1)
    inner = re.sub(r"\|\s*\w+", "", inner)  # filters
    inner = re.sub(r"[A-Za-z_][\w.]*\s*\(", "(", inner)  # a macro or function called: only its arguments are values
    inner = re.split(r"[!:](?![=])", inner, maxsplit=1)[0] if placeholder.startswith("{") and not placeholder.startswith(("{{", "{%")) else inner
    return [n.rstrip(".") for n in _NAME.findall(inner) if n not in _NOT_NAMES and not n[0].isdigit()]
