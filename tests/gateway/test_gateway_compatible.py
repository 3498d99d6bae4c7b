"""Hosted OpenAI-compatible providers as upstreams, through the gateway to mock-providers, with the real
`openai` SDK: DeepSeek-, OpenRouter- and Azure-shaped upstreams each read the cache on the second call of a
dated-prompt pair (the planner moves the time after the static prefix), and the ledger bills each call at
the prices typed below (golden values by hand). A hosted provider is never priced at $0 nor sent
`cache_salt`; a self-hosted one still is."""

from __future__ import annotations

from datetime import UTC, datetime, time
from decimal import Decimal

import anthropic
import openai
import pytest

from prefixgate.ledger import read_records
from prefixgate.providers.compatible import PROFILES
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, running_upstream, settings_for
from tests.support_services import ServerThread, wait_until

POLICY = "Policy clause: coverage lasts two years and excludes water damage. " * 160
MTOK = Decimal(1_000_000)
# USD per million tokens (input, cache read, output), typed from providers.toml's rows.
DEEPSEEK_CHAT = (Decimal("0.27"), Decimal("0.07"), Decimal("1.10"))
# DeepSeek's off-peak window, 16:30-00:30 UTC: half those prices (genai-prices' deepseek-chat time-of-day row).
DEEPSEEK_CHAT_OFF_PEAK = (Decimal("0.135"), Decimal("0.035"), Decimal("0.55"))


def deepseek_chat_at(ts: float) -> tuple[Decimal, Decimal, Decimal]:
    """deepseek-chat's prices at a request's time: a test run after 16:30 UTC is billed off-peak."""
    at = datetime.fromtimestamp(ts, UTC).time()
    return DEEPSEEK_CHAT_OFF_PEAK if at >= time(16, 30) or at < time(0, 30) else DEEPSEEK_CHAT
OPENROUTER_GPT_4O_MINI = (Decimal("0.15"), Decimal("0.075"), Decimal("0.60"))
AZURE_GPT_4O = (Decimal("2.50"), Decimal("1.25"), Decimal("10"))
AZURE_ANSWERS_AS = "gpt-4o-2024-11-20"      # what the mock's prod-4o deployment answers as, as Azure names a snapshot


def messages(day: int) -> list[dict]:
    # The time of the request at the top, as apps send it: a per-request value, moved from the first request
    # (a bare date waits until the route has seen it change; see docs/planner.md).
    return [{"role": "system", "content": f"Current time: 2026-11-{day:02d} 10:15:00 UTC. You are the ACME warranty "
                                          f"assistant.\n{POLICY}"},
            {"role": "user", "content": "Is my toaster covered?"}]


def longer(msgs: list[dict]) -> list[dict]:
    """The same conversation with the policy twice in the system prompt (~4,000 tokens)."""
    return [{**m, "content": f"{m['content']}\n{POLICY}"} if m["role"] == "system" else m for m in msgs]


def golden(usage, price: tuple[Decimal, Decimal, Decimal]) -> Decimal:
    """The bill by hand: OpenAI-style prompt_tokens include the cached ones."""
    cached = cached_tokens(usage)
    inp, read, out = price
    return ((usage.prompt_tokens - cached) * inp + cached * read + usage.completion_tokens * out) / MTOK


def cached_tokens(usage) -> int:
    extra = usage.model_extra or {}
    if "prompt_cache_hit_tokens" in extra:      # DeepSeek's own fields
        return extra["prompt_cache_hit_tokens"]
    return usage.prompt_tokens_details.cached_tokens


@pytest.fixture
def mock():
    ctx = MockContext()
    with ServerThread(mock_app(ctx)) as server:
        server.ctx = ctx
        yield server


