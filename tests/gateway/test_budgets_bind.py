"""Budgets that bind, seen from outside: a real `prefixgate serve` (no Redis) with budgeted caller keys in front
of `prefixgate mock-providers`. Concurrency cannot overshoot a budget by more than one request; a caller who
hangs up mid-stream, a completed stream and a legacy completion all spend; spend survives a restart."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
import yaml

from prefixgate.ledger import read_records
from prefixgate.policies.schema import hash_key
from tests.support_calendar import midday_zone
from tests.support_services import http_ok, start_on_free_port

pytestmark = pytest.mark.slow

# One caller key per test, each with its own budget, on one gateway: nothing one test spends touches another.
BUDGETS = {"crowd": {"usd": 0.006, "period": "total"}, "hangup": {"usd": 0.00001, "period": "total"},
           "hangup-whole": {"usd": 0.00001, "period": "total"},
           "stream": {"usd": 0.00001, "period": "day"}, "legacy": {"usd": 0.00001, "period": "total"},
           "restart-total": {"usd": 0.00001, "period": "total"}, "restart-day": {"usd": 0.00001, "period": "day"}}
# The day budgets' calendar: a zone where it is midday, so no day starts again while the tests run (a restart's
# spend is the day's, whenever the suite runs).
ZONE = midday_zone()


def auth(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer pg-budget-{name}-0001"}


SLOW = "gpt-5.4-mini"          # the mock delays its answers (a rule in the faults file below)
QUICK = "gpt-5.4"
PROMPT = "Summarise the shipping manual for a new warehouse clerk, one rule per line. " * 40


def chat(model: str, max_tokens: int = 200, **extra) -> dict:
    return {"model": model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": PROMPT}], **extra}


@contextmanager
def prefixgate(args: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """`prefixgate ARGS --port N` on a free port until the block ends; its URL."""
    def launch(port: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "prefixgate.cli", *args, "--port", str(port)], env=env,
                                stdout=log.open("a"), stderr=subprocess.STDOUT)
    proc, port = start_on_free_port(launch, lambda p: http_ok(f"http://127.0.0.1:{p}/health"), " ".join(args))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(20)


def mock_providers(tmp: Path):
    faults = tmp / "faults.yaml"
    faults.write_text(yaml.safe_dump({"faults": [{"fault": "latency=1.5;event_delay=0.2", "model": SLOW}]}))
    return prefixgate(["mock-providers", "--faults", str(faults)], tmp / "mock.log")


def gateway(tmp: Path, mock: str):
    policy = tmp / "policy.yaml"
    policy.write_text(yaml.safe_dump({
        "routes": [
            # The price table has no rows for these: the route declares OpenAI's published prices ($/MTok), so a
            # budgeted key may use them (without, it is told the model has no price).
            {"name": "legacy", "models": ["gpt-3.5-turbo-instruct", "text-embedding-3-small"],
             "targets": [{"upstream": "openai"}], "price": {"input": 1.5, "output": 2.0}},
            {"name": "openai", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}],
        "keys": [{"name": name, "key_sha256": hash_key(auth(name)["authorization"][7:]), "budget": budget}
                 for name, budget in BUDGETS.items()],
        "timezone": ZONE}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFIXGATE_")}
    env.update(OPENAI_API_KEY="sk-budget-provider-0002", PREFIXGATE_OPENAI_BASE_URL=mock,
               PREFIXGATE_POLICY_FILE=str(policy), PREFIXGATE_LEDGER_PATH=str(tmp / "ledger.sqlite"))
    return prefixgate(["serve"], tmp / "gateway.log", env)


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[tuple[str, str, Path]]:
    """(gateway URL, mock URL, folder of the ledger and logs)."""
    tmp = tmp_path_factory.mktemp("budgets")
    with mock_providers(tmp) as mock, gateway(tmp, mock) as url:
        yield url, mock, tmp


def ledger(tmp: Path, key: str, n: int) -> list[dict]:
    deadline = time.monotonic() + 10
    while len(rows := [r for r in read_records(str(tmp / "ledger.sqlite")) if r["key"] == key]) < n \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    return rows


def test_twenty_concurrent_requests_against_a_budget_that_fits_one_admit_at_most_two(stack):
    # Each request reserves its prompt (~680 tokens) at $0.75/MTok plus max_tokens=1000 at $4.50/MTok
    # (gpt-5.4-mini's published prices, https://developers.openai.com/api/docs/models/gpt-5.4-mini): about
    # $0.0050, so a $0.006 budget fits one reservation, not two.
    async def twenty(url: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=60) as client:
            return await asyncio.gather(*(client.post(url + "/v1/chat/completions", json=chat(SLOW, 1000), headers=auth("crowd"))
                                          for _ in range(20)))

    url, _, _ = stack
    answers = asyncio.run(twenty(url))
    statuses = sorted(a.status_code for a in answers)
    assert 1 <= statuses.count(200) <= 2 and statuses.count(429) == 20 - statuses.count(200), statuses
    refusal = next(a for a in answers if a.status_code == 429).json()["error"]
    # Nothing is spent while the admitted ones run: the others are refused for what those hold, a rate limit's 429
    # that SDKs retry (after Retry-After), not OpenAI's out-of-quota refusal, which they never retry and which is
    # for a budget spent (test_budget_refusals_final.py); its type is OpenAI's `tokens` (policies/limits.py's _held).
    assert refusal["type"] == "tokens" and "$0.006 per total" in refusal["message"] and "hold" in refusal["message"]


def test_hanging_up_mid_stream_spends_the_budget(stack):
    url, _, tmp = stack
    with httpx.stream("POST", url + "/v1/chat/completions", json=chat(SLOW, stream=True), headers=auth("hangup"),
                      timeout=30) as stream:
        assert stream.status_code == 200
        lines = stream.iter_lines()
        seen = [next(lines) for _ in range(6)]      # a few deltas, then hang up
    assert any(line.startswith("data: ") for line in seen)
    [cut] = ledger(tmp, "hangup", 1)
    assert cut["status"] == 499 and cut["output"] >= 2 and cut["uncached_input"] > 500
    assert Decimal(cut["cost_usd"]) > Decimal("0.00001")
    assert any(line.startswith("usage estimated") for line in cut["explanation"])
    # What was sent and streamed before the hang-up is over the budget: the next request is refused.
    again = httpx.post(url + "/v1/chat/completions", json=chat(QUICK), headers=auth("hangup"), timeout=30)
    assert again.status_code == 429, again.text


def test_hanging_up_before_a_whole_answer_spends_the_estimate(stack):
    url, _, tmp = stack
    with pytest.raises(httpx.ReadTimeout):      # the mock answers gpt-5.4-mini after 1.5 s; the caller leaves first
        httpx.post(url + "/v1/chat/completions", json=chat(SLOW), headers=auth("hangup-whole"),
                   timeout=httpx.Timeout(10, read=0.3))
    [cut] = ledger(tmp, "hangup-whole", 1)
    assert cut["status"] == 499 and cut["output"] == 200 and Decimal(cut["cost_usd"]) > Decimal("0.00001")
    assert any(line.startswith("usage estimated: the caller hung up") for line in cut["explanation"])
    again = httpx.post(url + "/v1/chat/completions", json=chat(QUICK), headers=auth("hangup-whole"), timeout=30)
    assert again.status_code == 429, again.text


def test_a_completed_stream_spends_the_budget(stack):
    url, _, _ = stack
    body = chat(QUICK, stream=True, stream_options={"include_usage": True})
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, headers=auth("stream"), timeout=30) as stream:
        assert stream.status_code == 200 and "data: [DONE]" in list(stream.iter_lines())
    again = httpx.post(url + "/v1/chat/completions", json=chat(QUICK), headers=auth("stream"), timeout=30)
    assert again.status_code == 429, again.text


def test_legacy_completions_and_embeddings_are_admitted_like_chat(stack):
    url, _, _ = stack
    first = httpx.post(url + "/v1/completions", json={"model": "gpt-3.5-turbo-instruct", "prompt": PROMPT,
                                                      "max_tokens": 20}, headers=auth("legacy"), timeout=30)
    assert first.status_code == 200, first.text
    for path, body in (("/v1/completions", {"model": "gpt-3.5-turbo-instruct", "prompt": "Hi", "max_tokens": 5}),
                       ("/v1/embeddings", {"model": "text-embedding-3-small", "input": "Hi"}),
                       ("/v1/chat/completions", chat(QUICK))):
        refused = httpx.post(url + path, json=body, headers=auth("legacy"), timeout=30)
        assert refused.status_code == 429 and refused.json()["error"]["type"] == "insufficient_quota", (path, refused.text)


def test_spend_survives_a_restart_without_redis(stack):
    url, mock, tmp = stack
    for name in ("restart-total", "restart-day"):       # period-aware: a total budget and a daily one
        answer = httpx.post(url + "/v1/chat/completions", json=chat(QUICK), headers=auth(name), timeout=30)
        assert answer.status_code == 200, answer.text
        ledger(tmp, name, 1)
    # A second gateway process on the same ledger: its counters start from what the ledger says was spent.
    with gateway(tmp, mock) as restarted:
        for name in ("restart-total", "restart-day"):
            again = httpx.post(restarted + "/v1/chat/completions", json=chat(QUICK), headers=auth(name), timeout=30)
            assert again.status_code == 429, (name, again.text)


def test_an_unpriced_model_is_refused_to_a_budgeted_key(stack):
    # gpt-5.4-2099 has no row in the price table and its route declares no price: a budget cannot bind on it.
    url, _, _ = stack
    answer = httpx.post(url + "/v1/chat/completions", json=chat("gpt-5.4-2099"), headers=auth("crowd"), timeout=30)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == "model" and "'gpt-5.4-2099' has no known price" in error["message"]
    assert "price: {input, output}" in error["message"]
