"""Amazon Bedrock's pieces in core: event-stream framing, SigV4, the Converse and InvokeModel bodies, the
Bedrock price rows and the simulator's Bedrock cache."""

from __future__ import annotations

import base64
import json
import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from botocore.credentials import ReadOnlyCredentials

from prefixgate import sigv4
from prefixgate.dialects import bedrock_invoke, converse, eventstream
from prefixgate.errors import RequestError
from prefixgate.providers.pricing import cost_of, resolve_model
from prefixgate.simulation.simulator import Simulator
from prefixgate.usage import Usage

SONNET = "us.anthropic.claude-sonnet-5-5"
LONG = "You answer questions about the warehouse inventory system and its shipping rules. " * 400  # ~6k tokens


# ---- event-stream ----------------------------------------------------------------------------------

def test_event_stream_frames_decode_in_any_split() -> None:
    data = eventstream.event("chunk", {"bytes": "e30="}) + eventstream.exception("throttlingException", "slow down")
    for cut in range(len(data)):
        decoder = eventstream.Decoder()
        messages = [*decoder.feed(data[:cut]), *decoder.feed(data[cut:])]
        decoder.close()
        assert [(m.kind, m.name, m.json()) for m in messages] == [
            ("event", "chunk", {"bytes": "e30="}), ("exception", "throttlingException", {"message": "slow down"})]


def test_event_stream_with_a_bad_crc_or_cut_short_is_an_error() -> None:
    data = bytearray(eventstream.event("messageStart", {"role": "assistant"}))
    data[-8] ^= 0x01   # a payload byte: the message CRC no longer matches
    with pytest.raises(eventstream.EventStreamError, match="Checksum"):
        list(eventstream.Decoder().feed(bytes(data)))
    decoder = eventstream.Decoder()
    assert list(decoder.feed(eventstream.event("messageStart", {})[:-1])) == []
    with pytest.raises(eventstream.EventStreamError, match="ended inside a frame"):
        decoder.close()


# ---- SigV4 -----------------------------------------------------------------------------------------

CREDS = ReadOnlyCredentials("AKIDPREFIXGATETEST", "secret/key+value", None)
URL = "http://127.0.0.1:9/model/us.anthropic.claude-sonnet-5-5/converse"


def signed(body: bytes = b'{"messages":[]}') -> dict[str, str]:
    return sigv4.sign("POST", URL, {"content-type": "application/json", "host": "127.0.0.1:9"}, body, CREDS,
                      "us-east-1")


def test_a_signature_verifies_and_any_change_breaks_it() -> None:
    headers = signed()
    assert sigv4.verify("POST", URL, headers, b'{"messages":[]}', {CREDS.access_key: CREDS.secret_key}).region == "us-east-1"
    secrets = {CREDS.access_key: CREDS.secret_key}
    for method, url, hdrs, body in [
        ("POST", URL, headers, b'{"messages":[1]}'),                               # body changed
        ("POST", URL.replace("converse", "converse-stream"), headers, b'{"messages":[]}'),  # path changed
        ("POST", URL, {**headers, "content-type": "text/plain"}, b'{"messages":[]}'),      # signed header changed
    ]:
        with pytest.raises(sigv4.SignatureError, match="does not match"):
            sigv4.verify(method, url, hdrs, body, secrets)
    with pytest.raises(sigv4.SignatureError, match="does not match"):
        sigv4.verify("POST", URL, headers, b'{"messages":[]}', {CREDS.access_key: "another secret"})
    with pytest.raises(sigv4.SignatureError, match="token included in the request is invalid"):
        sigv4.verify("POST", URL, headers, b'{"messages":[]}', {"AKIDOTHER": "x"})
    later = datetime.now(UTC) + timedelta(minutes=6)
    with pytest.raises(sigv4.SignatureError, match="expired"):
        sigv4.verify("POST", URL, headers, b'{"messages":[]}', secrets, now=later)
    with pytest.raises(sigv4.SignatureError, match="SigV4"):
        sigv4.verify("POST", URL, {"authorization": "Bearer x"}, b"", secrets)