def gateway_policy(mock_url: str, self_hosted_url: str = "http://127.0.0.1:9/v1") -> dict:
    return {
        "upstreams": {
            "deepseek": {"kind": "openai_compatible", "provider": "deepseek", "url": f"{mock_url}/deepseek/v1"},
            "openrouter": {"kind": "openai_compatible", "provider": "openrouter", "url": f"{mock_url}/openrouter/v1"},
            "azure": {"kind": "openai_compatible", "provider": "azure", "url": f"{mock_url}/azure",
                      "api_version": "2024-10-21", "deployments": {"prod-4o": "gpt-4o"}},
            "vllm": {"kind": "openai_compatible", "url": self_hosted_url},
        },
        "routes": [
            {"name": "deepseek", "models": ["deepseek-*"], "targets": [{"upstream": "deepseek"}]},
            {"name": "openrouter", "models": ["openai/*", "mystery/*", "anthropic/*", "google/*"],
             "targets": [{"upstream": "openrouter"}]},
            {"name": "azure", "models": ["prod-4o"], "targets": [{"upstream": "azure"}]},
            {"name": "vllm", "models": ["llama-3"], "targets": [{"upstream": "vllm"}]},
        ],
        "keys": [{"name": "team", "key_env": "GATEWAY_KEY", "tenant": "acme"}],
    }


@pytest.fixture
def keys(monkeypatch):
    for env in ("DEEPSEEK_API_KEY", "OPENROUTER_API_KEY", "AZURE_OPENAI_API_KEY"):
        monkeypatch.setenv(env, f"sk-{env.lower()}")
    monkeypatch.setenv("GATEWAY_KEY", "pg-team-key")


def records_of(settings, n: int) -> list[dict]:
    wait_until(lambda: len(read_records(settings.ledger_path)) >= n, 10, f"{n} ledger records")
    return read_records(settings.ledger_path)


@pytest.mark.parametrize("stream", [False, True])
def test_hosted_providers_cache_and_bill_at_their_own_prices(tmp_path, mock, keys, stream):
    settings = settings_for(mock.url, tmp_path)
    policy = policy_for(settings, gateway_policy(mock.url))
    cases = [("deepseek-chat", deepseek_chat_at, "deepseek"), ("openai/gpt-4o-mini", OPENROUTER_GPT_4O_MINI, "openrouter"),
             ("prod-4o", AZURE_GPT_4O, "azure")]
    usages = []
    with running_gateway(settings, policy=policy) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="pg-team-key", max_retries=0)
        for model, _, _ in cases:
            for day in (22, 23):
                if stream:
                    chunks = list(client.chat.completions.create(model=model, messages=messages(day), stream=True,
                                                                 stream_options={"include_usage": True}))
                    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
                    usage = chunks[-1].usage
                else:
                    usage = client.chat.completions.create(model=model, messages=messages(day)).usage
                usages.append(usage)
    records = records_of(settings, 6)
    assert len(records) == 6
    for i, (model, price, provider) in enumerate(cases):
        first, second = usages[2 * i], usages[2 * i + 1]
        assert cached_tokens(first) == 0
        # The date moved after the static prefix, so the second call of the pair reads the cache.
        assert cached_tokens(second) > 1000, (model, second)
        for usage, rec in zip((first, second), records[2 * i:2 * i + 2], strict=True):
            # Azure's answer names the model its deployment runs, which the record names (and prices) too.
            named = AZURE_ANSWERS_AS if provider == "azure" else model
            assert rec["provider"] == provider and rec["model"] == named and rec["status"] == 200
            assert rec["cache_read"] == cached_tokens(usage)
            at = price(rec["ts"]) if callable(price) else price
            assert Decimal(rec["cost_usd"]) == golden(usage, at), (model, rec)
            assert not any(line.startswith("unpriced") for line in rec["explanation"])
    # DeepSeek reports hit + miss = prompt_tokens; OpenRouter its own cost, kept beside the computed one.
    ds = usages[1].model_extra
    assert ds["prompt_cache_hit_tokens"] + ds["prompt_cache_miss_tokens"] == usages[1].prompt_tokens
    for rec, usage in zip(records[2:4], usages[2:4], strict=True):
        assert Decimal(rec["provider_cost_usd"]) == Decimal(str(usage.model_extra["cost"]))
        assert rec["cost_usd"] and not any("differ by over 1%" in line for line in rec["explanation"])


