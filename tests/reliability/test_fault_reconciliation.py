"""Faults from the mock providers (429 with Retry-After, 500, 529, latency spikes, streams cut mid-way,
slow streams), an upstream that resets connections, slow clients and clients that hang up, all at once
through one gateway: every request ends completed, or with an error in its own dialect, or as the
client's own hang-up; nothing is billed twice; nothing stays open; and the ledger agrees with what the
clients saw, request by request and in its token sums."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import httpx
import pytest

from prefixgate.gateway.app import create_app
from prefixgate.ledger import read_records
from prefixgate.usage import Usage
from tests.gateway.support_gateway import ServerThread, policy_for, settings_for
from tests.reliability.support_figures import report
from tests.reliability.support_upstream import ResettingUpstream, Tap, ask, mock_upstream
from tests.support_services import wait_until

FAULTS = {"faults": [
    {"fault": "status=429;retry_after=0", "model": "gpt-5.4-mini", "every": 3},
    {"fault": "status=500", "model": "gpt-5.4", "every": 2},
    {"fault": "status=529", "model": "claude-sonnet-5", "every": 5},
    {"fault": "status=529", "model": "claude-haiku-4-5", "every": 3},
    {"fault": "drop_stream_after=3", "model": "gpt-5.6-luna", "every": 3},
    {"fault": "event_delay=0.02", "model": "gpt-6-astra"},
    {"fault": "latency=0.3", "model": "gemini-3.5-flash", "every": 4},
    {"fault": "latency=0.5", "model": "gemini-3.8-flash"},
]}
RETRY = {"attempts": 2, "backoff_s": 0.01, "max_backoff_s": 0.05, "timeout_s": 5}


def policy(reset_url: str) -> dict:
    return {
        "upstreams": {"resetting": {"kind": "openai", "url": reset_url}},
        "routes": [
            {"name": "flaky", "models": ["flaky"], "retry": {**RETRY, "attempts": 3},
             "targets": [{"upstream": "openai", "model": "gpt-5.4-mini"}]},
            {"name": "fallback", "models": ["fallback"], "retry": RETRY,
             "targets": [{"upstream": "openai", "model": "gpt-5.4"}, {"upstream": "anthropic", "model": "claude-sonnet-5"}]},
            {"name": "reset", "models": ["reset"], "retry": {**RETRY, "attempts": 1},
             "targets": [{"upstream": "resetting", "model": "gpt-6-luna"}, {"upstream": "openai", "model": "gpt-6-luna"}]},
            {"name": "dropping", "models": ["dropping"], "retry": RETRY,
             "targets": [{"upstream": "openai", "model": "gpt-5.6-luna"}]},
            {"name": "slowstream", "models": ["slowstream"], "retry": RETRY,
             "targets": [{"upstream": "openai", "model": "gpt-6-astra"}]},
            {"name": "claude", "models": ["claude-haiku-4-5"], "retry": RETRY, "targets": [{"upstream": "anthropic"}]},
            {"name": "gemini", "models": ["gemini-*"], "retry": RETRY, "targets": [{"upstream": "gemini"}]},
        ]}


# (dialect, model, stream, behaviour): one round of traffic.
ROUND = [
    ("openai", "flaky", False, "normal"), ("openai", "flaky", True, "normal"),
    ("openai", "fallback", False, "normal"), ("openai", "fallback", True, "normal"),
    ("openai", "reset", False, "normal"), ("openai", "reset", True, "normal"),
    ("openai", "dropping", True, "normal"), ("openai", "dropping", True, "normal"),     # streams only: every 3rd cut
    ("openai", "slowstream", True, "slow"), ("openai", "slowstream", True, "hangup"),
    ("anthropic", "claude-haiku-4-5", False, "normal"), ("anthropic", "claude-haiku-4-5", True, "normal"),
    ("anthropic", "claude-haiku-4-5", True, "hangup"),
    ("gemini", "gemini-3.5-flash", False, "normal"), ("gemini", "gemini-3.5-flash", True, "normal"),
    ("gemini", "gemini-3.8-flash", False, "hangup"), ("gemini", "gemini-3.8-flash", True, "slow"),
]
ROUNDS = 8
CONCURRENCY = 24


@pytest.fixture
def stack(tmp_path, monkeypatch):
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(var, f"sk-{var.lower()}-provider-secret")
    tap = Tap()
    with ServerThread(mock_upstream(FAULTS, tap)) as up, ResettingUpstream() as resetting:
        settings = settings_for(up.url, tmp_path)
        app = create_app(settings, policy=policy_for(settings, policy(resetting.url)))
        with ServerThread(app) as gw:
            yield gw, app, settings, tap, resetting


async def traffic(url: str) -> list:
    gate = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(30)) as client:
        async def one(spec):
            async with gate:
                return await ask(client, *spec)
        return await asyncio.wait_for(asyncio.gather(*(one(s) for _ in range(ROUNDS) for s in ROUND)), 180)


def usage_sum(usages) -> tuple[int, int, int, int]:
    total = sum((u for u in usages if u is not None), Usage())
    return total.uncached_input, total.cache_read, total.cache_write, total.output


def test_every_request_is_accounted_for_under_faults(stack):
    gw, app, settings, tap, resetting = stack
    started = time.monotonic()
    seen = asyncio.run(traffic(gw.url))
    elapsed = time.monotonic() - started

    # Every request has exactly one record (hang-ups included: the upstream may have billed them).
    wait_until(lambda: len(read_records(settings.ledger_path)) == len(seen), 10, "one ledger record per request")
    records = {r["id"]: r for r in read_records(settings.ledger_path)}
    # Nothing left open: upstream handlers finished, the gateway holds no upstream call.
    wait_until(lambda: tap.active == 0, 10, "upstream handlers finished")
    wait_until(lambda: not any(app.state.proxy.in_flight.values()), 10, "gateway in-flight back to zero")

    # The record is committed before a stream's terminal event goes out (so no answer outlives its record):
    # when the gateway has relayed every other event before it sees the client leave, the answer is recorded
    # as delivered (200), though the client may have read only part of what the socket took. Any hang-up the
    # gateway sees before then is a 499.
    delivered = {s.nonce for s in seen if s.hung_up and not s.completed and s.stream and s.request_id
                 and records[s.request_id]["status"] == 200}
    outcomes: Counter = Counter()
    for s in seen:
        if s.hung_up and not s.completed and s.nonce not in delivered:
            outcomes["client hung up"] += 1
            assert not s.request_id or records[s.request_id]["status"] == 499
            continue
        assert s.request_id in records, s
        rec = records[s.request_id]
        if s.nonce in delivered:
            # What the client read before leaving is part of what the upstream billed and the ledger holds.
            outcomes["left after the answer was relayed"] += 1
            assert rec["output"] > 0 and rec["output"] >= (s.usage.output if s.usage else 0), (s, rec)
            assert [st for st in tap.answers.get(s.nonce, []) if st < 300] == [200], (s, tap.answers.get(s.nonce))
            continue
        if s.completed:     # a client that left after its stream's terminal event had its whole answer
            outcomes["completed"] += 1
            assert rec["status"] == 200 and s.status == 200, (s, rec)
            assert s.usage is not None and usage_sum([s.usage]) == usage_sum([Usage(
                rec["uncached_input"], rec["cache_read"], rec["cache_writes"], rec["output"])]), (s, rec)
        elif s.stream_error:
            outcomes["stream cut, error event"] += 1
            assert rec["status"] == 502 and "stream" in rec["error"], (s, rec)
        else:
            outcomes[f"error {s.status}"] += 1
            assert s.status >= 400 and s.error_shape_ok, s
            assert rec["status"] == s.status, (s, rec)
    hung_up = [r for r in records.values() if r["status"] == 499]
    assert len(hung_up) == outcomes["client hung up"] > 0
    assert all(r["error"].startswith("client disconnected") for r in hung_up)

    # The ledger's sums are the sums of what clients were told.
    relayed = {s.request_id for s in seen if s.nonce in delivered}
    assert usage_sum(s.usage for s in seen if s.completed) == usage_sum(
        Usage(r["uncached_input"], r["cache_read"], r["cache_writes"], r["output"])
        for r in records.values() if r["status"] == 200 and r["id"] not in relayed)

    # No duplicate billing: an upstream answered 2xx at most once per request, exactly once per completed one.
    for s in seen:
        ok = [st for st in tap.answers.get(s.nonce, []) if st < 300]
        assert len(ok) <= 1, (s, tap.answers[s.nonce])
        if s.completed:
            assert len(ok) == 1
    # Every attempt the ledger counts reached an upstream and every upstream request is counted; a request
    # whose client left early may have been cancelled before its one attempt went out (one the gateway had
    # already relayed was answered, retries included).
    answered = [s for s in seen if not (s.hung_up and not s.completed) or s.nonce in delivered]
    attempts = sum(records[s.request_id]["attempts"] for s in answered)
    assert attempts == sum(len(tap.answers.get(s.nonce, [])) for s in answered) + resetting.accepted
    assert all(len(tap.answers.get(s.nonce, [])) <= 1 for s in seen if s not in answered)

    faults = Counter(st for v in tap.answers.values() for st in v if st >= 300)
    assert {429, 500, 529} <= set(faults) and resetting.accepted > 0
    assert outcomes["completed"] > len(seen) // 2 and outcomes["stream cut, error event"] > 0
    report("faults", {"requests": len(seen), "seconds": round(elapsed, 1), "outcomes": dict(outcomes),
                      "upstream_attempts": attempts, "upstream_faults": {str(k): v for k, v in faults.items()},
                      "connection_resets": resetting.accepted, "double_billed": 0})