def test_a_real_boto3_client_signature_verifies(monkeypatch: pytest.MonkeyPatch) -> None:
    """What boto3 sends to an endpoint_url (quoted model id in the path) passes verify()."""
    boto3 = pytest.importorskip("boto3")
    seen: dict = {}

    class Capture(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            seen["path"], seen["headers"] = self.path, dict(self.headers.items())
            seen["body"] = self.rfile.read(int(self.headers["content-length"]))
            out = json.dumps(converse.build_response("ok", Usage(1, 0, {}, 1))).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        client = boto3.client("bedrock-runtime", region_name="us-west-2", endpoint_url=f"http://127.0.0.1:{port}",
                              aws_access_key_id=CREDS.access_key, aws_secret_access_key=CREDS.secret_key)
        # An inference-profile ARN: its colons and slash reach the path percent-encoded, and the signature covers them.
        arn = f"arn:aws:bedrock:us-west-2:123456789012:inference-profile/{SONNET}"
        reply = client.converse(modelId=arn, messages=[{"role": "user", "content": [{"text": "hi"}]}])
        assert reply["output"]["message"]["content"] == [{"text": "ok"}]
    finally:
        server.shutdown()
    url = f"http://127.0.0.1:{port}{seen['path']}"
    assert "%3A" in seen["path"]
    by = sigv4.verify("POST", url, seen["headers"], seen["body"], {CREDS.access_key: CREDS.secret_key})
    assert (by.region, by.service) == ("us-west-2", "bedrock")


def test_no_credentials_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(sigv4.CredentialsError, match="AWS_ACCESS_KEY_ID"):
        sigv4.CredentialChain().current()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    assert sigv4.CredentialChain().current().access_key == "AKIDENV"


# ---- Converse ------------------------------------------------------------------------------------

CONVERSE = {
    "modelId": "ignored-by-parse",
    "toolConfig": {"tools": [{"toolSpec": {"name": "lookup", "description": "Find an order.",
                                           "inputSchema": {"json": {"type": "object"}}}},
                             {"cachePoint": {"type": "default"}}],
                   "toolChoice": {"auto": {}}},
    "system": [{"text": "You are terse."}, {"cachePoint": {"type": "default", "ttl": "1h"}}],
    "messages": [
        {"role": "user", "content": [{"text": "Where is order 7?"}, {"image": {"format": "png", "source": {"bytes": "AAAA"}}}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"id": 7}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "shipped"}]}},
                                     {"cachePoint": {"type": "default"}}]},
    ],
    "inferenceConfig": {"maxTokens": 64, "temperature": 0},
}


def test_converse_round_trips_and_cache_points_are_checkpoints() -> None:
    conv = converse.parse_request(CONVERSE, model=SONNET)
    assert [(s.role, [(b.kind, b.checkpoint and b.checkpoint.ttl) for b in s.blocks]) for s in conv.segments] == [
        ("tools", [("tool_def", "5m")]), ("system", [("text", "1h")]),
        ("user", [("text", None), ("image", None)]), ("assistant", [("tool_call", None)]),
        ("user", [("tool_result", "5m")])]
    assert converse.encode_request(conv) == CONVERSE
    assert json.dumps(converse.encode_request(conv)) == json.dumps(CONVERSE)   # key order too


@pytest.mark.parametrize("body, field", [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "system", "content": [{"text": "x"}]}]}, "messages.0.role"),
    ({"messages": [{"role": "user", "content": [{"hologram": {}}]}]}, "messages.0.content.0"),
    ({"messages": [{"role": "user", "content": [{"text": "a", "image": {}}]}]}, "messages.0.content.0"),
    ({"messages": [{"role": "user", "content": [{"cachePoint": {"type": "default"}}]}]}, "messages.0.content.0"),
    ({"messages": [{"role": "user", "content": [{"text": "a"}, {"cachePoint": {"type": "big"}}]}]},
     "messages.0.content.1.cachePoint.type"),
    ({"messages": [{"role": "user", "content": [{"text": "a"}, {"cachePoint": {"type": "default", "ttl": "2h"}}]}]},
     "messages.0.content.1.cachePoint.ttl"),
    ({"messages": [{"role": "user", "content": [{"text": "a"}]}], "inferenceConfig": {"maxTokens": 0}},
     "inferenceConfig.maxTokens"),
    ({"messages": [{"role": "user", "content": [{"text": "a"}]}], "toolConfig": {"tools": [{"fn": {}}]}},
     "toolConfig.tools.0"),
])
def test_bad_converse_bodies_name_the_field(body: dict, field: str) -> None:
    with pytest.raises(RequestError) as err:
        converse.parse_request(body, model=SONNET)
    assert err.value.field == field and err.value.status == 400


def test_converse_usage_excludes_cached_tokens_and_splits_writes_by_ttl() -> None:
    native = {"inputTokens": 12, "outputTokens": 30, "totalTokens": 5042, "cacheReadInputTokens": 4000,
              "cacheWriteInputTokens": 1000, "cacheDetails": [{"ttl": "1h", "inputTokens": 600},
                                                              {"ttl": "5m", "inputTokens": 400}]}
    usage = converse.parse_usage(native)
    assert usage == Usage(12, 4000, {"1h": 600, "5m": 400}, 30)
    assert converse.usage_json(usage) == native
    # Without a split, a write is a 5-minute write (Bedrock's default TTL).
    assert converse.parse_usage({"inputTokens": 1, "cacheWriteInputTokens": 9}).cache_writes == {"5m": 9}


