"""The response cache for Bedrock InvokeModel callers, with the real boto3 client against mock-providers: a replayed
stream is framed as Bedrock frames one, invocation metrics included."""

from __future__ import annotations

import json

from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.gateway.test_gateway_bedrock import MODEL, aws_env, runtime  # noqa: F401 (aws_env: a fixture)
from tests.support_services import ServerThread


def test_a_replayed_invoke_stream_ends_with_bedrocks_invocation_metrics(aws_env, tmp_path):  # noqa: F811
    # Bedrock's message_stop chunk carries `amazon-bedrock-invocationMetrics` (inputTokenCount, outputTokenCount,
    # ...), which clients read the stream's usage from; a replay went without them.
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path, bedrock_base_url=mock.url)
        policy = policy_for(settings, {"routes": [{"name": "bedrock", "models": ["*.anthropic.*"], "targets": [
            {"upstream": "bedrock"}], "response_cache": {"mode": "on"}}]})
        with running_gateway(settings, policy=policy) as gw:
            client = runtime(gw.url)
            body = json.dumps({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 200,
                               "messages": [{"role": "user", "content": "Where is order 7?"}]})
            first = json.loads(client.invoke_model(modelId=MODEL, body=body)["body"].read())
            streamed = client.invoke_model_with_response_stream(modelId=MODEL, body=body)
            assert streamed["ResponseMetadata"]["HTTPHeaders"]["x-prefixgate-response-cache"] == "hit"
            events = [json.loads(e["chunk"]["bytes"]) for e in streamed["body"]]
    assert events[-1]["type"] == "message_stop"
    metrics = events[-1]["amazon-bedrock-invocationMetrics"]
    assert (metrics["inputTokenCount"], metrics["outputTokenCount"]) == (first["usage"]["input_tokens"],
                                                                         first["usage"]["output_tokens"])
