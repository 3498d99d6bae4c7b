"""Prices against independent sources. The sheet below was transcribed from the public pricing pages named on
each row (via the fact sheets the project was built from), not from the catalogue, so a mistyped or shifted
price fails here; every model the catalogue prices is either on it or priced by genai-prices, which the last
tests compare with genai-prices' own calculation (a different code path: ours converts its tables once).
USD per million tokens, as in force on AT; None marks a value no public source gives, which is not checked."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import genai_prices
import pytest

from prefixgate.cost import price_usage
from prefixgate.providers.rules import default_catalog
from prefixgate.providers.schedule import period_at
from prefixgate.usage import Usage

AT = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)

CLAUDE_PRICING = "https://platform.claude.com/docs/en/about-claude/pricing"
OPENAI_CACHING_COOKBOOK = "https://developers.openai.com/cookbook/examples/prompt_caching_201"
OPENAI_PRICING = "https://openai.com/api/pricing/"
APIYI_MODELS = "https://docs.apiyi.com/models/index.md"
DEPLOYBASE_OPENAI = "https://deploybase.ai/articles/openai-pricing"
GEMINI_PRICING = "https://ai.google.dev/gemini-api/docs/pricing"
# pydantic's genai-prices data, read with its calc_price (the helper models clients call by default).
GENAI_PRICES = "https://github.com/pydantic/genai-prices"


def anthropic(model: str, inp: str, write_5m: str, write_1h: str, read: str, out: str, source: str) -> tuple:
    return ("anthropic", model, inp, read, out, {"5m": write_5m, "1h": write_1h}, "0", source)


def openai(model: str, inp: str, read: str, out: str | None, source: str, writes: dict | None = None) -> tuple:
    return ("openai", model, inp, read, out, writes or {}, "0", source)


def gemini(model: str, inp: str, read: str | None, out: str, storage: str | None, source: str) -> tuple:
    return ("gemini", model, inp, read, out, {}, storage, source)


# Anthropic: input, 5m write, 1h write, cache read, output.
SHEET = [
    anthropic("claude-fable-5-2", "8", "10", "16", "0.20", "40",
              "https://docs.laozhang.ai/en/announcements/claude-fable-5-2-2026-11.md"),
    anthropic("claude-fable-5-1", "10", "12.50", "20", "0.25", "50", CLAUDE_PRICING),
    anthropic("claude-mythos-5-1", "10", "12.50", "20", "0.25", "50", CLAUDE_PRICING),
    anthropic("claude-fable-5", "10", "12.50", "20", "1.00", "50", CLAUDE_PRICING),
    anthropic("claude-mythos-5", "10", "12.50", "20", "1.00", "50", CLAUDE_PRICING),
    anthropic("claude-opus-5-5", "4", "5", "8", "0.20", "20", "https://platform.claude.com/docs/zh-CN/models/opus-5-5/overview"),
    anthropic("claude-opus-5", "5", "6.25", "10", "0.50", "25", "https://platform.claude.com/docs/en/models/opus-5/overview"),
    anthropic("claude-opus-4-8", "5", "6.25", "10", "0.50", "25", CLAUDE_PRICING),
    anthropic("claude-opus-4-7", "5", "6.25", "10", "0.50", "25", CLAUDE_PRICING),
    anthropic("claude-opus-4-6", "5", "6.25", "10", "0.50", "25", CLAUDE_PRICING),
    anthropic("claude-opus-4-5", "5", "6.25", "10", "0.50", "25", CLAUDE_PRICING),
    anthropic("claude-opus-4-1", "15", "18.75", "30", "1.50", "75", CLAUDE_PRICING),
    anthropic("claude-opus-4", "15", "18.75", "30", "1.50", "75", CLAUDE_PRICING),
    # Reads cut to $0.10 (0.05x) on 2026-10-07: the pricing page as quoted on 2026-10-08 and 2026-10-10.
    anthropic("claude-sonnet-5-5", "2", "2.50", "4", "0.10", "10", CLAUDE_PRICING),
    anthropic("claude-mythos-5-2", "8", "10", "16", "0.20", "40", "https://docs.laozhang.ai/en/announcements/claude-fable-5-2-2026-11.md"),
    anthropic("claude-sonnet-5", "2", "2.50", "4", "0.20", "10", "https://platform.claude.com/docs/zh-CN/models/sonnet-5/overview"),
    anthropic("claude-sonnet-4-6", "3", "3.75", "6", "0.30", "15", CLAUDE_PRICING),
    anthropic("claude-sonnet-4-5", "3", "3.75", "6", "0.30", "15", CLAUDE_PRICING),
    anthropic("claude-sonnet-4", "3", "3.75", "6", "0.30", "15", CLAUDE_PRICING),
    anthropic("claude-haiku-5-5", "0.10", "0.125", "0.20", "0.01", "0.50", "https://platform.claude.com/docs/en/models/haiku-5-5/overview"),
    anthropic("claude-haiku-4-5", "1", "1.25", "2", "0.10", "5", CLAUDE_PRICING),
    anthropic("claude-3-5-haiku", "0.80", "1", "1.60", "0.08", "4", CLAUDE_PRICING),
    # OpenAI: input, cached input, output; writes only in the GPT-5.6+ regime (30m = 1.25x input).
    openai("gpt-6.2-sol", "2.00", "0.10", "10.00", "https://developers.openai.com/api/docs/models/gpt-6.2-sol",
           {"30m": "2.50", "12h": "5.00"}),
    openai("gpt-6.1-sol", "2.00", "0.10", "10.00", "https://developers.openai.com/api/docs/models/gpt-6.1-sol", {"30m": "2.50"}),
    openai("gpt-6-sol", "2.00", "0.20", "10.00", "https://developers.openai.com/docs/models/gpt-6-sol", {"30m": "2.50"}),
    openai("gpt-6-luna", "0.10", "0.01", "0.50", "https://github.com/merefield/codexometer/releases/tag/v0.18.4", {"30m": "0.125"}),
    openai("gpt-6-astra", "10", "1", "50", APIYI_MODELS, {"30m": "12.50"}),
    openai("gpt-5.6-sol", "4.00", "0.40", "20.00", APIYI_MODELS, {"30m": "5.00"}),
    openai("gpt-5.6-terra", "2", "0.20", "12", APIYI_MODELS, {"30m": "2.50"}),
    openai("gpt-5.6-luna", "0.20", "0.02", "1.20", APIYI_MODELS, {"30m": "0.25"}),
    openai("gpt-5.5", "5.00", "0.50", "30.00", APIYI_MODELS),
    openai("gpt-5.5-pro", "30", None, "180", APIYI_MODELS),   # a cached price is published for no Pro model
    openai("gpt-5.4", "2.50", "0.25", "15", APIYI_MODELS),
    openai("gpt-5.4-mini", "0.75", "0.075", "4.50", APIYI_MODELS),
    openai("gpt-5.4-nano", "0.20", "0.02", "1.25", GENAI_PRICES),
    openai("gpt-5.2", "1.75", "0.175", "14", OPENAI_PRICING),
    openai("gpt-5.1", "1.25", "0.125", "10", DEPLOYBASE_OPENAI),
    openai("gpt-5", "1.25", "0.125", "10", DEPLOYBASE_OPENAI),
    openai("gpt-5-mini", "0.25", "0.025", "2", DEPLOYBASE_OPENAI),
    openai("gpt-5-nano", "0.05", "0.005", "0.40", OPENAI_CACHING_COOKBOOK),
    openai("gpt-4.1", "2.00", "0.50", "8", OPENAI_CACHING_COOKBOOK),
    openai("gpt-4.1-mini", "0.40", "0.10", "1.60", OPENAI_CACHING_COOKBOOK),   # 75% off on gpt-4.1 models
    openai("gpt-4o", "2.50", "1.25", "10", OPENAI_CACHING_COOKBOOK),
    openai("gpt-4o-mini", "0.15", "0.075", "0.60", OPENAI_CACHING_COOKBOOK),
    openai("o3", "2.00", "0.50", "8", OPENAI_PRICING),
    openai("o4-mini", "1.10", "0.275", "4.40", OPENAI_PRICING),
    openai("chatgpt-4o-latest", "5", None, "15", OPENAI_PRICING),
    # Gemini: input, cached input, output, explicit-cache storage per MTok-hour.
    # Introductory rates through 2026-12-31 (Google's pricing page as quoted by the sources; 3.8's cached rate assumed).
    gemini("gemini-3.8-flash", "0.75", None, "3.75", None, "https://github.com/BerriAI/litellm/discussions/39357"),
    gemini("gemini-3.7-flash", "0.75", "0.075", "3.75", None, "https://github.com/pydantic/genai-prices/pull/564"),
    gemini("gemini-3.6-flash", "0.75", "0.075", "3.75", None, "https://github.com/pydantic/genai-prices/pull/564"),
    gemini("gemini-3.5-flash", "1.50", "0.15", "9.00", "1.00", "https://effloow.com/lab-runs/gemini-3-5-flash-api-developer-guide-2026"),
    gemini("gemini-3.5-flash-lite", "0.30", "0.03", "2.50", None, GENAI_PRICES),
    gemini("gemini-3.1-flash-lite", "0.25", "0.025", "1.50", None, GENAI_PRICES),
    gemini("gemini-3.1-pro-preview", "2.00", "0.20", "12.00", None, "https://docs.apiyi.com/en/api-capabilities/gemini/prompt-caching"),
    gemini("gemini-3-flash-preview", "0.50", "0.05", "3.00", None, "https://factquire.com/models/google/gemini-3-flash-preview.json"),
    # Cached input: 90% off (the current Vertex page); a 2025 forum quote at 75% off said 0.31.
    gemini("gemini-2.5-pro", "1.25", "0.125", "10", "4.50", GEMINI_PRICING),
    gemini("gemini-2.5-flash", "0.30", "0.03", "2.50", "1.00", GEMINI_PRICING),
]

# Claude on Amazon Bedrock (https://platform.claude.com/docs/en/build-with-claude/claude-on-amazon-bedrock):
# `global.` profiles at Anthropic's list price, regional and geographic ones 10% over it from Sonnet 4.5 on,
# older models one price. Derived here from the Anthropic rows above by that rule, so a shifted Bedrock row
# or a wrong markup fails. Only the TTLs AWS's caching table lists for the model have a write price.
BEDROCK_PRICING = "https://platform.claude.com/docs/en/build-with-claude/claude-on-amazon-bedrock"


def bedrock(base: str, ttls: tuple[str, ...], *, regional: bool, markup: str = "1.1") -> tuple:
    _, _, inp, read, out, writes, _, _ = next(r for r in SHEET if r[:2] == ("anthropic", base))
    factor = Decimal(markup) if regional else Decimal(1)
    scaled = lambda v: str(Decimal(v) * factor)  # noqa: E731
    model = f"anthropic.{base}" if regional else f"global.anthropic.{base}"
    return ("bedrock", model, scaled(inp), scaled(read), scaled(out), {t: scaled(writes[t]) for t in ttls}, "0",
            BEDROCK_PRICING)


for _base in ("claude-opus-4-6", "claude-sonnet-4-6", "claude-opus-4-5", "claude-sonnet-4-5", "claude-haiku-4-5",
              "claude-opus-5-5", "claude-opus-5", "claude-opus-4-8", "claude-opus-4-7", "claude-sonnet-5-5",
              "claude-sonnet-5", "claude-fable-5-2", "claude-mythos-5-2", "claude-fable-5-1", "claude-fable-5",
              "claude-mythos-5-1", "claude-mythos-5"):
    SHEET += [bedrock(_base, ("5m", "1h"), regional=False), bedrock(_base, ("5m", "1h"), regional=True)]
# Older models: one price everywhere, and no 1h write price on Bedrock.
SHEET += [bedrock("claude-opus-4", ("5m",), regional=True, markup="1"),
          bedrock("claude-opus-4-1", ("5m",), regional=True, markup="1")]
SHEET.append(("bedrock", "anthropic.claude-3-7-sonnet", "3", "0.30", "15", {"5m": "3.75"}, "0", BEDROCK_PRICING))

# Hosted OpenAI-compatible providers: their pages document the cache discount, not (as far as the fact sheet
# found) the list prices, which the table marks unconfirmed in each row's note; so the list prices are not
# checked here (None) and the documented discounts are, in test_compatible_cache_discounts_match_their_pages.
COMPATIBLE = [
    ("deepseek", "deepseek-chat"), ("deepseek", "deepseek-reasoner"), ("openrouter", "gpt-4o-mini"),
    ("openrouter", "deepseek/deepseek-chat"), ("xai", "grok-4"), ("mistral", "mistral-medium-latest"),
    ("groq", "gpt-oss-120b"), ("fireworks", "accounts/fireworks/models/llama-v3p3-70b-instruct"),
    ("azure", "gpt-4o"), ("azure", "gpt-4o-mini"),
]
CACHING_PAGES = {
    "deepseek": "https://api-docs.deepseek.com/guides/kv_cache",
    "openrouter": "https://openrouter.ai/docs/features/prompt-caching",
    "xai": "https://docs.x.ai/developers/advanced-api-usage/prompt-caching/usage-and-pricing",
    "mistral": "https://docs.mistral.ai/studio-api/conversations/advanced/prompt-caching",
    "groq": "https://console.groq.com/docs/prompt-caching",
    "fireworks": "https://docs.fireworks.ai/guides/prompt-caching",
    "azure": "https://learn.microsoft.com/azure/foundry/openai/how-to/prompt-caching",
}
SHEET += [(p, m, None, None, None, {}, "0", CACHING_PAGES[p]) for p, m in COMPATIBLE]
# Azure's GPT-5.4 family on Global Standard, at OpenAI's list price (input, cached input, output per MTok):
# "Azure OpenAI token pricing matches OpenAI's direct API pricing for the GPT-5.4 family".
AZURE_GPT54 = "https://aicosthub.com/guides/azure-openai-pricing-2026"
SHEET += [("azure", "gpt-5.4", "2.50", "0.25", "15", {}, "0", AZURE_GPT54),
          ("azure", "gpt-5.4-mini", "0.75", "0.075", "4.50", {}, "0", AZURE_GPT54),
          ("azure", "gpt-5.4-nano", "0.20", "0.02", "1.25", {}, "0", AZURE_GPT54)]
# OpenRouter's Claude and Gemini models, at their makers' list prices with OpenRouter's cache terms: Claude
# writes 1.25x and reads 0.1x; Gemini writes at input plus 5 minutes of storage ($1.00/MTok-hour: 0.30 + 1/12).
SHEET += [
    ("openrouter", "claude-sonnet-4.5", "3", "0.30", "15", {"5m": "3.75"}, "0", CLAUDE_PRICING),
    ("openrouter", "claude-haiku-4.5", "1", "0.10", "5", {"5m": "1.25"}, "0", CLAUDE_PRICING),
]
# Cached input as a share of input, per provider page (P4 xAI 0.25x, P5 Mistral 10%, P7 Groq 50% off, P8
# Fireworks 50% off by default, P6 Azure at OpenAI's 50% on gpt-4o).
DISCOUNTS = {"xai": "0.25", "mistral": "0.10", "groq": "0.50", "fireworks": "0.50", "azure": "0.50"}
# DeepSeek bills by the clock: the standard (no-window) price and each window's, from genai-prices' sources
# (https://api-docs.deepseek.com/quick_start/pricing, peak hours since 2026-08-16): (UTC time, input, read, output).
DEEPSEEK_CLOCK = [("deepseek-v4-flash", "02:00", "0.30", "0.006", "1.20"), ("deepseek-v4-flash", "12:00", "0.15", "0.003", "0.60"),
                  ("deepseek-chat", "12:00", "0.27", "0.07", "1.10"), ("deepseek-chat", "20:00", "0.135", "0.035", "0.55")]

# Above a prompt size the whole request is billed at another row: (provider, model, above, input, cached
# input, output, writes). GPT-6 sol: input and cache rates x2, output x1.5 above 272K.
LONG_CONTEXT = [
    ("anthropic", "claude-haiku-5-5", 100_000, "0.50", "0.05", "2.50", {"5m": "0.625", "1h": "1.00"}),
    ("openai", "gpt-6.2-sol", 272_000, "4.00", "0.20", "15.00", {"30m": "5.00", "12h": "10.00"}),
    ("openai", "gpt-6-sol", 272_000, "4.00", "0.40", "15.00", {"30m": "5.00"}),
    # "above 272K input: $4 / $0.20 / $15 for the whole request" (https://developers.openai.com/api/docs/models/gpt-6.1-sol)
    ("openai", "gpt-6.1-sol", 272_000, "4.00", "0.20", "15.00", {"30m": "5.00"}),
    ("gemini", "gemini-3.1-pro-preview", 200_000, "4.00", None, "18.00", {}),
    ("gemini", "gemini-2.5-pro", 200_000, "2.50", "0.25", "15", {}),
]

CATALOG = default_catalog()


def base(provider: str, model: str):
    return period_at(CATALOG.models[(provider, model)].periods, AT, windows=False)


def test_every_model_is_on_the_sheet_or_priced_by_genai_prices():
    on_sheet = {(row[0], row[1]) for row in SHEET}
    assert on_sheet <= set(CATALOG.models)
    for key, model in CATALOG.models.items():
        assert key in on_sheet or model.origin == "genai-prices", key
    for provider, model, above, *_ in LONG_CONTEXT:
        assert above in {t.above for t in base(provider, model).long_context}, model


def test_compatible_cache_discounts_match_their_pages():
    for provider, model in COMPATIBLE:
        if provider in DISCOUNTS:
            price = base(provider, model).base.price
            assert price.cache_read == price.input * Decimal(DISCOUNTS[provider]), (provider, model)


def test_openrouter_claude_rows_take_openrouters_cache_multipliers():
    for model in ("claude-sonnet-4.5", "claude-sonnet-4.6", "claude-haiku-4.5"):   # (Sonnet 5.5 reads at 0.05x)
        price = base("openrouter", model).base.price
        assert price.cache_write == {"5m": price.input * Decimal("1.25")} and price.cache_read == price.input / 10
        assert CATALOG.models[("openrouter", model)].breakpoint_ttls == ("5m",)  # expires within five minutes


@pytest.mark.parametrize("row", SHEET, ids=lambda row: f"{row[0]}:{row[1]}")
def test_base_price_matches_the_public_sheet(row):
    provider, model, inp, read, out, writes, storage, source = row
    assert source.startswith("https://")
    price = base(provider, model).base.price
    expected = {"input": inp, "cache_read": read, "output": out, "storage_per_hour": storage}
    for name, value in expected.items():
        if value is not None:
            assert getattr(price, name) == Decimal(value), name
    assert price.cache_write == {ttl: Decimal(v) for ttl, v in writes.items()}


@pytest.mark.parametrize("row", LONG_CONTEXT, ids=lambda row: row[1])
def test_long_context_price_matches_the_public_sheet(row):
    provider, model, above, inp, read, out, writes = row
    tier = next(t for t in base(provider, model).long_context if t.above == above)
    assert tier.price.input == Decimal(inp) and tier.price.output == Decimal(out)
    if read is not None:
        assert tier.price.cache_read == Decimal(read)
    assert tier.price.cache_write == {ttl: Decimal(v) for ttl, v in writes.items()}


@pytest.mark.parametrize("row", DEEPSEEK_CLOCK, ids=lambda row: f"{row[0]}@{row[1]}")
def test_deepseek_prices_follow_the_clock(row):
    model, clock, inp, read, out = row
    at = datetime.combine(AT.date(), datetime.strptime(clock, "%H:%M").time(), UTC)
    price = CATALOG.models[("deepseek", model)].price_for(1000, at)
    assert (price.input, price.cache_read, price.output) == (Decimal(inp), Decimal(read), Decimal(out))


def test_dated_prices_change_on_their_day():
    flash = CATALOG.models[("gemini", "gemini-3.8-flash")]
    assert flash.price_for(1000, datetime(2026, 12, 31, 23, tzinfo=UTC)).input == Decimal("0.75")
    assert flash.price_for(1000, datetime(2027, 1, 1, 0, tzinfo=UTC)).input == Decimal("1.50")


# Usage shapes priced both ways: small, above 100K (Haiku 5.5's tier) and above 272K (GPT's), with reads and
# 5m/1h (or 30m) writes; at noon and at 02:00 UTC (DeepSeek's peak), today and before the dated changes.
SHAPES = [Usage(uncached_input=3000, cache_read=6000, cache_writes={"5m": 800, "1h": 200}, output=500),
          Usage(uncached_input=50_000, cache_read=80_000, cache_writes={"5m": 10_000}, output=2000),
          Usage(uncached_input=100_000, cache_read=200_000, cache_writes={"1h": 30_000}, output=4000)]
TIMES = [AT, AT.replace(hour=2), datetime(2026, 3, 1, 12, tzinfo=UTC)]


def genai_total(model, usage: Usage, at: datetime) -> Decimal:
    provider_id, _, model_id = model.genai_ref.partition("/")
    provider = next(p for p in genai_prices.data_snapshot.get_snapshot().providers if p.id == provider_id)
    info = next(m for m in provider.models if m.id == model_id)
    gp_usage = genai_prices.Usage(input_tokens=usage.input_total, cache_read_tokens=usage.cache_read,
                                  cache_write_tokens=sum(usage.cache_writes.values()),
                                  cache_write_1h_tokens=usage.cache_writes.get("1h", 0), output_tokens=usage.output)
    return info.calc_price(gp_usage, provider, genai_request_timestamp=at).total_price


def writes_it_takes(model, usage: Usage) -> Usage:
    """`usage` with its writes at the TTLs the model offers (OpenAI 5.6+: 30m; elsewhere 5m, and 1h where allowed)."""
    total = sum(usage.cache_writes.values())
    if model.provider == "openai":
        writes = {"30m": total} if model.regime == "breakpoints" else {}
    elif "1h" in model.breakpoint_ttls:
        writes = dict(usage.cache_writes)
    else:
        writes = {"5m": total} if "5m" in model.breakpoint_ttls else {}
    return Usage(usage.uncached_input + (total - sum(writes.values())), usage.cache_read, writes, usage.output)


@pytest.mark.parametrize("key", sorted(k for k, m in CATALOG.models.items() if m.genai_ref), ids=lambda k: f"{k[0]}:{k[1]}")
def test_prices_agree_with_genai_prices_within_1_percent_or_the_override_says_why(key):
    model = CATALOG.models[key]
    if model.origin == "override":
        assert any("why" in t or "because" in t for t in (model.price.note,)), key
        return
    for usage in (writes_it_takes(model, u) for u in SHAPES):
        for at in TIMES:
            ours = price_usage(usage, model.price_for(usage.input_total, at)).total
            theirs = genai_total(model, usage, at)
            assert abs(ours - theirs) <= Decimal("0.01") * theirs, (usage, at, ours, theirs)
