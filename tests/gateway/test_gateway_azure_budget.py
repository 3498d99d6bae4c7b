"""A budgeted key on an Azure OpenAI upstream, with the real `openai.AzureOpenAI` client, where Azure's answer names a
model Azure's price rows lack (a deployment running o4-mini, which the catalogue prices for OpenAI only). Admission
reserved the call at gpt-5.4-mini's price, as the upstream's `deployments:` maps the deployment or as the deployment
is named (the Azure portal's default name), so the record is priced so too, said so: unpriced, it would settle the
key's budget at $0 and the key could spend without limit."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import openai
import pytest

from prefixgate.ledger import read_records
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

ANSWERED = "o4-mini-2025-04-16"     # what Azure's answers name for an o4-mini deployment
# Azure's GPT-5.4 mini per MTok, OpenAI's list price: $0.75 input, $0.075 cached input, $4.50 output
# (https://developers.openai.com/api/docs/models/gpt-5.4-mini).
INPUT, CACHED, OUTPUT = Decimal("0.75"), Decimal("0.075"), Decimal("4.50")


@pytest.fixture
def gateway(tmp_path, monkeypatch) -> Iterator[tuple[str, str]]:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "sk-azure")
    monkeypatch.setenv("GATEWAY_KEY", "pg-team-key")
    ctx = MockContext(azure_deployments={"reasoning": ANSWERED, "gpt-5.4-mini": ANSWERED})
    with ServerThread(mock_app(ctx), log_level="critical") as mock:
        settings = settings_for(mock.url, tmp_path)
        policy = policy_for(settings, {
            "upstreams": {"azure": {"kind": "openai_compatible", "provider": "azure", "url": f"{mock.url}/azure",
                                    "api_version": "2024-10-21", "deployments": {"reasoning": "gpt-5.4-mini"}}},
            "routes": [{"name": "azure", "models": ["reasoning", "gpt-5.4-mini"], "targets": [{"upstream": "azure"}]}],
            "keys": [{"name": "team", "key_env": "GATEWAY_KEY", "tenant": "acme",
                      "budget": {"usd": 5.0, "period": "total"}}],
        })
        with running_gateway(settings, policy=policy) as gw:
            yield gw.url, settings.ledger_path


@pytest.mark.parametrize(("deployment", "by"), [("reasoning", "the deployments: of upstream 'azure'"),
                                                ("gpt-5.4-mini", "the deployment name")])
def test_an_answer_naming_a_model_azure_does_not_price_is_priced_as_admission_reserved_it(gateway, deployment, by):
    url, ledger = gateway
    client = openai.AzureOpenAI(azure_endpoint=url, api_key="pg-team-key", api_version="2024-10-21", max_retries=0)
    usage = client.chat.completions.create(model=deployment, max_tokens=16, messages=[
        {"role": "user", "content": "Is my toaster covered? " * 50}]).usage
    wait_until(lambda: len(read_records(ledger)) == 1, 10, "the request's ledger record")
    (rec,) = read_records(ledger)
    cached = usage.prompt_tokens_details.cached_tokens
    price = ((usage.prompt_tokens - cached) * INPUT + cached * CACHED + usage.completion_tokens * OUTPUT) / 1_000_000
    assert rec["cost_usd"] is not None and Decimal(rec["cost_usd"]) == price > 0
    assert rec["model"] == "gpt-5.4-mini"
    assert (f"azure: deployment {deployment!r} answered as {ANSWERED}, which has no Azure price row; priced as "
            f"gpt-5.4-mini ({by})") in rec["explanation"]