def test_no_hosted_provider_is_sent_cache_salt_or_priced_at_zero(tmp_path, mock, keys):
    with running_upstream() as self_hosted:
        settings = settings_for(mock.url, tmp_path)
        policy = policy_for(settings, gateway_policy(mock.url, f"{self_hosted.url}/v1"))
        with running_gateway(settings, policy=policy) as gw:
            client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="pg-team-key", max_retries=0)
            for model in ("deepseek-chat", "openai/gpt-4o-mini", "prod-4o", "llama-3"):
                client.chat.completions.create(model=model, messages=messages(23))
        received = list(mock.ctx.received)
        assert {path for path, _ in received} == {"/deepseek/v1/chat/completions", "/openrouter/v1/chat/completions",
                                                  "/azure/openai/deployments/prod-4o/chat/completions"}
        assert not any("cache_salt" in body for _, body in received)
        # The self-hosted server does get the tenant's salt (its cache is shared by every caller).
        assert self_hosted.received[-1].body["cache_salt"]
    records = records_of(settings, 4)
    for rec in records:
        if rec["target"] == "vllm":
            assert Decimal(rec["cost_usd"]) == 0
        else:
            assert Decimal(rec["cost_usd"]) > 0, rec


def test_unknown_model_priced_from_reported_cost_else_unpriced(tmp_path, mock, keys):
    settings = settings_for(mock.url, tmp_path)
    policy = policy_for(settings, gateway_policy(mock.url))
    with running_gateway(settings, policy=policy) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="pg-team-key", max_retries=0)
        routed = client.chat.completions.create(model="mystery/model-x", messages=messages(23))
        direct = client.chat.completions.create(model="deepseek-v9-unlisted", messages=messages(23))
    assert routed.choices[0].message.content and direct.choices[0].message.content
    by_model = {r["model"]: r for r in records_of(settings, 2)}
    routed_rec, direct_rec = by_model["mystery/model-x"], by_model["deepseek-v9-unlisted"]
    # OpenRouter said what it charged: that is the cost, and the note says where it came from.
    assert Decimal(routed_rec["cost_usd"]) == Decimal(str(routed.usage.model_extra["cost"])) > 0
    assert any("priced from the provider's reported cost" in line for line in routed_rec["explanation"])
    # DeepSeek reports no cost: no price at all, flagged, never $0.
    assert direct_rec["cost_usd"] is None and direct_rec["provider_cost_usd"] is None
    assert any(line.startswith("unpriced: no price row for deepseek/deepseek-v9-unlisted") for line in direct_rec["explanation"])


