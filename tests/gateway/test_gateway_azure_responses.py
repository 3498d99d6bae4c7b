"""Responses callers on an Azure OpenAI upstream go to Azure's own Responses API (its v1 API,
`/openai/v1/responses`, the deployment in the body's `model`), not translated to Chat Completions: a
`previous_response_id` chain continues at Azure, a stored response is its tenant's alone and is read back from
the resource that made it, and the call is priced as the model Azure's answer names, whole or streamed. A
provider without the Responses API (DeepSeek) still gets Chat Completions."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import httpx
import openai
import pytest

from prefixgate.ledger import read_records
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

# What Azure's answers name for a gpt-5.4 deployment: the model's dated snapshot, not the deployment's name.
SNAPSHOT = "gpt-5.4-2026-03-05"
# Azure's GPT-5.4 (Global Standard) per MTok: $2.50 input, $0.25 cached input, $15 output, OpenAI's list price
# (https://aicosthub.com/guides/azure-openai-pricing-2026; https://developers.openai.com/api/docs/models/gpt-5.4).
INPUT, CACHED, OUTPUT = Decimal("2.50"), Decimal("0.25"), Decimal("15")
SYSTEM = "You are the ACME warranty assistant. Policy clause: coverage lasts two years. " * 80


@pytest.fixture
def world(tmp_path, monkeypatch) -> Iterator[tuple[str, str, MockContext, str]]:
    """(the gateway's URL, its ledger path, the mock's context, the mock's URL): the gateway in front of the mock's
    Azure resource, xAI and DeepSeek."""
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "sk-azure-resource")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-deepseek-account")
    monkeypatch.setenv("XAI_API_KEY", "xai-account-key")
    monkeypatch.setenv("ACME_KEY", "pg-acme-key")
    monkeypatch.setenv("BETA_KEY", "pg-beta-key")
    ctx = MockContext(azure_deployments={"research": SNAPSHOT})
    with ServerThread(mock_app(ctx), log_level="critical") as mock:
        settings = settings_for(mock.url, tmp_path)
        policy = policy_for(settings, {
            "upstreams": {"azure": {"kind": "openai_compatible", "provider": "azure", "url": f"{mock.url}/azure",
                                    "api_version": "2024-10-21", "deployments": {"research": "gpt-5.4"}},
                          "deepseek": {"kind": "openai_compatible", "provider": "deepseek", "url": f"{mock.url}/deepseek"},
                          "xai": {"kind": "openai_compatible", "provider": "xai", "url": f"{mock.url}/xai/v1"}},
            "routes": [{"name": "azure", "models": ["research"], "targets": [{"upstream": "azure"}],
                        "prompt_cache_key": "derive"},
                       {"name": "deepseek", "models": ["deepseek-*"], "targets": [{"upstream": "deepseek"}]},
                       {"name": "grok", "models": ["grok-*"], "targets": [{"upstream": "xai"}]}],
            "keys": [{"name": "acme", "key_env": "ACME_KEY", "tenant": "acme"},
                     {"name": "beta", "key_env": "BETA_KEY", "tenant": "beta"}],
        })
        with running_gateway(settings, policy=policy) as gw:
            yield gw.url, settings.ledger_path, ctx, mock.url


def client(url: str, key: str = "pg-acme-key") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


def records(ledger_path: str, count: int) -> list[dict]:
    """The first `count` ledger records, once the gateway has settled them (after their answers went out)."""
    wait_until(lambda: len(read_records(ledger_path)) >= count, 10, f"{count} ledger records")
    return sorted(read_records(ledger_path), key=lambda r: r["ts"])[:count]


def list_price(usage) -> Decimal:
    """gpt-5.4's list price of a Responses answer's usage (input_tokens count the cached ones)."""
    cached = usage.input_tokens_details.cached_tokens
    return ((usage.input_tokens - cached) * INPUT + cached * CACHED + usage.output_tokens * OUTPUT) / 1_000_000


def seen_paths(ctx: MockContext) -> list[str]:
    return [path for path, _ in ctx.received]


def final(events: list) -> object:
    """A stream's whole response, from its terminal event."""
    assert events[-1].type in ("response.completed", "response.incomplete")
    return events[-1].response


@pytest.mark.parametrize("stream", [False, True])
def test_a_chain_continues_at_azure_and_is_priced_as_the_model_that_ran(world, stream):
    url, ledger, ctx, _ = world
    api = client(url)
    first = api.responses.create(model="research", instructions=SYSTEM, input="Is my toaster covered?")
    asked = {"model": "research", "instructions": SYSTEM, "input": "And my kettle?", "previous_response_id": first.id}
    second = final(list(api.responses.create(**asked, stream=True))) if stream else api.responses.create(**asked)
    # Azure's Responses API took both, untranslated: the mock stored the first and rebuilt the chain from it
    # (it answers a 400 for an id it does not hold), so the second read the first's prompt and answer again.
    assert seen_paths(ctx) == ["/azure/openai/v1/responses"] * 2
    assert ctx.received[1][1]["previous_response_id"] == first.id
    assert (first.model, second.model) == (SNAPSHOT, SNAPSHOT)
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    assert second.usage.input_tokens_details.cached_tokens >= 1024     # the chain's prefix, cached at Azure
    for rec, answer, (_, sent) in zip(records(ledger, 2), (first, second), ctx.received, strict=True):
        assert (rec["provider"], rec["target"], rec["model"], rec["status"]) == ("azure", "azure", SNAPSHOT, 200)
        # Planned as for OpenAI's Responses API: the route's derived prompt_cache_key went to Azure in the body.
        assert sent["model"] == "research" and sent["prompt_cache_key"] == rec["prompt_cache_key"] != ""
        assert rec["cache_read"] == answer.usage.input_tokens_details.cached_tokens
        assert Decimal(rec["cost_usd"]) == list_price(answer.usage) > 0
        assert f"azure: deployment 'research' answered as {SNAPSHOT}, priced as that model" in rec["explanation"]


def test_a_stored_response_is_read_back_from_azure_by_its_tenant_only(world):
    url, _, _, _ = world
    own = client(url)
    made = own.responses.create(model="research", instructions=SYSTEM, input="Is my toaster covered?")
    # Another tenant learns nothing of it: OpenAI's 404 for an unknown id, in its shape.
    with pytest.raises(openai.NotFoundError) as refused:
        client(url, "pg-beta-key").responses.retrieve(made.id)
    assert refused.value.body["message"] == f"Response with id '{made.id}' not found."
    assert refused.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.NotFoundError):
        client(url, "pg-beta-key").responses.delete(made.id)
    # Its own tenant reads it (and its input items) from the Azure resource that stored it, and deletes it there.
    assert (own.responses.retrieve(made.id).id, own.responses.retrieve(made.id).model) == (made.id, SNAPSHOT)
    assert [i.type for i in own.responses.input_items.list(made.id)] == ["message"]
    own.responses.delete(made.id)
    with pytest.raises(openai.NotFoundError):
        own.responses.retrieve(made.id)