# ---- InvokeModel ---------------------------------------------------------------------------------

def test_invoke_body_is_anthropics_without_model_and_stream() -> None:
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 10,
            "system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "hi"}], "anthropic_beta": ["x"]}
    conv = bedrock_invoke.parse_request(body, model=SONNET, stream=True)
    assert conv.model == SONNET and conv.stream and conv.checkpoints()
    assert bedrock_invoke.encode_request(conv) == body
    for bad, field in [({**body, "model": "m"}, "model"), ({**body, "stream": True}, "stream"),
                       ({k: v for k, v in body.items() if k != "anthropic_version"}, "anthropic_version")]:
        with pytest.raises(RequestError) as err:
            bedrock_invoke.parse_request(bad, model=SONNET)
        assert err.value.field == field


def test_invoke_stream_chunks_carry_anthropic_events() -> None:
    events = [{"type": "message_start", "message": {"usage": {"input_tokens": 3}}}, {"type": "message_stop"}]
    frames = b"".join(bedrock_invoke.stream_frames(events, Usage(3, 5, {"5m": 7}, 2)))
    decoded = [bedrock_invoke.event_of(m) for m in eventstream.Decoder().feed(frames)]
    assert decoded[0] == events[0]
    assert decoded[1]["amazon-bedrock-invocationMetrics"]["cacheReadInputTokenCount"] == 5
    # An exception frame mid-stream reads as Anthropic's error event, so the relay ends the stream with it.
    error = next(eventstream.Decoder().feed(eventstream.exception("throttlingException", "Too many tokens")))
    assert bedrock_invoke.event_of(error) == {"type": "error", "error": {"type": "throttlingException",
                                                                         "message": "Too many tokens"}}
    bad = next(eventstream.Decoder().feed(eventstream.event("chunk", {"bytes": base64.b64encode(b"{").decode()})))
    with pytest.raises(RequestError, match="valid base64 JSON"):
        bedrock_invoke.event_of(bad)


# ---- prices and the simulator -------------------------------------------------------------------

@pytest.mark.parametrize("model, row", [
    (SONNET, "anthropic.claude-sonnet-5-5"),
    ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic.claude-sonnet-4-5"),
    ("anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic.claude-sonnet-4-5"),
    ("eu.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic.claude-sonnet-4-5"),
    ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", "global.anthropic.claude-sonnet-4-5"),
    ("arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-haiku-4-5-20251001-v1:0",
     "anthropic.claude-haiku-4-5"),
    ("arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-opus-4-1-20250805-v1:0", "anthropic.claude-opus-4-1"),
])
def test_bedrock_model_ids_resolve_from_every_spelling(model: str, row: str) -> None:
    assert resolve_model("bedrock", model).id == row


def test_bedrock_prices_regional_profiles_ten_percent_over_global() -> None:
    # 1,000 uncached + 10,000 read + 2,000 written (5m) + 500 output, Sonnet 5.5 on Bedrock, $ per MTok from
    # AWS's price list ("Claude Sonnet 5.5 (Amazon Bedrock Edition)"; reads 0.05x input):
    usage = Usage(1000, 10_000, {"5m": 2000}, 500)
    regional = cost_of("bedrock", SONNET, usage)         # 2.20 / 0.11 / 2.75 / 11
    assert regional.total == Decimal("0.0022") + Decimal("0.0011") + Decimal("0.0055") + Decimal("0.0055")
    world = cost_of("bedrock", "global.anthropic.claude-sonnet-5-5", usage)   # 2 / 0.10 / 2.50 / 10
    assert world.total == Decimal("0.002") + Decimal("0.001") + Decimal("0.005") + Decimal("0.005")
    assert world.without_cache == Decimal("0.013") * 2 + Decimal("0.005")
    # 1h writes at 2x input on the models that take them ($4.40 regional).
    assert cost_of("bedrock", SONNET, Usage(0, 0, {"1h": 1_000_000}, 0)).total == Decimal("4.4")


def converse_body(system: str, *, ttl: str | None = None, question: str = "hi") -> dict:
    point = {"type": "default", **({"ttl": ttl} if ttl else {})}
    return {"system": [{"text": system}, {"cachePoint": point}],
            "messages": [{"role": "user", "content": [{"text": question}]}], "inferenceConfig": {"maxTokens": 50}}