def test_azure_mock_takes_azure_openai_sdk(mock):
    """The mock speaks Azure's shape: the real AzureOpenAI client (api-key header, deployment path,
    api-version query) works against it, and a repeat reads the cache."""
    client = openai.AzureOpenAI(azure_endpoint=f"{mock.url}/azure", api_key="azure-key", api_version="2024-10-21",
                                max_retries=0)
    first = client.chat.completions.create(model="prod-4o", messages=messages(23))
    second = client.chat.completions.create(model="prod-4o", messages=messages(23))
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert second.usage.prompt_tokens_details.cached_tokens > 1000
    path, _ = mock.ctx.received[-1]
    assert path == "/azure/openai/deployments/prod-4o/chat/completions"
    bearer = openai.OpenAI(base_url=f"{mock.url}/azure/openai/deployments/prod-4o", api_key="k", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bearer.chat.completions.create(model="prod-4o", messages=messages(23))


@pytest.mark.parametrize("stream", [False, True])
def test_azure_openai_client_through_the_gateway(tmp_path, mock, keys, stream):
    """An application already on `openai.AzureOpenAI` points its azure_endpoint at the gateway: the
    deployment in the path is the routed model, `api-key` is the gateway key, and the Azure upstream is
    reached with the gateway's own Azure key on its deployment path."""
    settings = settings_for(mock.url, tmp_path)
    policy = policy_for(settings, gateway_policy(mock.url))
    usages = []
    with running_gateway(settings, policy=policy) as gw:
        client = openai.AzureOpenAI(azure_endpoint=gw.url, api_key="pg-team-key", api_version="2024-10-21",
                                    max_retries=0)
        for day in (22, 23):
            if stream:
                chunks = list(client.chat.completions.create(model="prod-4o", messages=messages(day), stream=True,
                                                             stream_options={"include_usage": True}))
                usages.append(chunks[-1].usage)
            else:
                usages.append(client.chat.completions.create(model="prod-4o", messages=messages(day)).usage)
    assert usages[1].prompt_tokens_details.cached_tokens > 1000
    path, body = mock.ctx.received[-1]
    assert path == "/azure/openai/deployments/prod-4o/chat/completions" and "cache_salt" not in body
    records = records_of(settings, 2)
    assert [Decimal(r["cost_usd"]) for r in records] == [golden(u, AZURE_GPT_4O) for u in usages]


# The other profiles, each with one model of its rows: (provider, model, (input, cache read, output) USD/MTok
# or None where the provider has no row).
OTHERS = [
    ("xai", "grok-4", (Decimal("3.00"), Decimal("0.75"), Decimal("15.00"))),
    # mistral-medium-latest points at Medium 3.5 since 2026-06-16 (genai-prices' dated row; https://mistral.ai/pricing).
    ("mistral", "mistral-medium-latest", (Decimal("1.50"), Decimal("0.15"), Decimal("7.50"))),
    ("groq", "openai/gpt-oss-120b", (Decimal("0.15"), Decimal("0.075"), Decimal("0.60"))),
    # Together has no price row (its cache discount is unconfirmed): its requests are flagged unpriced.
    ("together", "meta-llama/Llama-3.3-70B-Instruct-Turbo", None),
    ("fireworks", "accounts/fireworks/models/llama-v3p3-70b-instruct", (Decimal("0.90"), Decimal("0.45"), Decimal("0.90"))),
]


def test_the_zero_price_and_cache_salt_checks_cover_every_profile():
    """"No hosted compatible provider is priced at $0 or sent cache_salt": the two tests that check it
    (deepseek, openrouter and azure above; the rest in OTHERS) name every profile, so a new one joins them."""
    assert {"deepseek", "openrouter", "azure"} | {p for p, _, _ in OTHERS} == set(PROFILES)


def test_every_other_profile_caches_and_bills_at_its_rows(tmp_path, mock, monkeypatch):
    monkeypatch.setenv("GATEWAY_KEY", "pg-team-key")
    data = {"upstreams": {}, "routes": [], "keys": [{"name": "team", "key_env": "GATEWAY_KEY", "tenant": "acme"}]}
    for provider, model, _ in OTHERS:
        monkeypatch.setenv(f"{provider.upper()}_API_KEY", f"sk-{provider}")
        data["upstreams"][provider] = {"kind": "openai_compatible", "provider": provider, "url": f"{mock.url}/{provider}/v1"}
        data["routes"].append({"name": provider, "models": [model], "targets": [{"upstream": provider}]})
    settings = settings_for(mock.url, tmp_path)
    usages = {}
    with running_gateway(settings, policy=policy_for(settings, data)) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="pg-team-key", max_retries=0)
        for _, model, _ in OTHERS:
            usages[model] = [client.chat.completions.create(model=model, messages=messages(day)).usage for day in (22, 23)]
    assert {path for path, _ in mock.ctx.received} == {f"/{p}/v1/chat/completions" for p, _, _ in OTHERS}
    assert not any("cache_salt" in body for _, body in mock.ctx.received)
    records = records_of(settings, 2 * len(OTHERS))
    for provider, model, price in OTHERS:
        first, second = usages[model]
        mine = [r for r in records if r["model"] == model]
        if price is None:
            # No row, no rules to plan with either: passed through as sent (the date stays first), unpriced.
            assert [r["cost_usd"] for r in mine] == [None, None]
            assert all(any(line.startswith(f"unpriced: no price row for {provider}/{model}") for line in r["explanation"])
                       for r in mine)
            continue
        assert cached_tokens(second) > 1000, provider
        if provider == "mistral":
            assert cached_tokens(second) % 64 == 0
        billed = [Decimal(r["cost_usd"]) for r in mine]
        assert billed == [golden(first, price), golden(second, price)] and all(b > 0 for b in billed), provider


# OpenRouter's Claude row (USD per MTok): input, cache read, 5-minute cache write, output.
OPENROUTER_CLAUDE_SONNET = (Decimal("3"), Decimal("0.30"), Decimal("3.75"), Decimal("15"))


def markers(body: dict) -> list[tuple[int, dict]]:
    """(message index, cache_control) of every Anthropic-style marker on a sent body's content parts."""
    return [(i, part["cache_control"]) for i, msg in enumerate(body["messages"]) if isinstance(msg.get("content"), list)
            for part in msg["content"] if "cache_control" in part]