def test_xai_serves_a_chain_itself_too(world):
    url, ledger, ctx, _ = world
    api = client(url)
    first = api.responses.create(model="grok-4", instructions=SYSTEM, input="Is my toaster covered?")
    second = api.responses.create(model="grok-4", instructions=SYSTEM, input="And my kettle?",
                                  previous_response_id=first.id)
    assert seen_paths(ctx) == ["/xai/v1/responses"] * 2
    # The chain, rebuilt at xAI: the first's input and answer read again.
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    assert [(r["provider"], r["status"]) for r in records(ledger, 2)] == [("xai", 200)] * 2


def test_a_provider_without_the_responses_api_still_gets_chat_completions(world):
    url, ledger, ctx, _ = world
    answer = client(url).responses.create(model="deepseek-chat", instructions=SYSTEM, input="Is my toaster covered?")
    assert answer.output_text and seen_paths(ctx) == ["/deepseek/v1/chat/completions"]
    (rec,) = records(ledger, 1)
    assert (rec["provider"], rec["status"]) == ("deepseek", 200)
    assert "translate: responses -> openai" in " ".join(rec["explanation"])


def test_the_mock_azure_resource_refuses_a_missing_key_and_an_unknown_deployment(world):
    _, _, _, mock = world
    body = {"model": "research", "input": "hi"}
    assert httpx.post(f"{mock}/azure/openai/v1/responses", json=body).status_code == 401
    unknown = httpx.post(f"{mock}/azure/openai/v1/responses", json={**body, "model": "nobody-deployed-this"},
                         headers={"api-key": "sk-azure-resource"})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "DeploymentNotFound"


@pytest.mark.parametrize("azure_client", ["azure_endpoint", "v1_base_url"])
def test_azures_own_clients_read_back_and_delete_what_they_stored(world, azure_client):
    """Azure's documented Responses clients create through the gateway (AzureOpenAI(azure_endpoint=...) posts
    /openai/responses?api-version=, an OpenAI client on Azure's v1 base URL /openai/v1/responses); the same clients
    read the stored response back, list its input items and delete it at those roots, which were a 404 ('no such
    endpoint') though the create before them had stored the response at Azure. Another tenant still gets the 404 of
    an unknown id."""
    url, _, _, _ = world

    def azure(key: str) -> openai.OpenAI:
        if azure_client == "azure_endpoint":
            return openai.AzureOpenAI(azure_endpoint=url, api_key=key, api_version="2025-04-01-preview", max_retries=0)
        return openai.OpenAI(base_url=f"{url}/openai/v1/", api_key=key, max_retries=0)

    own = azure("pg-acme-key")
    made = own.responses.create(model="research", instructions=SYSTEM, input="Is my toaster covered?")
    assert (own.responses.retrieve(made.id).id, own.responses.retrieve(made.id).model) == (made.id, SNAPSHOT)
    assert [i.type for i in own.responses.input_items.list(made.id)] == ["message"]
    with pytest.raises(openai.NotFoundError) as refused:
        azure("pg-beta-key").responses.retrieve(made.id)
    assert refused.value.body["message"] == f"Response with id '{made.id}' not found."
    own.responses.delete(made.id)
    with pytest.raises(openai.NotFoundError):
        own.responses.retrieve(made.id)
