"""Every model's caching rules against an independent sheet typed from the providers' published pages (not
from providers.toml): the minimum cacheable prompt and the TTLs a marker may ask for. A mistyped minimum
(say Opus 4.6 at 1,024 instead of 4,096) plans breakpoints the provider ignores, so it must fail here. A
model added to the catalogue needs a row here too. Sources (read Nov 2026; the audit in
shared/reference/cost-truth-2026-11.md quotes each):"""

from __future__ import annotations

import pytest

from prefixgate.providers.pricing import resolve_model
from prefixgate.providers.rules import default_catalog

# https://github.com/anthropics/skills/blob/main/skills/claude-api/shared/prompt-caching.md (@fc9191c8) and
# https://platform.claude.com/docs/en/build-with-claude/prompt-caching: minimums per model, on every platform.
ANTHROPIC_MINIMUMS = {
    "claude-fable-5-2": 512, "claude-mythos-5-2": 512,   # not published: the Fable/Mythos 5.x line's 512
    "claude-fable-5-1": 512, "claude-mythos-5-1": 512, "claude-fable-5": 512, "claude-mythos-5": 512,
    "claude-opus-5-5": 512, "claude-sonnet-5-5": 512,    # 512 per three excerpts of the official page
    "claude-opus-5": 512, "claude-opus-4-8": 1024, "claude-opus-4-7": 2048, "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096, "claude-opus-4-1": 1024, "claude-opus-4": 1024, "claude-sonnet-5": 1024,
    "claude-sonnet-4-6": 1024, "claude-sonnet-4-5": 1024, "claude-sonnet-4": 1024,
    "claude-haiku-5-5": 1024,                           # not published
    "claude-haiku-4-5": 4096, "claude-3-5-haiku": 2048,
}
CLAUDE_TTLS = ("5m", "1h")
# https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html (the version with the Fable 5.x rows):
# (minimum, TTLs) per model; both the global. and the regional rows.
BEDROCK = {
    "claude-opus-4-6": (4096, CLAUDE_TTLS), "claude-sonnet-4-6": (1024, CLAUDE_TTLS),
    "claude-opus-4-5": (4096, CLAUDE_TTLS), "claude-sonnet-4-5": (1024, CLAUDE_TTLS),
    "claude-haiku-4-5": (4096, CLAUDE_TTLS), "claude-opus-4-7": (4096, CLAUDE_TTLS),
    "claude-opus-4-8": (1024, CLAUDE_TTLS), "claude-opus-5": (512, CLAUDE_TTLS), "claude-opus-5-5": (512, CLAUDE_TTLS),
    "claude-sonnet-5": (1024, CLAUDE_TTLS), "claude-sonnet-5-5": (512, CLAUDE_TTLS),
    "claude-haiku-5-5": (1024, CLAUDE_TTLS),           # not on AWS's table: Anthropic's minimum
    "claude-fable-5": (512, CLAUDE_TTLS), "claude-fable-5-1": (512, CLAUDE_TTLS), "claude-fable-5-2": (512, CLAUDE_TTLS),
    "claude-mythos-5": (512, CLAUDE_TTLS), "claude-mythos-5-1": (512, CLAUDE_TTLS), "claude-mythos-5-2": (512, CLAUDE_TTLS),
}
BEDROCK_REGIONAL_ONLY = {  # no global profile; an earlier AWS table: 1,024 and 5-minute cache points; Opus 4.1
    # is absent from the current table, which lists no cache point for it
    "claude-opus-4": (1024, ("5m",)), "claude-3-7-sonnet": (1024, ("5m",)), "claude-opus-4-1": (1024, ()),
}
# https://developers.openai.com/api/docs/guides/prompt-caching: 1,024 for every model; GPT-5.6+ breakpoints take a
# ttl of 30m (https://docs.rs/async-openai/0.42.0/async_openai/types/responses/struct.PromptCacheOptionsParam.html),
# 12h only on gpt-6.2-sol (https://developers.openai.com/api/docs/models/gpt-6.2-sol); gpt-5.5 and later
# implicit models accept only 24h retention (openai-python docstring).
OPENAI_BREAKPOINTS = {"gpt-6.2-sol": ("30m", "12h"), "gpt-6.1-sol": ("30m",), "gpt-6-sol": ("30m",),
                      "gpt-6-luna": ("30m",), "gpt-6-astra": ("30m",), "gpt-5.6-sol": ("30m",),
                      "gpt-5.6-terra": ("30m",), "gpt-5.6-luna": ("30m",)}
OPENAI_IMPLICIT = {"gpt-5.5": ("24h",), "gpt-5.5-pro": ("24h",), **{m: ("in_memory", "24h") for m in (
    "gpt-5.4", "gpt-5.4-mini", "gpt-5.4-nano", "gpt-5.2", "gpt-5.1", "gpt-5", "gpt-5-mini", "gpt-5-nano", "gpt-4.1", "gpt-4.1-mini",
    "gpt-4o", "chatgpt-4o-latest", "gpt-4o-mini", "o3", "o4-mini")}}