@pytest.mark.parametrize("stream", [False, True])
def test_openrouter_claude_gets_breakpoints_and_bills_writes(tmp_path, mock, keys, stream):
    """OpenRouter caches Claude only at `cache_control` breakpoints: the planner places them by Claude's rules
    (the end of the static system prompt, 5-minute TTL), the second call of a dated pair reads what the first
    wrote, and the ledger bills writes at 1.25x input, reads at 0.1x (golden values by hand), beside
    OpenRouter's own reported cost."""
    settings = settings_for(mock.url, tmp_path)
    policy = policy_for(settings, gateway_policy(mock.url))
    usages = []
    with running_gateway(settings, policy=policy) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="pg-team-key", max_retries=0)
        for day in (22, 23):
            if stream:
                chunks = list(client.chat.completions.create(model="anthropic/claude-sonnet-4.6", messages=messages(day),
                                                             stream=True, stream_options={"include_usage": True}))
                assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
                usages.append(chunks[-1].usage)
            else:
                usages.append(client.chat.completions.create(model="anthropic/claude-sonnet-4.6", messages=messages(day)).usage)
    sent = [body for path, body in mock.ctx.received if path == "/openrouter/v1/chat/completions"]
    assert len(sent) == 2
    for body in sent:
        # Breakpoints in OpenRouter's form (5-minute, at most Claude's 4), one ending the static system prompt
        # (message 0, the date moved after it); none of OpenAI's cache fields.
        placed = markers(body)
        assert placed[0] == (0, {"type": "ephemeral"}) and 1 <= len(placed) <= 4, body["messages"]
        assert all(cc == {"type": "ephemeral"} for _, cc in placed)
        assert not {"prompt_cache_key", "prompt_cache_options", "cache_salt"} & set(body)
    first, second = (u.prompt_tokens_details for u in usages)
    assert first.cached_tokens == 0 and first.cache_write_tokens > 1000
    # The second reads the static prefix the first wrote (its tail, past the moved time, is new).
    assert 1000 < second.cached_tokens < first.cache_write_tokens
    inp, read, write, out = OPENROUTER_CLAUDE_SONNET
    records = records_of(settings, 2)
    for usage, rec in zip(usages, records, strict=True):
        cached, written = usage.prompt_tokens_details.cached_tokens, usage.prompt_tokens_details.cache_write_tokens
        golden_cost = ((usage.prompt_tokens - cached - written) * inp + cached * read + written * write
                       + usage.completion_tokens * out) / MTOK
        assert rec["cache_read"] == cached and rec["cache_writes"] == ({"5m": written} if written else {})
        assert Decimal(rec["cost_usd"]) == golden_cost, rec
        # OpenRouter's usage.cost agrees with the table, so the ledger keeps both and flags nothing.
        assert Decimal(rec["provider_cost_usd"]) == Decimal(str(usage.model_extra["cost"]))
        assert not any("differ by over 1%" in line or line.startswith("unpriced") for line in rec["explanation"])
    assert Decimal(records[1]["cost_usd"]) < Decimal(records[0]["cost_usd"])


def test_openrouter_gemini_gets_breakpoints_other_models_none(tmp_path, mock, keys):
    """Gemini through OpenRouter takes the same breakpoints; a model OpenRouter caches automatically (an
    OpenAI one) is sent no `cache_control` at all."""
    settings = settings_for(mock.url, tmp_path)
    policy = policy_for(settings, gateway_policy(mock.url))
    with running_gateway(settings, policy=policy) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="pg-team-key", max_retries=0)
        # Gemini 3.x Flash caches nothing under 4,096 tokens (https://ai.google.dev/gemini-api/docs/caching): the
        # policy three times (~6,000 tokens).
        gemini = [client.chat.completions.create(model="google/gemini-3.8-flash", messages=longer(longer(messages(day))))
                  .usage
                  for day in (22, 23)]
        client.chat.completions.create(model="openai/gpt-4o-mini", messages=messages(23))
    sent = [body for path, body in mock.ctx.received if path == "/openrouter/v1/chat/completions"]
    assert all(markers(b)[0] == (0, {"type": "ephemeral"}) for b in sent[:2])
    assert gemini[1].prompt_tokens_details.cached_tokens > 1000
    assert markers(sent[2]) == [] and "cache_control" not in str(sent[2])
    assert isinstance(sent[2]["messages"][0]["content"], str)       # the caller's plain string, untouched


