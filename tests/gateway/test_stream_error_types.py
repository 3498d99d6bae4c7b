"""An error the upstream reports partway through its stream reaches a caller of another format as that format's
closest documented error, read by its own SDK: Claude's overloaded_error or a rate limit is not a bare 502 its
client would not retry. The mock providers send each API's documented mid-stream error (mock/stream_errors.py);
the expected types and statuses are the caller's provider's own (Anthropic's errors page: 429 rate_limit_error,
529 overloaded_error; Google's: 429 RESOURCE_EXHAUSTED)."""

from __future__ import annotations

import anthropic
import boto3
import botocore.exceptions
import openai
import pytest
from botocore.config import Config
from google import genai
from google.genai import errors as genai_errors

from prefixgate.dialects import wire_format
from prefixgate.ledger import read_records
from prefixgate.simulation.mock.faults import FaultPlan, FaultRule, parse_fault
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

POLICY = {"routes": [
    {"name": "to-claude", "models": ["to-claude"], "retry": {"attempts": 1},
     "targets": [{"upstream": "anthropic", "model": "claude-sonnet-5-5"}]},
    {"name": "to-gpt", "models": ["to-gpt"], "retry": {"attempts": 1}, "targets": [{"upstream": "openai", "model": "gpt-5.4"}]},
    {"name": "to-gemini", "models": ["to-gemini"], "retry": {"attempts": 1},
     "targets": [{"upstream": "gemini", "model": "gemini-3.5-flash"}]},
    {"name": "to-bedrock", "models": ["to-bedrock"], "retry": {"attempts": 1},
     "targets": [{"upstream": "bedrock", "model": "us.anthropic.claude-sonnet-5-5"}]},
]}
MSG = [{"role": "user", "content": "Tell me a long story about caches"}]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    for var, key in (("OPENAI_API_KEY", "sk-openai-key-000111"), ("ANTHROPIC_API_KEY", "sk-ant-key-000222"),
                     ("GEMINI_API_KEY", "AIzaGeminiKey000000000000000000333"),
                     ("AWS_ACCESS_KEY_ID", "AKIDGATEWAYBEDROCK"), ("AWS_SECRET_ACCESS_KEY", "gateway/bedrock+secret"),
                     ("AWS_REGION", "us-east-1")):
        mp.setenv(var, key)
    for var in ("AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE"):
        mp.delenv(var, raising=False)
    ctx = MockContext()
    try:
        with ServerThread(mock_app(ctx)) as mock:
            settings = settings_for(mock.url, tmp_path_factory.mktemp("stream-errors"), bedrock_base_url=mock.url)
            with running_gateway(settings, policy=policy_for(settings, POLICY)) as gw:
                yield gw, ctx, settings
    finally:
        mp.undo()


def fails(ctx: MockContext, provider: str, spec: str) -> None:
    """The next request to `provider` streams a little, then reports the fault's error mid-stream."""
    ctx.faults = FaultPlan([FaultRule(parse_fault(spec), provider=provider, times=1)])


def record(settings, rid: str) -> dict:
    wait_until(lambda: any(r["id"] == rid for r in read_records(settings.ledger_path)), 5, "ledger record")
    return next(r for r in read_records(settings.ledger_path) if r["id"] == rid)


def claude_client(gw) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="caller", base_url=gw.url, max_retries=0)


def claude_stream_error(gw, model: str) -> anthropic.APIStatusError:
    with pytest.raises(anthropic.APIStatusError) as exc:
        with claude_client(gw).messages.stream(model=model, max_tokens=200, messages=MSG) as stream:
            for _ in stream:
                pass
    return exc.value


# OpenAI's rate limit chunk, Bedrock's throttlingException (its 429 in bedrock-runtime's service model)
@pytest.mark.parametrize(("provider", "model"), [("openai", "to-gpt"), ("bedrock", "to-bedrock")])
def test_a_rate_limit_mid_stream_reaches_a_claude_caller_as_rate_limit_error(stack, provider, model):
    gw, ctx, settings = stack
    fails(ctx, provider, "stream_error=429")
    err = claude_stream_error(gw, model)
    assert err.body["error"]["type"] == "rate_limit_error"
    assert record(settings, err.response.headers["x-prefixgate-request-id"])["status"] == 429


def test_googles_unavailable_mid_stream_reaches_a_claude_caller_as_overloaded_error(stack):
    """What Claude Code retries (`overloaded_error`), not an api_error it gives up on."""
    gw, ctx, _ = stack
    fails(ctx, "gemini", "stream_error=503")
    assert claude_stream_error(gw, "to-gemini").body["error"]["type"] == "overloaded_error"


def test_claudes_own_error_event_reaches_a_claude_caller_as_sent(stack):
    gw, ctx, settings = stack
    fails(ctx, "anthropic", "stream_error=529")
    err = claude_stream_error(gw, "to-claude")
    assert err.body == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert record(settings, err.response.headers["x-prefixgate-request-id"])["status"] == 529


