"""`prefixgate models`: every model the gateway can price, with its source and date, and the audit's cases
(shared/reference/cost-truth-2026-11.md) as a user reads them; expected figures from the providers' pages."""

from __future__ import annotations

import json

from click.testing import CliRunner

from prefixgate.cli import main
from prefixgate.providers.rules import default_catalog

FIELDS = ["provider", "id", "aliases", "input", "output", "cache_read", "cache_write", "min_cache_tokens", "ttls",
          "long_context", "retires", "replacement", "source", "as_of"]


def models(*args: str) -> list[dict]:
    result = CliRunner().invoke(main, ["models", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def find(rows: list[dict], provider: str, model: str) -> dict:
    return next(r for r in rows if (r["provider"], r["id"]) == (provider, model))


def test_every_priced_model_is_listed_with_its_source_and_date():
    rows = models()
    assert {(r["provider"], r["id"]) for r in rows} >= set(default_catalog().models)
    for r in rows:
        assert [k for k in r if k in FIELDS] == FIELDS, r["id"]
        assert r["source"].startswith("https://") and r["as_of"][:4].isdigit()
        assert all(isinstance(r[k], str) for k in ("input", "output", "cache_read"))


def test_the_audit_cases_hold():
    rows = models()
    assert find(rows, "anthropic", "claude-sonnet-5-5")["cache_read"] == "0.1"
    assert find(rows, "anthropic", "claude-sonnet-5-5")["min_cache_tokens"] == 512
    tier = find(rows, "openai", "gpt-6.1-sol")["long_context"]
    assert [(t["above"], t["input"], t["cache_read"], t["output"]) for t in tier] == [(272000, "4", "0.2", "15")]
    assert find(rows, "gemini", "gemini-2.5-flash")["min_cache_tokens"] == 2048
    assert find(rows, "gemini", "gemini-2.5-pro")["min_cache_tokens"] == 2048
    assert find(rows, "vertex", "gemini-2.5-flash")["min_cache_tokens"] == 2048
    assert find(rows, "bedrock", "anthropic.claude-sonnet-4-5")["min_cache_tokens"] == 1024
    # The retiring rows above stay for old records; their replacements, from the same pages (G1; AU sections 1, 3):
    assert {find(rows, "gemini", m)["min_cache_tokens"] for m in ("gemini-3.5-flash", "gemini-3.8-flash")} == {4096}
    assert find(rows, "vertex", "gemini-3.5-flash")["min_cache_tokens"] == 4096
    assert find(rows, "bedrock", "anthropic.claude-sonnet-5-5")["min_cache_tokens"] == 512
    assert find(rows, "bedrock", "anthropic.claude-opus-4-6")["ttls"] == ["5m", "1h"]
    assert find(rows, "bedrock", "global.anthropic.claude-sonnet-5-5")["cache_write"] == {"5m": "2.5", "1h": "4"}
    retires = {(r["provider"], r["id"]): r["retires"] for r in rows}
    assert retires[("anthropic", "claude-sonnet-4-5")] == "2026-11-30"
    assert retires[("anthropic", "claude-opus-4-5")] == "2027-01-22"
    assert retires[("gemini", "gemini-2.5-pro")] == retires[("gemini", "gemini-2.5-flash")] == "2026-12-01"
    assert {retires[("openai", m)] for m in ("gpt-5", "gpt-5-mini", "gpt-5-nano", "o3")} == {"2026-12-11"}
    assert {retires[("openai", m)] for m in ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini")} == {"2027-01-14"}


def test_time_of_day_prices_are_listed_in_utc():
    deepseek = find(models("--provider", "deepseek"), "deepseek", "deepseek-v4-flash")
    assert [(w["from"], w["to"], w["input"]) for w in deepseek["time_of_day"]] == [("01:00", "04:00", "0.3"),
                                                                                  ("06:00", "10:00", "0.3")]


def test_the_table_fits_an_80_column_terminal():
    result = CliRunner().invoke(main, ["models"], env={"COLUMNS": "80"})
    assert result.exit_code == 0 and max(len(line) for line in result.output.splitlines()) <= 80
    assert "claude-sonnet-5-5" in result.output


def test_an_unknown_provider_is_a_usage_error():
    result = CliRunner().invoke(main, ["models", "--provider", "nope"])
    assert result.exit_code == 2 and "nope" in result.output