# https://ai.google.dev/gemini-api/docs/caching (version of 2026-07-07): 2,048 for 2.5 Flash and Pro, 4,096 for
# 3.x Flash and newer and 3.1 Pro. Gemini has no markers.
GEMINI = {"gemini-2.5-flash": 2048, "gemini-2.5-pro": 2048, "gemini-3.1-pro-preview": 4096, "gemini-3.5-flash": 4096,
          "gemini-3.6-flash": 4096, "gemini-3.7-flash": 4096, "gemini-3.8-flash": 4096, "gemini-3.5-flash-lite": 4096,
          "gemini-3.1-flash-lite": 4096, "gemini-3-flash-preview": 4096}
# Hosted OpenAI-compatible providers (shared/reference/responses-bedrock-vertex.md section 4): DeepSeek caches
# whole 64-token prefix units (https://api-docs.deepseek.com/guides/kv_cache), Mistral 64-token blocks, Groq
# from 128, Azure 1,024 as OpenAI; OpenRouter passes each maker's minimum and Claude's 5-minute marker.
COMPATIBLE = {
    ("deepseek", "deepseek-chat"): 64, ("deepseek", "deepseek-reasoner"): 64, ("deepseek", "deepseek-v4-flash"): 64,
    ("deepseek", "deepseek-v4-pro"): 64, ("openrouter", "gpt-4o-mini"): 1024, ("openrouter", "deepseek/deepseek-chat"): 64,
    ("xai", "grok-4"): 1024, ("mistral", "mistral-medium-latest"): 64, ("groq", "gpt-oss-120b"): 128,
    ("fireworks", "accounts/fireworks/models/llama-v3p3-70b-instruct"): 1024, ("azure", "gpt-4o"): 1024,
    ("azure", "gpt-4o-mini"): 1024, ("azure", "gpt-5.4"): 1024, ("azure", "gpt-5.4-mini"): 1024,
    ("azure", "gpt-5.4-nano"): 1024,
}
OPENROUTER_MARKERS = {"claude-sonnet-4.5": 1024, "claude-sonnet-4.6": 1024, "claude-sonnet-5.5": 512,
                      "claude-haiku-4.5": 4096, "gemini-2.5-flash": 2048, "gemini-3.5-flash-lite": 4096,
                      "gemini-3.8-flash": 4096}


def sheet() -> dict[tuple[str, str], tuple[int, tuple[str, ...]]]:
    """(provider, id) -> (minimum, TTLs: marker TTLs, or OpenAI implicit models' retention values)."""
    rows = {("anthropic", m): (n, CLAUDE_TTLS) for m, n in ANTHROPIC_MINIMUMS.items()}
    for base, rule in BEDROCK.items():
        rows[("bedrock", f"global.anthropic.{base}")] = rows[("bedrock", f"anthropic.{base}")] = rule
    rows.update({("bedrock", f"anthropic.{b}"): rule for b, rule in BEDROCK_REGIONAL_ONLY.items()})
    rows.update({("openai", m): (1024, t) for m, t in {**OPENAI_BREAKPOINTS, **OPENAI_IMPLICIT}.items()})
    rows.update({("gemini", m): (n, ()) for m, n in GEMINI.items()})
    rows.update({k: (n, ()) for k, n in COMPATIBLE.items()})
    rows.update({("openrouter", m): (n, ("5m",)) for m, n in OPENROUTER_MARKERS.items()})
    return rows


SHEET = sheet()
CATALOG = default_catalog()


def ttls_of(provider: str, model_id: str) -> tuple[str, ...]:
    m = CATALOG.models[(provider, model_id)]
    if provider == "openai":
        return m.breakpoint_ttls if m.regime == "breakpoints" else m.retention
    if m.breakpoint_ttls == ("30m",):  # OpenAI's default, on a provider with no markers of its own
        return ()
    return m.breakpoint_ttls


def test_the_sheet_lists_every_model_the_catalogue_has():
    assert set(SHEET) == set(CATALOG.models)


@pytest.mark.parametrize("key", sorted(SHEET), ids=lambda k: f"{k[0]}:{k[1]}")
def test_minimum_and_ttls_match_the_published_pages(key):
    minimum, ttls = SHEET[key]
    assert CATALOG.models[key].min_cache_tokens == minimum
    assert ttls_of(*key) == ttls


@pytest.mark.parametrize(("model", "minimum"), [("gemini-2.5-flash", 2048), ("gemini-2.5-pro", 2048),
                                                ("gemini-3.8-flash", 4096)])
def test_vertex_gemini_caches_nothing_under_2048_tokens(model, minimum):
    # "Caching requests must contain a minimum of 2,048 tokens" (Vertex context-cache overview), and never
    # less than the model's own minimum.
    assert resolve_model("vertex", model).min_cache_tokens == max(2048, minimum)