def test_claudes_rate_limit_mid_stream_reaches_a_gemini_caller_as_resource_exhausted(stack):
    gw, ctx, _ = stack
    fails(ctx, "anthropic", "stream_error=429")
    client = genai.Client(api_key="caller", http_options={"base_url": gw.url, "retry_options": {"attempts": 1}})
    with pytest.raises(genai_errors.ClientError) as exc:
        for _ in client.models.generate_content_stream(model="to-claude", contents="Tell me a long story"):
            pass
    assert exc.value.code == 429 and exc.value.status == "RESOURCE_EXHAUSTED"


@pytest.mark.parametrize("stream", [True, False])
def test_claudes_overload_reaches_a_gemini_caller_as_googles_503_unavailable(stack, stream):
    """Google answers UNAVAILABLE with a 503 (google.rpc.Code's HTTP mapping), the status google-genai retries; it
    never sends Anthropic's 529. Mid-stream, and as a whole answer's refusal."""
    gw, ctx, _ = stack
    fails(ctx, "anthropic", "stream_error=529" if stream else "status=529")
    client = genai.Client(api_key="caller", http_options={"base_url": gw.url, "retry_options": {"attempts": 1}})
    with pytest.raises(genai_errors.ServerError) as exc:
        if stream:
            for _ in client.models.generate_content_stream(model="to-claude", contents="Tell me a long story"):
                pass
        else:
            client.models.generate_content(model="to-claude", contents="Tell me a long story")
    assert exc.value.code == 503 and exc.value.status == "UNAVAILABLE"


def test_claudes_rate_limit_mid_stream_reaches_an_openai_caller_as_a_rate_limit(stack):
    """OpenAI's rate-limit 429 (its error-codes guide): type the limit reached, code rate_limit_exceeded. Claude's
    error event names no limit (no headers mid-stream): `tokens` (errors.error_body says why), not rate_limit_error,
    which is no OpenAI type."""
    gw, ctx, settings = stack
    fails(ctx, "anthropic", "stream_error=429")
    stream = openai.OpenAI(api_key="caller", base_url=gw.url + "/v1", max_retries=0).chat.completions.create(
        model="to-claude", messages=MSG, stream=True)
    with pytest.raises(openai.APIError) as exc:
        for _ in stream:
            pass
    assert exc.value.type == "tokens" and exc.value.code == "rate_limit_exceeded"
    assert record(settings, stream.response.headers["x-prefixgate-request-id"])["status"] == 429


def responses_events(gw, model: str) -> list:
    client = openai.OpenAI(api_key="caller", base_url=gw.url + "/v1", max_retries=0)
    with client.responses.with_streaming_response.create(model=model, input="Tell me a long story", stream=True) as raw:
        rid = raw.headers["x-prefixgate-request-id"]
        return [*raw.parse()], rid


def test_claudes_rate_limit_mid_stream_reaches_a_responses_caller_with_its_rate_limit_code(stack):
    """Code `rate_limit_exceeded`, a failed response's own for a rate limit (the openai SDK's ResponseError)."""
    gw, ctx, _ = stack
    fails(ctx, "anthropic", "stream_error=429")
    events, _ = responses_events(gw, "to-claude")
    assert events[-1].type == "error" and events[-1].code == "rate_limit_exceeded"


def test_a_responses_error_event_reaches_a_responses_caller_as_sent(stack):
    gw, ctx, settings = stack
    fails(ctx, "openai", "stream_error=429")
    events, rid = responses_events(gw, "to-gpt")
    assert [e.type for e in events].count("error") == 1
    assert events[-1].type == "error" and events[-1].code == "rate_limit_exceeded"
    assert record(settings, rid)["status"] == 429


def test_bedrocks_exception_mid_converse_stream_reaches_boto3_as_sent_and_is_recorded_as_its_status(stack):
    """ServiceUnavailableException is Bedrock's 503 (bedrock-runtime's service model)."""
    gw, ctx, settings = stack
    fails(ctx, "bedrock", "stream_error=503")
    runtime = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=gw.url,
                           aws_access_key_id="AKIDGATEWAYBEDROCK", aws_secret_access_key="gateway/bedrock+secret",
                           config=Config(retries={"max_attempts": 1}))
    answer = runtime.converse_stream(modelId="to-bedrock", messages=[{"role": "user", "content": [{"text": "Hi"}]}])
    with pytest.raises(botocore.exceptions.EventStreamError) as exc:
        for _ in answer["stream"]:
            pass
    # the stream's member name, as botocore reports it ("An error occurred (throttlingException) when calling ...")
    assert exc.value.response["Error"]["Code"] == "serviceUnavailableException"
    assert record(settings, answer["ResponseMetadata"]["HTTPHeaders"]["x-prefixgate-request-id"])["status"] == 503


@pytest.mark.parametrize(("event", "status"), [
    ({"event_type": "error", "error": {"code": "resource_exhausted", "message": "Quota exceeded"}}, 429),
    ({"event_type": "error", "error": {"code": "unavailable", "message": "The model is overloaded"}}, 503),
])
def test_an_interactions_error_event_stands_for_googles_status(event, status):
    """The Interactions API's error: `{"error": {"code": string, "message": string}}`, its code Google's status."""
    assert wire_format("interactions").stream_error_status(event) == status
