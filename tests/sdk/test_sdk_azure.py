"""The real `openai.AzureOpenAI` client, wrapped, against mock-providers' Azure resource: a call names a
deployment (`chat-prod`), and its record is priced as the model Azure's answer names (`gpt-5.4-2026-03-05`), or,
where the answer names none, as `wrap(deployments=...)` maps the deployment; never as an unknown model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from decimal import Decimal

import anthropic
import openai
import pytest

import prefixgate
from prefixgate.sdk import Ledger
from prefixgate.simulation.mock.server import MockContext, create_app
from tests.sdk.support_sdk import dated_system, fresh_key
from tests.support_services import ServerThread

DEPLOYMENT = "chat-prod"
# What Azure's answers name for a gpt-5.4 deployment: the model's dated snapshot, not the deployment.
SNAPSHOT = "gpt-5.4-2026-03-05"
API_VERSION = "2024-10-21"
# Azure's GPT-5.4 on Global Standard bills OpenAI's list price, per MTok: $2.50 input, $0.25 cached input, $15
# output (https://aicosthub.com/guides/azure-openai-pricing-2026: "Azure OpenAI token pricing matches OpenAI's direct
# API pricing for the GPT-5.4 family"; https://developers.openai.com/api/docs/models/gpt-5.4).
INPUT, CACHED, OUTPUT = Decimal("2.50"), Decimal("0.25"), Decimal("15")


@pytest.fixture(scope="module")
def azure_url() -> Iterator[str]:
    """The mock's Azure resource, with one deployment of gpt-5.4 named `chat-prod`."""
    ctx = MockContext(azure_deployments={DEPLOYMENT: SNAPSHOT})
    with ServerThread(create_app(ctx), log_level="critical") as server:
        yield f"{server.url}/azure"


def azure(url: str, **wrap_args) -> tuple[openai.AzureOpenAI, Ledger]:
    ledger = Ledger()
    raw = openai.AzureOpenAI(azure_endpoint=url, api_key=fresh_key(), api_version=API_VERSION, max_retries=0)
    return prefixgate.wrap(raw, ledger=ledger, route="support", **wrap_args), ledger


def messages(day: int) -> list[dict]:
    return [{"role": "system", "content": dated_system(day)}, {"role": "user", "content": "Where is my parcel?"}]


def list_price(usage) -> Decimal:
    """The answer's own usage at gpt-5.4's list price (OpenAI counts cached tokens inside prompt_tokens)."""
    cached = usage.prompt_tokens_details.cached_tokens
    return ((usage.prompt_tokens - cached) * INPUT + cached * CACHED + usage.completion_tokens * OUTPUT) / 1_000_000


def ask(client: openai.AzureOpenAI, day: int, stream: bool):
    """One call's usage as the caller's SDK reads it."""
    if not stream:
        return client.chat.completions.create(model=DEPLOYMENT, messages=messages(day), max_tokens=16).usage
    chunks = list(client.chat.completions.create(model=DEPLOYMENT, messages=messages(day), max_tokens=16, stream=True,
                                                 stream_options={"include_usage": True}))
    assert chunks[0].model == ""        # Azure's first chunk (its prompt filter results) names no model
    return chunks[-1].usage


@pytest.mark.parametrize("stream", [False, True])
def test_a_deployment_is_priced_as_the_model_its_answer_names(azure_url, stream):
    client, ledger = azure(azure_url)
    usage = ask(client, 1, stream)
    (rec,) = ledger.records
    assert (rec.provider, rec.model, rec.status) == ("azure", SNAPSHOT, 200)
    assert rec.target.endswith(f"/{DEPLOYMENT}")      # the deployment, for the dashboard's target breakdown
    assert Decimal(rec.cost_usd) == list_price(usage) > 0
    assert f"azure: deployment '{DEPLOYMENT}' answered as {SNAPSHOT}, priced as that model" in rec.explanation


def test_the_trace_replays_the_model_that_ran(azure_url, tmp_path):
    client, ledger = azure(azure_url)
    ask(client, 1, stream=False)
    ledger.to_trace(tmp_path / "sdk.jsonl")
    line = json.loads((tmp_path / "sdk.jsonl").read_text())
    assert (line["provider"], line["model"]) == ("openai", SNAPSHOT)    # replay prices it; `chat-prod` it could not


@pytest.mark.parametrize("stream", [False, True])
def test_a_mapped_deployment_is_planned_with_its_models_caching_rules(azure_url, stream):
    """Without the mapping the planner cannot know `chat-prod`'s caching rules and sends the prompt as built (the
    changing time stays in front, so nothing is read from cache); with it the time moves and the second call reads."""
    client, ledger = azure(azure_url, deployments={DEPLOYMENT: "gpt-5.4"})
    usages = [ask(client, day, stream) for day in (1, 2)]
    assert usages[1].prompt_tokens_details.cached_tokens > 1000
    assert [Decimal(r.cost_usd) for r in ledger.records] == [list_price(u) for u in usages]
    assert all(r.model == SNAPSHOT for r in ledger.records)


