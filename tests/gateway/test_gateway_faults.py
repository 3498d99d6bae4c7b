"""Upstream faults: retried with backoff, failed over in policy order, or passed to the caller in its
own dialect; a completed upstream answer is never sent twice; a client that hangs up cancels upstream."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from prefixgate.ledger import read_records
from tests.gateway.support_gateway import policy_stack
from tests.support_services import wait_until

# timeout_s: long enough that a healthy answer on a loaded 2-core runner never trips it, short enough that a
# silent attempt (the upstream holds it 10 s) is given up on well before it answers.
POLICY = {"routes": [
    {"name": "chain", "models": ["chain"], "retry": {"attempts": 2, "backoff_s": 0.01, "timeout_s": 3},
     "targets": [{"upstream": "openai", "model": "gpt-5.4"}, {"upstream": "anthropic", "model": "claude-haiku-4-5"}]},
    {"name": "no-retry", "models": ["once"], "retry": {"attempts": 1, "on": ["connect"], "timeout_s": 3},
     "targets": [{"upstream": "openai", "model": "gpt-5.4"}]},
    {"name": "slow", "models": ["slow"], "retry": {"attempts": 1, "timeout_s": 30},
     "targets": [{"upstream": "openai", "model": "gpt-5.4"}]},
    {"name": "anthropic", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
    {"name": "chat-to-claude", "models": ["chat-to-claude"], "retry": {"attempts": 1},
     "targets": [{"upstream": "anthropic", "model": "claude-haiku-4-5"}]},
]}
MSG = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with policy_stack(tmp_path_factory.mktemp("faults"), POLICY) as parts:
        yield parts


@pytest.fixture
def up(stack):
    stack[0].reset()
    return stack[0]


def client(gw, **kw) -> openai.OpenAI:
    return openai.OpenAI(api_key="caller", base_url=gw.url + "/v1", max_retries=0, **kw)


def record(settings, rid: str) -> dict:
    wait_until(lambda: any(r["id"] == rid for r in read_records(settings.ledger_path)), 5, "ledger record")
    return next(r for r in read_records(settings.ledger_path) if r["id"] == rid)


def test_429_is_retried_on_the_same_target(stack, up):
    _, gw, settings = stack
    up.fail("429")
    raw = client(gw).chat.completions.with_raw_response.create(model="chain", messages=MSG)
    assert raw.parse().choices[0].message.content == "Hello, world"
    assert [r.path for r in up.received] == ["/v1/chat/completions"] * 2
    assert raw.headers["x-prefixgate-target"] == "openai"
    assert record(settings, raw.headers["x-prefixgate-request-id"])["attempts"] == 2


def test_5xx_twice_fails_over_to_the_next_target_in_the_callers_dialect(stack, up):
    _, gw, settings = stack
    up.fail("500", "503")
    raw = client(gw).chat.completions.with_raw_response.create(model="chain", messages=MSG)
    assert raw.parse().choices[0].message.content == "Hello, world"
    assert [r.path for r in up.received] == ["/v1/chat/completions", "/v1/chat/completions", "/v1/messages"]
    assert up.received[-1].body["model"] == "claude-haiku-4-5"
    rec = record(settings, raw.headers["x-prefixgate-request-id"])
    assert rec["target"] == "anthropic" and rec["attempts"] == 3
    assert any("5xx" in line for line in rec["explanation"])


def test_timeout_before_first_byte_fails_over(stack, up):
    _, gw, _ = stack
    up.fail("timeout", "timeout")
    disconnects = up.disconnects
    resp = client(gw, timeout=60).chat.completions.create(model="chain", messages=MSG)
    assert resp.choices[0].message.content == "Hello, world"
    # The gateway hung up on each silent attempt at its 3 s timeout (the upstream would have held it
    # for 10 s and then answered 599): behaviour, not a stopwatch.
    # (The upstream notices a hang-up on its next poll, so wait for the count rather than read it at once.)
    wait_until(lambda: up.disconnects - disconnects == 2, 30, "both silent attempts hung up by the gateway")
    assert up.received[-1].path == "/v1/messages"


def test_all_targets_failing_returns_the_last_error_in_openai_shape(stack, up):
    _, gw, _ = stack
    up.fail("500", "500", "529", "529")
    with pytest.raises(openai.InternalServerError) as exc:
        client(gw).chat.completions.create(model="chain", messages=MSG)
    assert exc.value.status_code == 529
    assert "injected 529" in exc.value.message
    assert len(up.received) == 4


def test_caller_errors_are_not_retried_and_keep_the_status(stack, up):
    _, gw, _ = stack
    up.fail("400")
    with pytest.raises(openai.BadRequestError) as exc:
        client(gw).chat.completions.create(model="chain", messages=MSG)
    assert "injected 400" in exc.value.message
    assert len(up.received) == 1


def test_retry_on_limits_which_conditions_retry(stack, up):
    _, gw, _ = stack
    up.fail("429")
    with pytest.raises(openai.RateLimitError):
        client(gw).chat.completions.create(model="once", messages=MSG)
    assert len(up.received) == 1


def test_anthropic_caller_gets_its_own_error_shape(stack, up):
    _, gw, _ = stack
    up.fail("529", "529", "529")
    with pytest.raises(anthropic.APIStatusError) as exc:
        anthropic.Anthropic(api_key="c", base_url=gw.url, max_retries=0).messages.create(
            model="claude-haiku-4-5", max_tokens=5, messages=MSG)
    assert exc.value.status_code == 529
    assert exc.value.body["error"]["type"] == "overloaded_error"


def test_dropped_stream_is_reported_not_retried(stack, up):
    """The upstream answered 200 and started streaming: a retry could bill twice, so the caller is told."""
    _, gw, settings = stack
    up.fail("drop")
    stream = client(gw).chat.completions.create(model="chain", messages=MSG, stream=True)
    with pytest.raises(openai.APIError):
        for _ in stream:
            pass
    assert len(up.received) == 1
    rec = record(settings, stream.response.headers["x-prefixgate-request-id"])
    assert rec["status"] == 502 and "stream" in rec["error"]


def test_a_whole_answer_cut_after_its_200_is_reported_and_billed_not_retried(stack, up):
    """The upstream answered 200 (it generated, and billed, the answer) and its body broke half-way: sent again,
    a second answer is billed and the first is in no ledger row."""
    _, gw, settings = stack
    up.fail("drop")
    with pytest.raises(openai.APIStatusError) as exc:
        client(gw).chat.completions.create(model="chain", messages=MSG, max_tokens=50)
    assert exc.value.status_code == 502 and "cut off" in exc.value.message
    assert len(up.received) == 1
    rec = record(settings, exc.value.response.headers["x-prefixgate-request-id"])
    assert rec["status"] == 502 and rec["attempts"] == 1
    assert rec["output"] == 50 and rec["cost_usd"] is not None    # the output it may have run to, flagged estimated
    assert any(line.startswith("usage estimated") for line in rec["explanation"])


def test_dropped_anthropic_stream_raises_in_the_sdk(stack, up):
    _, gw, _ = stack
    up.fail("drop")
    with pytest.raises(anthropic.APIError):
        with anthropic.Anthropic(api_key="c", base_url=gw.url, max_retries=0).messages.stream(
                model="claude-haiku-4-5", max_tokens=5, messages=MSG) as stream:
            stream.get_final_message()
    assert len(up.received) == 1


def test_an_upstream_error_event_mid_stream_reaches_a_translated_caller_as_an_error(stack, up):
    """Claude's `event: error` (overloaded_error) mid-stream: an OpenAI caller must not get a finish chunk and
    [DONE] (a truncated answer that looks whole), and the ledger must say the stream failed, billing what ran."""
    _, gw, settings = stack
    up.fail("error")
    stream = client(gw).chat.completions.create(model="chat-to-claude", messages=MSG, stream=True)
    with pytest.raises(openai.APIError) as exc:
        for chunk in stream:
            assert not chunk.choices or chunk.choices[0].finish_reason is None
    assert "Overloaded" in exc.value.message
    rec = record(settings, stream.response.headers["x-prefixgate-request-id"])
    assert rec["status"] == 529 and "Overloaded" in rec["error"]    # what Anthropic answers an overloaded_error with
    assert rec["cache_read"] == 1920 and rec["output"] >= 1     # message_start's usage, and what streamed


def test_an_error_mid_stream_reaches_a_responses_caller_after_its_opening_events(stack, up):
    """OpenAI's Responses stream opens with response.created whatever follows; the SDK's stream helper takes an
    error before it for its own failure (a RuntimeError), so the provider's message would never be read."""
    _, gw, _ = stack
    up.fail("error")
    events = list(client(gw).responses.create(model="chat-to-claude", input="Hi", stream=True))
    assert events[0].type == "response.created"
    assert events[-1].type == "error" and "Overloaded" in events[-1].message


