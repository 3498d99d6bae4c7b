"""The pricing file: provenance on every price, the documented multipliers, lookups, overrides, goldens."""

from __future__ import annotations

from decimal import Decimal

import pytest

from prefixgate.dialects import anthropic as an
from prefixgate.dialects import gemini as ge
from prefixgate.dialects import openai as oa
from prefixgate.providers.pricing import UnknownModel, cost_of, resolve_model
from prefixgate.providers.rules import RulesError, default_catalog, load_catalog
from prefixgate.usage import Usage

CATALOG = default_catalog()
MODELS = list(CATALOG.models.values())
M = 1_000_000


def all_specs():
    for m in MODELS:
        yield m, m.price
        yield from ((m, tier) for tier in m.long_context)


@pytest.mark.parametrize(("model", "spec"), list(all_specs()), ids=lambda x: getattr(x, "id", ""))
def test_every_price_carries_a_source_url_and_date_and_discounts_reads(model, spec):
    assert spec.source.startswith("https://")
    assert spec.as_of[:4].isdigit()
    # A model with no cache discount (genai-prices gives the Pro models none) bills reads as input.
    assert spec.price.cache_read <= spec.price.input


def test_anthropic_writes_are_1_25x_for_5m_and_2x_for_1h_on_every_model():
    for model, spec in all_specs():
        if model.provider == "anthropic":
            p = spec.price
            assert p.cache_write == {"5m": p.input * Decimal("1.25"), "1h": p.input * 2}, model.id


def test_openai_regimes_price_writes_as_documented():
    for model, spec in all_specs():
        if model.provider != "openai":
            continue
        if model.regime == "implicit":
            assert spec.price.cache_write == {}, model.id   # free writes before GPT-5.6
        else:
            assert spec.price.cache_write["30m"] == spec.price.input * Decimal("1.25"), model.id
    assert resolve_model("openai", "gpt-6.2-sol").price.price.cache_write["12h"] == Decimal("5.00")


@pytest.mark.parametrize(("provider", "name", "expected"), [
    ("anthropic", "claude-haiku-4-5-20251001", "claude-haiku-4-5"),
    ("anthropic", "claude-sonnet-4.5", "claude-sonnet-4-5"),
    ("anthropic", "claude-sonnet-5.5", "claude-sonnet-5-5"),
    ("anthropic", "anthropic/claude-opus-4-5", "claude-opus-4-5"),
    ("anthropic", "claude-opus-4-1-20250805", "claude-opus-4-1"),
    ("openai", "gpt-4o-2024-08-06", "gpt-4o"),
    ("openai", "openai/gpt-5-mini", "gpt-5-mini"),
    ("openai", "gpt-4.1-2025-04-14", "gpt-4.1"),
    ("gemini", "models/gemini-2.5-flash", "gemini-2.5-flash"),
    ("gemini", "gemini-2.5-flash-001", "gemini-2.5-flash"),
    ("gemini", "models/gemini-3.5-flash", "gemini-3.5-flash"),
    ("gemini", "gemini-3-pro-preview", "gemini-3.1-pro-preview"),
])
def test_model_names_resolve_across_spellings(provider, name, expected):
    assert resolve_model(provider, name).id == expected


def test_unknown_model_is_a_404_naming_it():
    with pytest.raises(UnknownModel) as e:
        resolve_model("openai", "gpt-99")
    assert e.value.status == 404 and "gpt-99" in e.value.message


