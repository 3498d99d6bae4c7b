"""Amazon Bedrock through the gateway, against mock-providers' Bedrock (which checks SigV4 like AWS): the AWS and
Anthropic SDKs in Bedrock mode, and an Anthropic client routed to Bedrock by policy. A dated system prompt
misses every time when sent straight to Bedrock; through the gateway the second call reads the cache, and the
ledger prices each path exactly."""

from __future__ import annotations

import json
import random
import time
from decimal import Decimal
from urllib.parse import quote

import anthropic
import boto3
import botocore.exceptions
import httpx
import pytest
from botocore.config import Config
from botocore.credentials import ReadOnlyCredentials

from prefixgate import sigv4
from prefixgate.ledger import read_records
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

pytestmark = pytest.mark.slow
KEY, SECRET = "AKIDGATEWAYBEDROCK", "gateway/bedrock+secret"
MODEL = "us.anthropic.claude-sonnet-5-5"
# Sonnet 5.5 through a regional (us.) inference profile, $ per MTok (AWS's price list, "Claude Sonnet 5.5 (Amazon
# Bedrock Edition)": 10% over global, reads 0.05x input).
PRICE = {"input": Decimal("2.20"), "read": Decimal("0.11"), "write_5m": Decimal("2.75"), "output": Decimal("11")}
RULES = "\n".join(f"Rule {i}: answer warehouse questions from the shipping manual, section {i}." for i in range(450))


def dated_system(at: float) -> str:
    """The system prompt real apps send: today's date and time first, then ~6k tokens of fixed rules."""
    return f"Current time: {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(at))} UTC.\n{RULES}\n{SESSION}"


# A fresh prefix per test run (the mock's cache starts cold for it), in words: an id would itself be volatile.
SESSION = "Desk motto: " + " ".join(random.Random().sample(["amber", "birch", "cedar", "delta", "ember", "fjord",
                                                             "grove", "heron", "inlet", "juniper"], 6)) + "."


def golden(usage: dict) -> Decimal:
    """Cost of one answer by hand: each token class at its price (Converse's or Anthropic's field names)."""
    get = lambda *names: sum(int(usage.get(n) or 0) for n in names)  # noqa: E731
    uncached = get("inputTokens", "input_tokens")
    read = get("cacheReadInputTokens", "cache_read_input_tokens")
    written = get("cacheWriteInputTokens", "cache_creation_input_tokens")
    output = get("outputTokens", "output_tokens")
    return (uncached * PRICE["input"] + read * PRICE["read"] + written * PRICE["write_5m"]
            + output * PRICE["output"]) / 1_000_000


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    for name in ("AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def stack(aws_env, tmp_path):
    """(mock URL, gateway URL, ledger path): mock-providers and a gateway whose Bedrock upstream is the mock."""
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path, bedrock_base_url=mock.url)
        policy = policy_for(settings, {"routes": [
            {"name": "claude-on-bedrock", "models": ["claude-sonnet-4-6"],
             "targets": [{"upstream": "bedrock", "model": MODEL}]},
            {"name": "bedrock", "models": ["*.anthropic.*", "anthropic.*"], "targets": [{"upstream": "bedrock"}]},
        ]})
        with running_gateway(settings, policy=policy) as gateway:
            yield mock.url, gateway.url, settings.ledger_path


def runtime(url: str):
    # Credentials named, not left to boto3's default session (which keeps the first ones it found).
    return boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=url, aws_access_key_id=KEY,
                        aws_secret_access_key=SECRET, config=Config(retries={"max_attempts": 1}))


def converse_args(at: float) -> dict:
    return {"modelId": MODEL, "system": [{"text": dated_system(at)}, {"cachePoint": {"type": "default"}}],
            "messages": [{"role": "user", "content": [{"text": "Where is order 7?"}]}],
            "inferenceConfig": {"maxTokens": 40}}