def test_an_upstream_error_event_reaches_a_same_format_caller_once(stack, up):
    """Relayed as the provider sent it, and not followed by a second error event of the gateway's own."""
    _, gw, settings = stack
    up.fail("error")
    resp = httpx.post(gw.url + "/v1/messages", headers={"x-api-key": "c"},
                      json={"model": "claude-haiku-4-5", "max_tokens": 5, "messages": MSG, "stream": True})
    assert resp.text.count("event: error") == 1
    assert '"type":"overloaded_error","message":"Overloaded"' in resp.text
    rec = record(settings, resp.headers["x-prefixgate-request-id"])
    assert rec["status"] == 529 and "Overloaded" in rec["error"]


def test_a_caller_who_leaves_in_the_backoff_after_a_429_is_billed_nothing(stack, up):
    """A 429 is a refusal: nothing ran upstream, so the hang-up's record carries no estimated usage."""
    _, gw, settings = stack
    up.fail("429-wait")     # Retry-After: 2, so the gateway waits 2 s before its second attempt
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(gw.url + "/v1/chat/completions", json={"model": "chain", "messages": MSG, "max_tokens": 50},
                   timeout=httpx.Timeout(5, read=0.5))
    def left() -> list[dict]:
        return [r for r in read_records(settings.ledger_path) if r["status"] == 499 and r["route"] == "chain"]
    wait_until(left, 10, "hang-up record")
    [rec] = left()
    assert len(up.received) == 1
    assert rec["output"] == 0 and rec["uncached_input"] == 0 and rec["cost_usd"] is None
    assert not any(line.startswith("usage estimated") for line in rec["explanation"])