def test_golden_1h_and_5m_writes_are_priced_at_their_own_rates():
    # Sonnet 5.5: input $2, 5m write $2.50, 1h write $4, read $0.10 (0.05x since 2026-10-07), output $10 per MTok
    # (https://platform.claude.com/docs/en/about-claude/pricing; shared/reference/cost-truth-2026-11.md section 1)
    # — the bug gateways get wrong.
    assert cost_of("anthropic", "claude-sonnet-5-5", Usage(cache_writes={"5m": M // 10})).total == Decimal("0.25")
    assert cost_of("anthropic", "claude-sonnet-5-5", Usage(cache_writes={"1h": M // 10})).total == Decimal("0.4")
    mixed = Usage(uncached_input=1000, cache_read=20_000, cache_writes={"1h": 3000, "5m": 500}, output=400)
    cost = cost_of("anthropic", "claude-sonnet-5-5", mixed)
    assert cost.uncached_input == Decimal("0.002") and cost.cache_read == Decimal("0.002")
    assert cost.cache_write == Decimal("0.012") + Decimal("0.00125")
    assert cost.without_cache == Decimal(24_500 * 2 + 400 * 10) / M


def test_golden_anthropic_usage_from_a_response_and_from_a_stream_cost_the_same():
    wire = {"input_tokens": 12, "cache_creation_input_tokens": 2048, "cache_read_input_tokens": 30_000,
            "cache_creation": {"ephemeral_5m_input_tokens": 48, "ephemeral_1h_input_tokens": 2000}, "output_tokens": 99}
    stream = an.StreamUsage()
    stream.feed({"type": "message_start", "message": {"usage": {**wire, "output_tokens": 1}}})
    stream.feed({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 50}})
    stream.feed({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 99}})
    assert stream.usage == an.parse_usage(wire)
    cost = cost_of("anthropic", "claude-opus-4-5", stream.usage)
    expected = (12 * Decimal(5) + 30_000 * Decimal("0.5") + 48 * Decimal("6.25") + 2000 * Decimal(10)
                + 99 * Decimal(25)) / M
    assert cost.total == expected


def test_golden_openai_cached_tokens_are_inside_prompt_tokens():
    final_chunk = {"choices": [], "usage": {"prompt_tokens": 2006, "completion_tokens": 10,
                                            "prompt_tokens_details": {"cached_tokens": 1920}}}
    stream = oa.StreamUsage()
    stream.feed({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}], "usage": None})
    stream.feed(final_chunk)
    usage = stream.usage
    assert usage == Usage(uncached_input=86, cache_read=1920, output=10)
    cost = cost_of("openai", "gpt-5.4", usage)     # $2.50 in, $0.25 cached, $15 out (OpenAI's gpt-5.4 model page)
    assert cost.total == (86 * Decimal("2.50") + 1920 * Decimal("0.25") + 10 * Decimal(15)) / M


def test_golden_gemini_cached_tokens_are_inside_prompt_token_count():
    usage = ge.parse_usage({"promptTokenCount": 10_010, "cachedContentTokenCount": 10_000, "candidatesTokenCount": 5})
    cost = cost_of("gemini", "gemini-3.5-flash", usage)     # $1.50 in, $0.15 cached, $9 out (ai.google.dev pricing)
    assert cost.total == (10 * Decimal("1.50") + 10_000 * Decimal("0.15") + 5 * Decimal("9")) / M


@pytest.mark.parametrize(("prompt", "rate"), [(100_000, Decimal("0.10")), (100_001, Decimal("0.50"))])
def test_haiku_5_5_prices_the_whole_request_at_the_long_rate_above_100k(prompt, rate):
    # "Prompt length" is input + cache reads + cache writes (https://platform.claude.com/docs/en/models/haiku-5-5/overview;
    # third-party confirmation: https://github.com/kurofune/claudit/releases/tag/v1.9.2).
    usage = Usage(uncached_input=prompt - 60_000, cache_read=50_000, cache_writes={"5m": 10_000})
    cost = cost_of("anthropic", "claude-haiku-5-5", usage)
    assert cost.uncached_input == (prompt - 60_000) * rate / M
    assert cost.cache_write == 10_000 * rate * Decimal("1.25") / M


def test_gpt_6_sol_long_context_doubles_input_and_raises_output_by_half():
    usage = Usage(uncached_input=300_000, output=1000)
    assert cost_of("openai", "gpt-6-sol", usage).total == (300_000 * Decimal(4) + 1000 * Decimal(15)) / M


def test_ledger_sums_are_exact():
    usage = Usage(uncached_input=1, cache_read=1, output=1)
    one = cost_of("openai", "gpt-5.4-mini", usage)    # $0.75 + $0.075 + $4.50 per MTok (OpenAI's gpt-5.4-mini page)
    total = sum((one.total for _ in range(100_000)), Decimal(0))
    assert total == one.total * 100_000 == Decimal("0.532500")


def test_user_overrides_merge_over_the_packaged_file(tmp_path):
    override = tmp_path / "prices.toml"
    override.write_text('''
[anthropic]
lookback_positions = 30

[[model]]
provider = "anthropic"
id = "claude-sonnet-5-5"
price = { cache_read = "0.10" }

[[model]]
provider = "openai"
id = "my-finetune"
regime = "implicit"
price = { input = "1", output = "2", cache_read = "0.5", source = "https://example.com/contract", as_of = "2026-11" }
''')
    catalog = load_catalog(override)
    assert catalog.anthropic.lookback_positions == 30
    sonnet = resolve_model("anthropic", "claude-sonnet-5-5", catalog).price
    assert sonnet.price.cache_read == Decimal("0.10") and sonnet.price.input == Decimal("2")
    assert resolve_model("openai", "my-finetune", catalog).price.price.input == Decimal("1")
    yaml_file = tmp_path / "prices.yaml"
    yaml_file.write_text("model:\n  - provider: gemini\n    id: gemini-3.5-flash\n    min_cache_tokens: 2048\n")
    assert resolve_model("gemini", "gemini-3.5-flash", load_catalog(yaml_file)).min_cache_tokens == 2048   # not 4,096


@pytest.mark.parametrize(("text", "message"), [
    ('[anthropic]\nlookback = 3\n', "unknown key 'lookback'"),
    ('[anthropic]\nmax_breakpoints = -1\n', "max_breakpoints: expected a non-negative integer"),
    ('[[model]]\nprovider = "openai"\nid = "x"\nregime = "implicit"\nprice = { input = "1", output = "2" }\n',
     "missing key 'source'"),
    ('[[model]]\nprovider = "openai"\nid = "gpt-5.4"\nprice = { input = "-1" }\n', "non-negative"),
    ('[[model]]\nprovider = "cohere"\nid = "x"\n', "provider: expected one of"),
    ('pricing = 1\n', "unknown top-level key 'pricing'"),
])
def test_bad_override_files_fail_naming_the_key(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(RulesError, match=message):
        load_catalog(path)


def test_an_operators_discount_and_private_price_apply_over_genai_prices(tmp_path):
    # A negotiated 20% off every Sonnet 5.5 price, and a private read price on gpt-5.4 over genai-prices' row.
    override = tmp_path / "contract.toml"
    override.write_text('''
[[model]]
provider = "anthropic"
id = "claude-sonnet-5-5"
discount_percent = 20

[[model]]
provider = "openai"
id = "gpt-5.4"
price = { cache_read = "0.20" }
''')
    catalog = load_catalog(override)
    sonnet = resolve_model("anthropic", "claude-sonnet-5-5", catalog).price.price
    # list: $2 in, $10 out, $0.10 read, $2.50 / $4 writes (https://platform.claude.com/docs/en/about-claude/pricing)
    assert (sonnet.input, sonnet.output, sonnet.cache_read) == (Decimal("1.6"), Decimal("8"), Decimal("0.08"))
    assert sonnet.cache_write == {"5m": Decimal("2"), "1h": Decimal("3.2")}
    gpt = resolve_model("openai", "gpt-5.4", catalog)
    assert gpt.price.price.cache_read == Decimal("0.20") and gpt.price.price.input == Decimal("2.5")
    assert gpt.origin == "override" and "operator override" in gpt.price.note
    with pytest.raises(RulesError, match="discount_percent"):
        (tmp_path / "bad.toml").write_text('[[model]]\nprovider = "anthropic"\nid = "claude-sonnet-5-5"\ndiscount_percent = 120\n')
        load_catalog(tmp_path / "bad.toml")


def test_a_model_neither_genai_prices_nor_the_file_prices_fails_to_load(tmp_path):
    path = tmp_path / "new.toml"
    path.write_text('[[model]]\nprovider = "anthropic"\nid = "claude-unknown-9"\nmin_cache_tokens = 1024\n')
    with pytest.raises(RulesError, match="genai-prices .* has no model"):
        load_catalog(path)


def test_spellings_are_the_providers_own():
    # A dotted version is dashed for Anthropic's and Bedrock's names only (memoised per provider and name).
    from prefixgate.providers.pricing import _spellings

    assert _spellings("anthropic", "claude-sonnet-5.5") == (
        "claude-sonnet-5.5", "claude-sonnet-5.5", "claude-sonnet-5-5", "claude-sonnet-5-5")
    assert _spellings("openai", "claude-sonnet-5.5") == ("claude-sonnet-5.5", "claude-sonnet-5.5")
    assert _spellings("openai", "openai/gpt-5.4-2026-03-05") == ("gpt-5.4-2026-03-05", "gpt-5.4")
