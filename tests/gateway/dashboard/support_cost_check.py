"""Traffic whose cost the price table and the provider see differently, through a real gateway in front of
mock-providers, with the real `openai` SDK: the operator's price table (a `providers_file`) still lists an old
input price for OpenRouter's gpt-4o-mini, so OpenRouter's own reported cost differs by over 1%; its Claude
model's costs agree; a model OpenRouter reports a cost for but the table lacks is priced from that report;
and a DeepSeek model with no row (DeepSeek reports no cost) is unpriced."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import openai

from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.dashboard.support_scenario import Running, wait_for_ledger
from tests.gateway.support_gateway import ServerThread, policy_for, running_gateway, settings_for

POLICY = "Policy clause: coverage lasts two years and excludes water damage. " * 160
# The operator's stale row: OpenRouter bills gpt-4o-mini at 0.15 input and 0.075 cached (providers.toml, which
# the mock bills by); this table still says 0.20 and 0.10.
STALE_PRICES = """
[[model]]
provider = "openrouter"
id = "gpt-4o-mini"
price = { input = "0.20", cache_read = "0.10" }
"""
# (model, requests): what the scenario sends.
TRAFFIC = [("openai/gpt-4o-mini", 2), ("anthropic/claude-sonnet-4.6", 1), ("mystery/model-x", 1),
           ("deepseek-v9-unlisted", 1)]


def policy(mock_url: str) -> dict:
    return {
        "upstreams": {
            "openrouter": {"kind": "openai_compatible", "provider": "openrouter", "url": f"{mock_url}/openrouter/v1"},
            "deepseek": {"kind": "openai_compatible", "provider": "deepseek", "url": f"{mock_url}/deepseek/v1"},
        },
        "routes": [{"name": "deepseek", "models": ["deepseek-*"], "targets": [{"upstream": "deepseek"}]},
                   {"name": "openrouter", "models": ["*/*"], "targets": [{"upstream": "openrouter"}]}],
    }


@contextmanager
def cost_check_gateway(tmp_path: Path, monkeypatch, **settings_overrides) -> Iterator[Running]:
    """The gateway after the scenario's traffic, its ledger flushed (copied, with `ledger_url`)."""
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-cost-check")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-ds-cost-check")
    prices = tmp_path / "prices.toml"
    prices.write_text(STALE_PRICES)
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path, providers_file=str(prices), **settings_overrides)
        with running_gateway(settings, policy=policy_for(settings, policy(mock.url))) as gw:
            client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused", max_retries=0)
            for model, n in TRAFFIC:
                for i in range(n):
                    client.chat.completions.create(model=model, messages=[
                        {"role": "system", "content": POLICY}, {"role": "user", "content": f"Question {i}?"}])
            wait_for_ledger(gw.url, sum(n for _, n in TRAFFIC))
            yield Running(gw.url, settings)