@pytest.mark.parametrize("stream", [False, True])
def test_client_disconnect_cancels_the_upstream_call(stack, up, stream):
    _, gw, settings = stack
    up.fail("hang")
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(gw.url + "/v1/chat/completions", json={"model": "slow", "messages": MSG, "stream": stream},
                   timeout=httpx.Timeout(5, read=0.3))
    wait_until(lambda: up.disconnects == 1, 5, "upstream saw the gateway hang up")
    # Billed as estimated: a whole answer the upstream may have finished (prompt + the output it may run to, here
    # the 4096 tokens of a request that sets no limit); a stream stops at the hang-up before anything streamed.
    def left() -> list[dict]:
        return [r for r in read_records(settings.ledger_path) if r["status"] == 499 and r["route"] == "slow"
                and r["stream"] == stream]
    wait_until(left, 10, "the hang-up's record")
    [rec] = left()
    assert rec["uncached_input"] > 0 and rec["output"] == (0 if stream else 4096)


def test_provider_keys_never_reach_the_caller_or_the_ledger(stack, up):
    _, gw, settings = stack
    up.fail("401")
    # The upstream refused the gateway's own key, not the caller's (which the gateway accepted): a 502 that names
    # whose key it was, which the SDK is told not to retry; never a 401 the caller would take for its own key's.
    with pytest.raises(openai.InternalServerError) as exc:
        client(gw).chat.completions.create(model="chain", messages=MSG)
    assert exc.value.status_code == 502 and exc.value.response.headers["x-should-retry"] == "false"
    assert exc.value.body["message"].startswith("upstream 'openai' refused the gateway's credentials: ")
    assert "Incorrect API key provided: ***" in exc.value.message
    text = str(exc.value.body) + str(exc.value.response.headers)
    assert "sk-secret-openai-key" not in text
    record(settings, exc.value.response.headers["x-prefixgate-request-id"])
    for path in (settings.ledger_path, settings.ledger_path + "-wal"):
        with open(path, "rb") as f:
            data = f.read()
        assert b"sk-secret-openai-key" not in data and b"sk-ant-secret-key" not in data