def test_async_azure_client_streams_and_answers(azure_url):
    ledger = Ledger()

    async def run() -> list:
        raw = openai.AsyncAzureOpenAI(azure_endpoint=azure_url, api_key=fresh_key(), api_version=API_VERSION,
                                      max_retries=0)
        client = prefixgate.wrap(raw, ledger=ledger, deployments={DEPLOYMENT: "gpt-5.4"})
        whole = await client.chat.completions.create(model=DEPLOYMENT, messages=messages(1), max_tokens=16)
        stream = await client.chat.completions.create(model=DEPLOYMENT, messages=messages(2), max_tokens=16,
                                                      stream=True, stream_options={"include_usage": True})
        chunks = [c async for c in stream]
        return [whole.usage, chunks[-1].usage]

    usages = asyncio.run(run())
    assert [(r.provider, r.model) for r in ledger.records] == [("azure", SNAPSHOT)] * 2
    assert [Decimal(r.cost_usd) for r in ledger.records] == [list_price(u) for u in usages]


def cut_after_the_filter_results(client: openai.AzureOpenAI) -> None:
    """A stream the caller closes after Azure's first chunk, before any chunk named the model."""
    stream = client.chat.completions.create(model=DEPLOYMENT, messages=messages(3), max_tokens=16, stream=True)
    first = next(iter(stream))
    assert first.model == "" and first.choices == []
    stream.close()


def test_an_answer_naming_no_model_is_priced_by_the_mapping_else_flagged_unpriced(azure_url):
    mapped, mapped_ledger = azure(azure_url, deployments={DEPLOYMENT: "gpt-5.4"})
    cut_after_the_filter_results(mapped)
    (rec,) = mapped_ledger.records
    # The provider ran the prompt: priced (an estimate, noted) at gpt-5.4's input price, from the mapping.
    assert rec.model == "gpt-5.4" and rec.usage.input_total > 1000 and rec.uncached_input == rec.usage.input_total
    assert Decimal(rec.cost_usd) == (rec.uncached_input * INPUT + rec.output * OUTPUT) / 1_000_000
    assert any(line.startswith("azure: the answer named no model; deployment 'chat-prod' priced as gpt-5.4")
               for line in rec.explanation)
    unmapped, unmapped_ledger = azure(azure_url)
    cut_after_the_filter_results(unmapped)
    (rec,) = unmapped_ledger.records
    assert rec.model == DEPLOYMENT and rec.cost_usd is None      # unpriced, never $0
    assert any("does not map deployment 'chat-prod'" in line for line in rec.explanation)
    assert "cost: no price for azure model 'chat-prod'" in rec.explanation


def test_a_deployment_the_resource_lacks_is_azures_404(azure_url):
    client, ledger = azure(azure_url)
    with pytest.raises(openai.NotFoundError, match="deployment for this resource does not exist"):
        client.chat.completions.create(model="chat-typo", messages=messages(1))
    (rec,) = ledger.records
    assert (rec.status, rec.model, rec.cost_usd) == (404, "chat-typo", None)


@pytest.mark.parametrize(("deployments", "error", "message"), [
    (["chat-prod", "gpt-5.4"], TypeError, "must map deployment names to model ids"),
    ({"": "gpt-5.4"}, ValueError, "a deployment name must be a non-empty string"),
    ({"chat-prod": None}, ValueError, "deployment 'chat-prod' must map to a model id"),
    ({"chat-prod": "gpt5.4"}, ValueError, "maps to 'gpt5.4', which has no Azure price row (known: gpt-4o, "),
])
def test_a_bad_mapping_is_refused_when_wrapping(deployments, error, message):
    raw = openai.AzureOpenAI(azure_endpoint="https://acme.openai.azure.com", api_key="k", api_version=API_VERSION)
    with pytest.raises(error, match=message.replace("(", r"\(")):
        prefixgate.wrap(raw, deployments=deployments)


def test_a_mapping_is_for_azure_clients_only():
    # Azure's v1 API is called with a plain OpenAI client on the resource's endpoint: that is Azure too.
    v1 = openai.OpenAI(base_url="https://acme.openai.azure.com/openai/v1/", api_key="k")
    assert prefixgate.wrap(v1, deployments={"chat-prod": "gpt-5.4-mini"}) is not v1
    for client in (openai.OpenAI(api_key="k"), anthropic.Anthropic(api_key="k")):
        with pytest.raises(TypeError, match=r"deployments=\.\.\.\) is for Azure OpenAI clients"):
            prefixgate.wrap(client, deployments={"chat-prod": "gpt-5.4"})


def test_the_answers_model_wins_over_a_mapping_that_disagrees(azure_url):
    """A client bound to its deployment (`azure_deployment=`) sends whatever `model` the caller writes; Azure runs the
    deployment's. A mapping that names another model is not what ran: the record says both, priced as what ran."""
    ledger = Ledger()
    raw = openai.AzureOpenAI(azure_endpoint=azure_url, azure_deployment=DEPLOYMENT, api_key=fresh_key(),
                             api_version=API_VERSION, max_retries=0)
    client = prefixgate.wrap(raw, ledger=ledger, deployments={DEPLOYMENT: "gpt-5.4-mini"})
    usage = client.chat.completions.create(model="gpt-5.4-nano", messages=messages(1), max_tokens=16).usage
    (rec,) = ledger.records
    assert (rec.model, Decimal(rec.cost_usd)) == (SNAPSHOT, list_price(usage))
    assert (f"azure: deployment '{DEPLOYMENT}' answered as {SNAPSHOT}, priced as that model "
            "(wrap(deployments=...) maps it to gpt-5.4-mini)") in rec.explanation
