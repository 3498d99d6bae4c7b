"""An Azure OpenAI upstream through the gateway, with the real `openai.AzureOpenAI` client: a request names a
deployment, Azure's answer the model that ran (`gpt-5.4-2026-03-05`), and the ledger prices the call as that
model, whole or streamed, whatever the upstream's `deployments:` says; the mapping prices answers that name no
model (a stream cut after Azure's first chunk, its prompt filter results); with neither the call is unpriced. A
Responses call (`AzureOpenAI.responses.create`, or an OpenAI client on Azure's v1 base URL) is priced alike."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from decimal import Decimal

import anthropic
import openai
import pytest

from prefixgate.config import Settings
from prefixgate.ledger import read_records
from prefixgate.policies.catalogued import model_warnings
from prefixgate.providers.rules import default_catalog
from prefixgate.simulation.mock.faults import FaultPlan
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

# What Azure's answers name for a gpt-5.4 deployment: the model's dated snapshot, not the deployment.
SNAPSHOT = "gpt-5.4-2026-03-05"
# Azure's GPT-5.4 (Global Standard) per MTok: $2.50 input, $0.25 cached input, $15 output, OpenAI's list price
# (https://aicosthub.com/guides/azure-openai-pricing-2026; https://developers.openai.com/api/docs/models/gpt-5.4).
INPUT, CACHED, OUTPUT = Decimal("2.50"), Decimal("0.25"), Decimal("15")
# chat-prod runs gpt-5.4 though the policy maps it to gpt-5.4-mini (a redeployed model the policy missed);
# research is not mapped; the -cut ones lose their stream after Azure's first chunk.
DEPLOYED = {"chat-prod": SNAPSHOT, "research": SNAPSHOT, "chat-cut": SNAPSHOT, "lab-cut": SNAPSHOT}
MAPPING = {"chat-prod": "gpt-5.4-mini", "chat-cut": "gpt-5.4"}
SYSTEM = "You are the ACME warranty assistant. Policy clause: coverage lasts two years. " * 40


@pytest.fixture
def gateway(tmp_path, monkeypatch) -> Iterator[tuple[str, str]]:
    """(the gateway's URL, its ledger path) in front of the mock's Azure resource."""
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "sk-azure")
    monkeypatch.setenv("GATEWAY_KEY", "pg-team-key")
    cut = [{"fault": "drop_stream_after=1", "path": f"/azure/openai/deployments/{name}"} for name in ("chat-cut", "lab-cut")]
    ctx = MockContext(azure_deployments=DEPLOYED, faults=FaultPlan.from_config({"faults": cut}))
    with ServerThread(mock_app(ctx), log_level="critical") as mock:
        settings = settings_for(mock.url, tmp_path)
        policy = policy_for(settings, {
            "upstreams": {"azure": {"kind": "openai_compatible", "provider": "azure", "url": f"{mock.url}/azure",
                                    "api_version": "2024-10-21", "deployments": MAPPING}},
            "routes": [{"name": "azure", "models": list(DEPLOYED), "targets": [{"upstream": "azure"}],
                        "response_cache": {"mode": "on"}}],
            "keys": [{"name": "team", "key_env": "GATEWAY_KEY", "tenant": "acme"}],
        })
        with running_gateway(settings, policy=policy) as gw:
            yield gw.url, settings.ledger_path


def record(ledger_path: str) -> dict:
    """The one ledger record, once the gateway has settled the request (after its answer went out)."""
    wait_until(lambda: len(read_records(ledger_path)) == 1, 10, "the request's ledger record")
    (rec,) = read_records(ledger_path)
    return rec


MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Is my toaster covered?"}]


def azure(url: str) -> openai.AzureOpenAI:
    return openai.AzureOpenAI(azure_endpoint=url, api_key="pg-team-key", api_version="2024-10-21", max_retries=0)


def ask(url: str, deployment: str, stream: bool):
    """One call's usage, as the caller's AzureOpenAI client reads it."""
    client = azure(url)
    if not stream:
        return client.chat.completions.create(model=deployment, messages=MESSAGES, max_tokens=16).usage
    chunks = list(client.chat.completions.create(model=deployment, messages=MESSAGES, max_tokens=16, stream=True,
                                                 stream_options={"include_usage": True}))
    assert chunks[0].model == ""        # Azure's first chunk (its prompt filter results) names no model
    return chunks[-1].usage


def list_price(usage) -> Decimal:
    """gpt-5.4's list price of the answer's usage (prompt_tokens count the cached ones)."""
    cached = usage.prompt_tokens_details.cached_tokens
    return ((usage.prompt_tokens - cached) * INPUT + cached * CACHED + usage.completion_tokens * OUTPUT) / 1_000_000


# The Responses API's clients on Azure: AzureOpenAI posts /openai/responses?api-version= (Responses needs a
# 2025-03-01-preview or later version), an OpenAI client on the v1 base URL /openai/v1/responses; the body's model
# names the deployment either way.
RESPONSES_CLIENTS = {
    "AzureOpenAI": lambda url: openai.AzureOpenAI(azure_endpoint=url, api_key="pg-team-key",
                                                  api_version="2025-04-01-preview", max_retries=0),
    "OpenAI on /openai/v1": lambda url: openai.OpenAI(base_url=f"{url}/openai/v1/", api_key="pg-team-key", max_retries=0),
}


def respond(client: openai.OpenAI, deployment: str, stream: bool):
    """One Responses call's usage, as the caller's client reads it."""
    asked = {"model": deployment, "instructions": SYSTEM, "input": "Is my toaster covered?", "max_output_tokens": 16}
    if not stream:
        return client.responses.create(**asked).usage
    events = list(client.responses.create(**asked, stream=True))
    assert events[-1].type == "response.incomplete"     # its terminal event: cut at max_output_tokens
    return events[-1].response.usage


def responses_list_price(usage) -> Decimal:
    """gpt-5.4's list price of a Responses answer's usage (input_tokens count the cached ones)."""
    cached = usage.input_tokens_details.cached_tokens
    return ((usage.input_tokens - cached) * INPUT + cached * CACHED + usage.output_tokens * OUTPUT) / 1_000_000


# A call to a deployment through the gateway (url, deployment, stream) -> gpt-5.4's list price of the usage its
# caller read: Chat Completions, or Responses from either client.
CALLS = {
    "chat": lambda url, deployment, stream: list_price(ask(url, deployment, stream)),
    **{f"responses, {name}": lambda url, deployment, stream, client=client:
       responses_list_price(respond(client(url), deployment, stream)) for name, client in RESPONSES_CLIENTS.items()},
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("call", list(CALLS))
def test_the_model_the_answer_names_wins_over_the_mapping(gateway, call, stream):
    url, ledger = gateway
    price = CALLS[call](url, "chat-prod", stream)
    rec = record(ledger)
    assert (rec["provider"], rec["model"], rec["target"], rec["status"]) == ("azure", SNAPSHOT, "azure", 200)
    assert Decimal(rec["cost_usd"]) == price > 0       # gpt-5.4's price, not gpt-5.4-mini's
    assert (f"azure: deployment 'chat-prod' answered as {SNAPSHOT}, priced as that model "
            "(the deployments: of upstream 'azure' maps it to gpt-5.4-mini)") in rec["explanation"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("call", list(CALLS))
def test_an_unmapped_deployment_is_priced_as_the_model_its_answer_names(gateway, call, stream):
    url, ledger = gateway
    price = CALLS[call](url, "research", stream)
    rec = record(ledger)
    assert (rec["model"], Decimal(rec["cost_usd"])) == (SNAPSHOT, price)
    assert f"azure: deployment 'research' answered as {SNAPSHOT}, priced as that model" in rec["explanation"]


def test_a_translated_stream_is_priced_by_the_first_chunk_that_names_a_model(gateway):
    """An Anthropic caller on the Azure route: every upstream chunk is read for the translation; the first
    naming a model is Azure's second."""
    url, ledger = gateway
    client = anthropic.Anthropic(base_url=url, api_key="pg-team-key", max_retries=0)
    with client.messages.stream(model="research", max_tokens=16, system=SYSTEM,
                                messages=[{"role": "user", "content": "Is my toaster covered?"}]) as stream:
        usage = stream.get_final_message().usage
    rec = record(ledger)
    assert rec["model"] == SNAPSHOT and rec["cache_read"] == 0
    assert Decimal(rec["cost_usd"]) == (usage.input_tokens * INPUT + usage.output_tokens * OUTPUT) / 1_000_000


def test_an_answer_recorded_as_the_model_that_ran_is_still_kept_for_replay(gateway):
    """The response cache keeps an answer from the model the request asked of its target (the deployment), not the
    one its record names."""
    url, ledger = gateway
    client = azure(url)

    def cache_state() -> str:
        raw = client.chat.completions.with_raw_response.create(model="research", messages=MESSAGES)  # not cut: kept
        return raw.headers["x-prefixgate-response-cache"]

    assert cache_state() == "miss"
    wait_until(lambda: cache_state() == "hit", 10, "the stored answer replayed")


def cut_after_the_filter_results(url: str, deployment: str) -> None:
    with pytest.raises(openai.APIError):
        ask(url, deployment, stream=True)


def test_an_answer_naming_no_model_is_priced_by_the_mapping(gateway):
    url, ledger = gateway
    cut_after_the_filter_results(url, "chat-cut")
    rec = record(ledger)
    # Azure ran the prompt: billed (estimated, noted) at gpt-5.4's price, which the mapping names.
    assert rec["status"] == 502 and rec["model"] == "gpt-5.4" and rec["uncached_input"] > 500
    assert Decimal(rec["cost_usd"]) == (rec["uncached_input"] * INPUT + rec["output"] * OUTPUT) / 1_000_000
    assert ("azure: the answer named no model; deployment 'chat-cut' priced as gpt-5.4 "
            "(the deployments: of upstream 'azure')") in rec["explanation"]


def test_no_mapping_and_no_model_in_the_answer_is_unpriced_never_free(gateway):
    url, ledger = gateway
    cut_after_the_filter_results(url, "lab-cut")
    rec = record(ledger)
    assert rec["status"] == 502 and rec["model"] == "lab-cut" and rec["uncached_input"] > 500
    assert rec["cost_usd"] is None
    assert any("does not map deployment 'lab-cut'" in line for line in rec["explanation"])
    assert any(line.startswith("unpriced: no price row for azure/lab-cut") for line in rec["explanation"])


def test_start_up_says_what_an_unmapped_deployment_costs():
    policy = policy_for(Settings(), {
        "upstreams": {"azure": {"kind": "openai_compatible", "provider": "azure", "url": "https://acme.openai.azure.com",
                                "api_version": "2024-10-21", "deployments": MAPPING}},
        "routes": [{"name": "azure", "models": ["chat-prod", "research", "gpt-5.4-mini"], "targets": [{"upstream": "azure"}]}],
    })
    assert model_warnings(policy, default_catalog(), date(2026, 11, 28)) == [
        "routes.0.targets.0: azure deployment 'research' is neither a model's name nor in the deployments: of upstream "
        "'azure': it is planned without its model's caching rules, and priced only as the model its answers name, and "
        "budgeted keys are refused it unless route 'azure' declares a price or max_request_usd"]