def invoke_body(at: float) -> dict:
    return {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 40,
            "system": [{"type": "text", "text": dated_system(at), "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "Where is order 7?"}]}


def ledger_costs(path: str, n: int) -> list[Decimal]:
    # Wait for the records, failing as a timeout (not later as a cost mismatch on a short list).
    wait_until(lambda: len(read_records(path)) >= n, 60, f"{n} ledger records")
    return [Decimal(r["cost_usd"]) for r in sorted(read_records(path), key=lambda r: r["ts"])]


def test_boto3_converse_through_the_gateway_reads_what_direct_calls_miss(stack):
    mock, gateway, ledger = stack
    t = time.time()
    direct = [runtime(mock).converse(**converse_args(t + i)) for i in range(2)]
    assert direct[1]["usage"]["cacheReadInputTokens"] == 0          # the time at the top breaks the prefix
    through = [runtime(gateway).converse(**converse_args(t + 10 + i)) for i in range(2)]
    assert through[0]["usage"]["cacheWriteInputTokens"] > 4096
    assert through[1]["usage"]["cacheReadInputTokens"] == through[0]["usage"]["cacheWriteInputTokens"]
    assert ledger_costs(ledger, 2) == [golden(r["usage"]) for r in through]


def test_boto3_converse_stream_is_relayed_frame_for_frame_and_priced(stack):
    _, gateway, ledger = stack
    t = time.time()
    runtime(gateway).converse(**converse_args(t))
    events = list(runtime(gateway).converse_stream(**converse_args(t + 1))["stream"])
    assert [next(iter(e)) for e in events][-2:] == ["messageStop", "metadata"]
    usage = events[-1]["metadata"]["usage"]
    assert usage["cacheReadInputTokens"] > 4096
    assert ledger_costs(ledger, 2)[1] == golden(usage)


def test_boto3_invoke_model_with_response_stream_reads_cache(stack):
    _, gateway, ledger = stack
    t = time.time()
    client = runtime(gateway)
    first = json.loads(client.invoke_model(modelId=MODEL, body=json.dumps(invoke_body(t)))["body"].read())
    stream = client.invoke_model_with_response_stream(modelId=MODEL, body=json.dumps(invoke_body(t + 1)))["body"]
    events = [json.loads(e["chunk"]["bytes"]) for e in stream]
    start = events[0]["message"]["usage"]
    assert start["cache_read_input_tokens"] == first["usage"]["cache_creation_input_tokens"] > 4096
    final = {**start, **next(e for e in events if e["type"] == "message_delta")["usage"]}
    assert ledger_costs(ledger, 2) == [golden(first["usage"]), golden(final)]


def test_anthropic_bedrock_client_create_and_stream(stack):
    _, gateway, ledger = stack
    client = anthropic.AnthropicBedrock(base_url=gateway, aws_region="us-east-1", aws_access_key=KEY,
                                        aws_secret_key=SECRET, max_retries=0)
    t = time.time()
    args = invoke_body(t) | {"model": MODEL}
    args.pop("anthropic_version")
    first = client.messages.create(**args)
    with client.messages.stream(**(args | {"system": invoke_body(t + 1)["system"]})) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and final.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens > 4096
    assert ledger_costs(ledger, 2) == [golden(first.usage.model_dump()), golden(final.usage.model_dump())]


def test_anthropic_client_routed_to_bedrock_by_policy_keeps_its_cache_control(stack):
    _, gateway, ledger = stack
    client = anthropic.Anthropic(base_url=gateway, api_key="caller", max_retries=0)
    t = time.time()
    answers = [client.messages.with_raw_response.create(
        model="claude-sonnet-4-6", **{k: v for k, v in invoke_body(t + i).items() if k != "anthropic_version"})
        for i in range(2)]
    assert {a.headers["x-prefixgate-target"] for a in answers} == {"bedrock"}
    usages = [a.parse().usage for a in answers]
    assert usages[1].cache_read_input_tokens == usages[0].cache_creation_input_tokens > 4096
    assert ledger_costs(ledger, 2) == [golden(u.model_dump()) for u in usages]


def test_bad_bedrock_requests_get_bedrocks_errors_naming_the_field(stack):
    _, gateway, _ = stack
    # The SDKs will not send an unknown block type; a signed request built by hand does, as a buggy client would.
    bad = converse_args(time.time()) | {"messages": [{"role": "user", "content": [{"hologram": {}}]}]}
    url = f"{gateway}/model/{quote(MODEL, safe='')}/converse"
    body = json.dumps({k: v for k, v in bad.items() if k != "modelId"}).encode()
    headers = sigv4.sign("POST", url, {"content-type": "application/json", "host": gateway.split("//")[1]}, body,
                         ReadOnlyCredentials(KEY, SECRET, None), "us-east-1")
    answer = httpx.post(url, content=body, headers=headers)
    assert answer.status_code == 400
    assert answer.headers["x-amzn-errortype"].startswith("ValidationException")
    assert "messages.0.content.0" in answer.json()["message"]
    with pytest.raises(botocore.exceptions.ClientError) as err:
        runtime(gateway).converse(**converse_args(time.time()) | {"modelId": "anthropic.claude-opus-4-1-20250805-v1:0"})
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert "does not support prompt caching" in err.value.response["Error"]["Message"]


def test_a_bedrock_operation_the_gateway_does_not_serve_is_bedrocks_own_not_found(stack):
    """boto3's ApplyGuardrail (a Bedrock Runtime operation the gateway does not serve) gets Bedrock's error shape,
    so boto3 raises its own ResourceNotFoundException naming the path, not a malformed answer."""
    _, gateway, _ = stack
    with pytest.raises(botocore.exceptions.ClientError) as err:
        runtime(gateway).apply_guardrail(guardrailIdentifier="g1", guardrailVersion="1", source="INPUT",
                                         content=[{"text": {"text": "Where is order 7?"}}])
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert err.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert "/apply: no such endpoint" in err.value.response["Error"]["Message"]


@pytest.mark.parametrize("operation", ["converse", "invokeModel"])
def test_boto3_count_tokens_through_the_gateway_is_what_bedrock_counts(stack, operation):
    """CountTokens, either operation's request, answers through the gateway what Bedrock answers directly."""
    mock, gateway, _ = stack
    counted = {"converse": {"converse": {k: v for k, v in converse_args(0).items() if k in ("system", "messages")}},
               "invokeModel": {"invokeModel": {"body": json.dumps(invoke_body(0)).encode()}}}[operation]
    direct = runtime(mock).count_tokens(modelId=MODEL, input=counted)["inputTokens"]
    assert direct > 1000                        # the dated system prompt and the question
    assert runtime(gateway).count_tokens(modelId=MODEL, input=counted)["inputTokens"] == direct
    # A route whose target names its own model counts for that model (Claude's tokenizer either way).
    assert runtime(gateway).count_tokens(modelId="claude-sonnet-4-6", input=counted)["inputTokens"] == direct


@pytest.mark.parametrize("given,field", [({}, "input"), ({"invokeModel": {"body": "not base64!"}}, "input.invokeModel.body"),
                                         ({"converse": {"messages": 5}}, "messages")])
def test_a_bad_count_tokens_body_is_bedrocks_validation_error_naming_the_field(stack, given, field):
    _, gateway, _ = stack
    url = f"{gateway}/model/{quote(MODEL, safe='')}/count-tokens"
    body = json.dumps({"input": given}).encode()
    headers = sigv4.sign("POST", url, {"content-type": "application/json", "host": gateway.split("//")[1]}, body,
                         ReadOnlyCredentials(KEY, SECRET, None), "us-east-1")
    answer = httpx.post(url, content=body, headers=headers)
    assert answer.status_code == 400 and answer.headers["x-amzn-errortype"].startswith("ValidationException")
    assert answer.json()["message"].startswith(f"{field}:")