@pytest.mark.parametrize("policy_value", ["keep", "add", "optimize"])
def test_openrouter_caller_markers_follow_the_route_policy(tmp_path, mock, keys, policy_value):
    """A caller's own `cache_control` on an OpenRouter Claude request is a checkpoint, handled by the route's
    `caller_checkpoints`: `keep` sends it as placed and adds none (its prefix holds the moved time, so nothing
    is read: the caller's choice); `add` and `optimize` add the static prefix's breakpoint where the cost model
    expects it to pay, and later requests read that entry through Claude's lookback from the caller's marker."""
    settings = settings_for(mock.url, tmp_path)
    data = gateway_policy(mock.url)
    next(r for r in data["routes"] if r["name"] == "openrouter")["caller_checkpoints"] = policy_value
    question = [{"type": "text", "text": "Is my toaster covered?", "cache_control": {"type": "ephemeral"}}]
    with running_gateway(settings, policy=policy_for(settings, data)) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="pg-team-key", max_retries=0)
        for day in (21, 22, 23):
            msgs = messages(day)
            msgs[1] = {"role": "user", "content": question}
            client.chat.completions.create(model="anthropic/claude-sonnet-4.6", messages=msgs)
    sent = [body for _, body in mock.ctx.received]
    records = records_of(settings, 3)
    caller = (1, {"type": "ephemeral"})
    if policy_value == "keep":
        assert all(markers(body) == [caller] for body in sent)
        assert all("cache: the caller placed 1 checkpoint(s); kept as sent" in r["explanation"] for r in records)
        assert [r["cache_read"] for r in records] == [0, 0, 0]
    else:
        assert markers(sent[0]) == [(0, {"type": "ephemeral"}), caller]
        assert any(line.startswith("checkpoint: added a 5m marker") for line in records[0]["explanation"])
        assert all(caller in markers(body) for body in sent)
        assert records[0]["cache_writes"]["5m"] > 1000 and all(r["cache_read"] > 1000 for r in records[1:])


def test_claude_code_style_caller_reaches_openrouters_claude_with_its_breakpoints(tmp_path, mock, keys):
    """An Anthropic Messages caller (the `anthropic` SDK, as Claude Code sends: its own `cache_control`) routed to
    OpenRouter's Claude: the body is translated to Chat Completions, the caller's breakpoints arrive in
    OpenRouter's `cache_control` form (kept as placed), and the repeat reads what the first wrote."""
    data = gateway_policy(mock.url)
    data["routes"].insert(0, {"name": "claude-code", "models": ["claude-sonnet-5"],
                              "targets": [{"upstream": "openrouter", "model": "anthropic/claude-sonnet-4.6"}]})
    settings = settings_for(mock.url, tmp_path)
    with running_gateway(settings, policy=policy_for(settings, data)) as gw:
        client = anthropic.Anthropic(base_url=gw.url, api_key="pg-team-key", max_retries=0)
        replies = [client.messages.create(
            model="claude-sonnet-5", max_tokens=32,
            system=[{"type": "text", "text": f"You are the ACME warranty assistant.\n{POLICY}", "cache_control": {"type": "ephemeral"}}],
            messages=[{"role": "user", "content": f"Question {i}: is my toaster covered?"}]) for i in range(2)]
    sent = [body for path, body in mock.ctx.received if path == "/openrouter/v1/chat/completions"]
    assert [markers(body) for body in sent] == [[(0, {"type": "ephemeral"})]] * 2
    assert all(body["model"] == "anthropic/claude-sonnet-4.6" for body in sent)
    assert replies[0].usage.cache_creation_input_tokens > 1000 and replies[0].usage.cache_read_input_tokens == 0
    assert replies[1].usage.cache_read_input_tokens == replies[0].usage.cache_creation_input_tokens
    records = records_of(settings, 2)
    assert records[0]["cache_writes"] == {"5m": replies[0].usage.cache_creation_input_tokens}
    assert all(Decimal(r["provider_cost_usd"]) == Decimal(r["cost_usd"]) > 0 for r in records)
