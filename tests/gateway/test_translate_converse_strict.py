"""Bedrock Converse takes `toolSpec.strict` ("Flag to enable structured output enforcement on a tool usage response",
botocore's bedrock-runtime model, shared/reference/responses-bedrock-vertex.md 2.2): a strict tool keeps its
guarantee across Converse both ways, instead of being read as loose (a Converse caller's tools reaching Claude or
OpenAI) or dropped with a note that Converse cannot say it (a strict OpenAI or Claude tool reaching Converse)."""

from __future__ import annotations

import boto3
import pytest
from botocore.config import Config

from prefixgate.dialects import wire_format
from prefixgate.dialects.translate import translate_body
from tests.gateway.support_gateway import policy_for, running_gateway, running_upstream, settings_for

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}
OPENAI = {"model": "m", "messages": [{"role": "user", "content": "Weather in Paris?"}],
          "tools": [{"type": "function", "function": {"name": "weather", "strict": True, "parameters": SCHEMA}}]}
CONVERSE = {"messages": [{"role": "user", "content": [{"text": "Weather in Paris?"}]}],
            "toolConfig": {"tools": [{"toolSpec": {"name": "weather", "strict": True, "inputSchema": {"json": SCHEMA}}}]}}


def test_a_strict_tool_reaches_converse_strict():
    out, notes = translate_body(OPENAI, wire_format("openai"), wire_format("bedrock_converse"),
                                "us.anthropic.claude-sonnet-5-5-v1:0")
    assert out["toolConfig"]["tools"][0]["toolSpec"]["strict"] is True
    assert not any("strict" in n for n in notes), notes


@pytest.mark.parametrize("target,model", [("anthropic", "claude-sonnet-5-5"), ("openai", "gpt-5.4")])
def test_a_converse_callers_strict_tool_stays_strict(target, model):
    out, _ = translate_body(CONVERSE, wire_format("bedrock_converse"), wire_format(target), model)
    tool = out["tools"][0]
    assert (tool.get("function") or tool)["strict"] is True


def test_a_boto3_converse_callers_strict_tool_reaches_claude_strict(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-converse-strict-000")
    for name, value in (("AWS_ACCESS_KEY_ID", "AKIDCONVERSESTRICT"), ("AWS_SECRET_ACCESS_KEY", "converse/strict"),
                        ("AWS_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path)
        policy = policy_for(settings, {"routes": [{"name": "claude", "models": ["claude-*"],
                                                   "targets": [{"upstream": "anthropic"}]}]})
        with running_gateway(settings, policy=policy) as gw:
            client = boto3.client("bedrock-runtime", endpoint_url=gw.url, region_name="us-east-1",
                                  config=Config(retries={"max_attempts": 1}))
            client.converse(modelId="claude-sonnet-5-5", messages=CONVERSE["messages"], toolConfig=CONVERSE["toolConfig"],
                            inferenceConfig={"maxTokens": 50})
    sent = [r.body for r in up.received if r.path == "/v1/messages"]
    assert [b["tools"][0].get("strict") for b in sent] == [True]