def test_simulated_bedrock_caches_per_model_rules() -> None:
    sim = Simulator()
    first = sim.respond("bedrock", converse_body(LONG), now=0, model=SONNET).usage
    second = sim.respond("bedrock", converse_body(LONG, question="again"), now=60, model=SONNET).usage
    assert first.cache_write > 4096 and first.cache_read == 0
    assert second.cache_read == first.cache_write and second.cache_write == 0
    # The 5-minute entry is gone after 5 minutes without a read.
    assert sim.respond("bedrock", converse_body(LONG), now=60 + 301, model=SONNET).usage.cache_read == 0
    # Sonnet 5.5 on Bedrock caches from 512 tokens (AWS's table excerpt of 2026-10-04, AU section 1).
    short = "Reply in one sentence about shipping. " * 300   # ~2,400 tokens
    assert sim.respond("bedrock", converse_body(short), now=0, model=SONNET).usage.cache_write > 0
    # Opus 4.7 on Bedrock needs 4,096 tokens (AWS's table), where Anthropic's API needs 2,048.
    opus = "global.anthropic.claude-opus-4-7"
    assert sim.respond("bedrock", converse_body(short), now=0, model=opus).usage.cache_write == 0
    anthropic_body = {"model": "claude-opus-4-7", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}],
                      "system": [{"type": "text", "text": short, "cache_control": {"type": "ephemeral"}}]}
    assert sim.respond("anthropic", anthropic_body, now=0).usage.cache_write > 0


def test_simulated_bedrock_rejects_markers_the_model_cannot_take() -> None:
    sim = Simulator()
    with pytest.raises(RequestError, match="does not support prompt caching") as err:
        sim.respond("bedrock", converse_body(LONG), now=0, model="anthropic.claude-opus-4-1-20250805-v1:0")
    assert err.value.field == "system.0.cachePoint"
    with pytest.raises(RequestError, match="supports ttl 5m only"):
        sim.respond("bedrock", converse_body(LONG, ttl="1h"), now=0, model="us.anthropic.claude-3-7-sonnet-20250219-v1:0")
    # AWS's current table gives Opus 4.6 and Sonnet 4.6 both TTLs (an older one listed 5m only).
    for model in ("us.anthropic.claude-sonnet-4-6", "global.anthropic.claude-opus-4-6"):
        assert sim.respond("bedrock", converse_body(LONG * 2, ttl="1h"), now=0, model=model).usage.cache_writes.get("1h")
    assert sim.respond("bedrock", converse_body(LONG, ttl="1h"), now=0, model=SONNET).usage.cache_writes.get("1h")
    with pytest.raises(RequestError, match="names its model in the URL"):
        sim.respond("bedrock", converse_body(LONG), now=0)


# ---- the planner ---------------------------------------------------------------------------------

def test_the_planner_places_cache_points_under_bedrocks_table() -> None:
    from prefixgate.cache_planner import PlannerState, Target, plan

    def body(minute: int) -> dict:
        return {"system": [{"text": f"Current time: 2026-11-23 10:{minute:02d}:00 UTC.\n" + LONG}],
                "messages": [{"role": "user", "content": [{"text": "hi"}]}], "inferenceConfig": {"maxTokens": 50}}

    state = PlannerState()
    planned = [plan(converse.parse_request(body(t), model=SONNET), Target("bedrock", SONNET), state, "rewrite",
                    route="r", now=float(t)) for t in (0, 10, 20)]
    sent = converse.encode_request(planned[0].conversation)
    points = [b for b in sent["system"] if "cachePoint" in b]
    assert points and all(p["cachePoint"]["type"] == "default" for p in points)
    assert "10:00:00" not in sent["system"][0]["text"]          # the time left the cached prefix
    # ... into the user turn, as a Converse block (one-key union), which Bedrock accepts.
    assert sent["messages"][0]["content"][0] == {"text": "Context:\nCurrent time: 2026-11-23 10:00:00 UTC.\n"}
    converse.parse_request(sent, model=SONNET)
    # Every planned body is one Bedrock accepts; the first writes the static prefix, the later ones read it.
    sim = Simulator()
    usages = [sim.respond("bedrock", converse.encode_request(p.conversation), now=float(t), model=SONNET).usage
              for t, p in zip((0, 10, 20), planned, strict=True)]
    assert usages[0].cache_write > 4096
    assert usages[1].cache_read > 4096 and usages[2].cache_read > 4096
    # A model that cannot cache gets no cache point (Bedrock would reject it), and says why.
    no_cache = plan(converse.parse_request(body(0), model="anthropic.claude-opus-4-1-20250805-v1:0"),
                    Target("bedrock", "anthropic.claude-opus-4-1-20250805-v1:0"), PlannerState(), "rewrite", route="r")
    assert not no_cache.conversation.checkpoints()
    assert any("cannot cache" in line for line in no_cache.explanation)
