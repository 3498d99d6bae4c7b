"""A Bedrock upstream whose event stream has a frame with a bad checksum (docs/bedrock.md): the caller gets
an upstream error in its own shape (an Anthropic `error` event, an AWS exception frame), never a crash or a
silently cut answer, and the ledger records the request as a 502 naming the broken stream."""

from __future__ import annotations

import base64
import json

import anthropic
import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import EventStreamError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from prefixgate.dialects import eventstream
from prefixgate.ledger import read_records
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

pytestmark = pytest.mark.slow
KEY, SECRET = "AKIDGATEWAYFRAMES", "frames/secret"


def _chunk(obj: dict) -> bytes:
    return eventstream.event("chunk", {"bytes": base64.b64encode(json.dumps(obj).encode()).decode()})


async def _broken_stream(request: Request) -> Response:
    start = _chunk({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                    "model": "claude", "content": [], "usage": {"input_tokens": 5, "output_tokens": 1}}})
    bad = bytearray(_chunk({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
    bad[-8] ^= 0x01     # a payload byte: the frame's CRC no longer matches
    return Response(start + bytes(bad), media_type="application/vnd.amazon.eventstream")


@pytest.fixture
def gateway(tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    for name in ("AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    upstream = Starlette(routes=[Route("/model/{model:path}/invoke-with-response-stream", _broken_stream, methods=["POST"])])
    with ServerThread(upstream) as up:
        settings = settings_for(up.url, tmp_path, bedrock_base_url=up.url)
        policy = policy_for(settings, {"routes": [
            {"name": "claude", "models": ["claude-sonnet-5-5"],
             "targets": [{"upstream": "bedrock", "model": "us.anthropic.claude-sonnet-4-6"}]},
            {"name": "bedrock", "models": ["*.anthropic.*"], "targets": [{"upstream": "bedrock"}]}]})
        with running_gateway(settings, policy=policy) as gw:
            yield gw.url, settings.ledger_path


def _recorded(ledger: str, route: str) -> dict:
    wait_until(lambda: any(r["route"] == route for r in read_records(ledger)), 30, f"a ledger row for {route}")
    (row,) = [r for r in read_records(ledger) if r["route"] == route]
    return row


def test_an_anthropic_stream_translated_from_bedrock_ends_in_an_anthropic_error(gateway) -> None:
    url, ledger = gateway
    client = anthropic.Anthropic(base_url=url, api_key="caller", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as raised:
        with client.messages.stream(model="claude-sonnet-5-5", max_tokens=10,
                                    messages=[{"role": "user", "content": "hi"}]) as stream:
            list(stream)
    assert raised.value.body["type"] == "error" and raised.value.body["error"]["type"] == "api_error"
    assert "broken stream" in raised.value.body["error"]["message"]
    row = _recorded(ledger, "claude")
    assert row["status"] == 502 and "Checksum" in row["error"]


def test_a_boto3_stream_relayed_from_bedrock_ends_in_an_aws_exception(gateway) -> None:
    url, ledger = gateway
    runtime = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=url, aws_access_key_id=KEY,
                           aws_secret_access_key=SECRET, config=Config(retries={"max_attempts": 1}))
    answer = runtime.invoke_model_with_response_stream(
        modelId="us.anthropic.claude-sonnet-4-6",
        body=json.dumps({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 10,
                         "messages": [{"role": "user", "content": "hi"}]}))
    with pytest.raises(EventStreamError) as raised:
        list(answer["body"])
    # boto3 names the exception by the stream's member (botocore's ResponseStream: `internalServerException`).
    assert raised.value.response["Error"]["Code"] == "internalServerException"
    assert "broken stream" in raised.value.response["Error"]["Message"]
    row = _recorded(ledger, "bedrock")
    assert row["status"] == 502 and "Checksum" in row["error"]
