"""The real AWS and Anthropic SDKs against mock-providers' Bedrock paths, signing with real SigV4."""

from __future__ import annotations

import uuid

import anthropic
import boto3
import botocore.exceptions
import pytest
from botocore.config import Config

from prefixgate.tokens import count_tokens
from tests.core.providers.support_prompts import text_of

pytestmark = pytest.mark.slow
KEY, SECRET = "AKIDMOCKBEDROCK", "mock/bedrock+secret"
SONNET = "us.anthropic.claude-sonnet-5-5"


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mock checks signatures against these; the clients sign with them."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_REGION", "us-east-1")      # the mock's own region: signatures must be scoped to it
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)


def system() -> str:
    """A fresh ~5k-token system prompt (over any Claude minimum on Bedrock; Sonnet 5.5 caches from 512): a cold cache."""
    return f"Session {uuid.uuid4()}.\n" + text_of(5000)


@pytest.fixture
def runtime(mock_server):
    url, _ = mock_server
    # Credentials named, not left to boto3's default session (which keeps the first ones it found).
    return boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=url, aws_access_key_id=KEY,
                        aws_secret_access_key=SECRET, config=Config(retries={"max_attempts": 1}))


def converse_args(prompt: str, **extra) -> dict:
    return {"modelId": SONNET, "system": [{"text": prompt}, {"cachePoint": {"type": "default"}}],
            "messages": [{"role": "user", "content": [{"text": "Why?"}]}], "inferenceConfig": {"maxTokens": 40},
            **extra}


def test_boto3_converse_writes_then_reads_the_cache(runtime):
    prompt = system()
    first = runtime.converse(**converse_args(prompt))
    tokens = count_tokens(prompt)
    assert first["usage"]["cacheWriteInputTokens"] == tokens and first["usage"]["cacheReadInputTokens"] == 0
    second = runtime.converse(**converse_args(prompt))
    assert second["usage"]["cacheReadInputTokens"] == tokens and second["usage"]["cacheWriteInputTokens"] == 0
    assert second["output"]["message"]["content"][0]["text"] == first["output"]["message"]["content"][0]["text"]
    assert second["stopReason"] in ("end_turn", "max_tokens")


def test_boto3_converse_stream_frames_parse_and_carry_usage(runtime):
    prompt = system()
    runtime.converse(**converse_args(prompt))
    stream = runtime.converse_stream(**converse_args(prompt))["stream"]
    events = list(stream)
    names = [next(iter(e)) for e in events]
    assert names[0] == "messageStart" and names[-2:] == ["messageStop", "metadata"]
    text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e)
    assert text and events[-1]["metadata"]["usage"]["cacheReadInputTokens"] == count_tokens(prompt)


def test_boto3_invoke_model_with_response_stream_decodes_anthropic_events(runtime):
    import json

    prompt = system()
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 40,
            "system": [{"type": "text", "text": prompt, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "Why?"}]}
    plain = json.loads(runtime.invoke_model(modelId=SONNET, body=json.dumps(body))["body"].read())
    assert plain["usage"]["cache_creation_input_tokens"] == count_tokens(prompt)
    streamed = runtime.invoke_model_with_response_stream(modelId=SONNET, body=json.dumps(body))["body"]
    events = [json.loads(e["chunk"]["bytes"]) for e in streamed]
    assert [e["type"] for e in events][0] == "message_start" and events[-1]["type"] == "message_stop"
    assert events[0]["message"]["usage"]["cache_read_input_tokens"] == count_tokens(prompt)
    assert "amazon-bedrock-invocationMetrics" in events[-1]


def test_anthropic_bedrock_client_create_and_stream(mock_server):
    url, _ = mock_server
    client = anthropic.AnthropicBedrock(base_url=url, aws_region="us-east-1", aws_access_key=KEY,
                                        aws_secret_key=SECRET, max_retries=0)
    prompt = system()
    args = {"model": SONNET, "max_tokens": 40, "messages": [{"role": "user", "content": "Why?"}],
            "system": [{"type": "text", "text": prompt, "cache_control": {"type": "ephemeral"}}]}
    first = client.messages.create(**args)
    assert first.usage.cache_creation_input_tokens == count_tokens(prompt)
    with client.messages.stream(**args) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == first.content[0].text
    assert final.usage.cache_read_input_tokens == count_tokens(prompt)


def test_wrong_signature_and_unknown_key_are_bedrocks_403s(mock_server):
    url, _ = mock_server
    wrong = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=url, aws_access_key_id=KEY,
                         aws_secret_access_key="not the secret", config=Config(retries={"max_attempts": 1}))
    with pytest.raises(botocore.exceptions.ClientError) as err:
        wrong.converse(**converse_args("hi"))
    assert err.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    stranger = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=url, aws_access_key_id="AKIDOTHER",
                            aws_secret_access_key=SECRET, config=Config(retries={"max_attempts": 1}))
    with pytest.raises(botocore.exceptions.ClientError) as err:
        stranger.converse(**converse_args("hi"))
    assert err.value.response["Error"]["Code"] == "UnrecognizedClientException"


def test_a_signature_scoped_to_another_region_is_refused_as_aws_does(mock_server):
    """A client configured for eu-west-1 but sent to a us-east-1 endpoint signs a valid signature for the wrong
    scope: AWS answers 403 InvalidSignatureException "Credential should be scoped to a valid region"."""
    url, _ = mock_server
    elsewhere = boto3.client("bedrock-runtime", region_name="eu-west-1", endpoint_url=url, aws_access_key_id=KEY,
                             aws_secret_access_key=SECRET, config=Config(retries={"max_attempts": 1}))
    with pytest.raises(botocore.exceptions.ClientError) as err:
        elsewhere.converse(**converse_args("hi"))
    assert err.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert "Credential should be scoped to a valid region, not 'eu-west-1'" in err.value.response["Error"]["Message"]


def test_bad_requests_are_validation_exceptions_naming_the_field(runtime):
    cases = [
        (converse_args("hi", modelId="anthropic.claude-nonexistent-v1:0"), "model identifier is invalid"),
        (converse_args(system(), modelId="anthropic.claude-opus-4-1-20250805-v1:0"), "does not support prompt caching"),
        (converse_args(system(), system=[{"text": "x"}, {"cachePoint": {"type": "default", "ttl": "1h"}}],
                       modelId="us.anthropic.claude-3-7-sonnet-20250219-v1:0"), "supports ttl 5m only"),
    ]
    for args, message in cases:
        with pytest.raises(botocore.exceptions.ClientError) as err:
            runtime.converse(**args)
        assert err.value.response["Error"]["Code"] == "ValidationException", err.value.response
        assert message in err.value.response["Error"]["Message"]
