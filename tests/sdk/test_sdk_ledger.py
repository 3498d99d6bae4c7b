"""The SDK's ledger: the gateway's record fields, exact totals, a replayable trace, export into the
gateway's own ledger (SQLite and Redis), and correct counts under concurrent use."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import anthropic
import pytest
import redis
from click.testing import CliRunner

import prefixgate
from prefixgate.cli import main
from prefixgate.ledger import LedgerRecord as GatewayRecord
from prefixgate.ledger import read_records
from prefixgate.sdk import Ledger, LedgerRecord, exchange
from tests.sdk.support_sdk import ANTHROPIC_MODEL, dated_system, fresh_key


def wrapped_anthropic(url: str, ledger: Ledger, **kw) -> anthropic.Anthropic:
    return prefixgate.wrap(anthropic.Anthropic(api_key=fresh_key(), base_url=url, max_retries=0), ledger=ledger, **kw)


def ask(client: anthropic.Anthropic, day: int) -> anthropic.types.Message:
    return client.messages.create(model=ANTHROPIC_MODEL, max_tokens=16, system=dated_system(day),
                                  messages=[{"role": "user", "content": "Where is my parcel?"}])


def test_sdk_records_are_the_gateway_ledgers_records():
    assert LedgerRecord is GatewayRecord


def test_totals_outlive_the_record_window_and_split_by_route(mock_url):
    ledger = Ledger(max_records=2)
    support, billing = wrapped_anthropic(mock_url, ledger, route="support"), wrapped_anthropic(mock_url, ledger, route="billing")
    replies = [ask(support, 1), ask(support, 2), ask(billing, 3)]
    assert len(ledger.records) == 2
    summary = ledger.summary()
    assert summary["requests"] == 3 and set(summary["routes"]) == {"support", "billing"}
    assert summary["routes"]["support"]["requests"] == 2
    assert summary["cache_read_tokens"] == sum(r.usage.cache_read_input_tokens for r in replies) > 1000
    assert summary["output_tokens"] == sum(r.usage.output_tokens for r in replies)
    assert 0 < summary["hit_rate"] < 1
    assert summary["savings_usd"] == summary["cost_without_cache_usd"] - summary["cost_usd"] > 0
    ledger.clear()
    assert ledger.summary()["requests"] == 0 and ledger.records == []


def test_trace_is_what_the_application_sent_and_replays(mock_url, tmp_path, monkeypatch):
    # A minute between calls, as in real traffic (replay's Anthropic cache makes entries readable after a
    # moment, so back-to-back calls would all miss).
    clock = iter(range(1_800_000_000, 1_900_000_000, 60))
    monkeypatch.setattr(exchange, "time", SimpleNamespace(time=lambda: float(next(clock)), perf_counter=time.perf_counter))
    ledger = Ledger()
    client = wrapped_anthropic(mock_url, ledger, tenant="acme")
    for day in (1, 2, 3):
        ask(client, day)
    path = tmp_path / "sdk.jsonl"
    assert ledger.to_trace(path) == 3
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    # The caller's own bodies, date still in the system prompt: a replay can compare strategies on them.
    assert [line["body"]["system"] for line in lines] == [dated_system(d) for d in (1, 2, 3)]
    assert {line["tenant"] for line in lines} == {"acme"} and all(line["provider"] == "anthropic" for line in lines)
    reports = {}
    for strategy in ("passthrough", "planner"):
        result = CliRunner().invoke(main, ["replay", str(path), "--strategy", strategy, "--json"])
        assert result.exit_code == 0, result.output
        reports[strategy] = json.loads(result.output[result.output.index("{"):])["total"]
    assert reports["passthrough"]["requests"] == reports["planner"]["requests"] == 3
    assert reports["passthrough"]["cache_read_tokens"] == 0 < reports["planner"]["cache_read_tokens"]


def test_export_writes_each_record_once_to_the_gateway_ledger(mock_url, tmp_path, redis_url):
    ledger = Ledger()
    client = wrapped_anthropic(mock_url, ledger)
    ask(client, 1)
    ask(client, 2)
    db = str(tmp_path / "ledger.sqlite")
    # The session's Redis is shared with other suites: compare against what was there before.
    shared = redis.Redis.from_url(redis_url)
    before = {k: int(v) for k, v in shared.hgetall("prefixgate:totals").items() if v.isdigit()}
    assert ledger.export(db, redis_url=redis_url) == 2
    ask(client, 3)
    assert ledger.export(db, redis_url=redis_url) == 1
    rows = read_records(db)
    assert [r["id"] for r in rows] == [r.id for r in ledger.records]
    assert rows[1]["cache_read"] > 1000 and rows[1]["target"].startswith("sdk:") and rows[1]["key"] == "sdk"
    totals = shared.hgetall("prefixgate:totals")
    assert int(totals[b"requests"]) - before.get(b"requests", 0) == 3
    assert int(totals[b"cache_read_tokens"]) - before.get(b"cache_read_tokens", 0) == sum(r.cache_read for r in ledger.records)


def test_concurrent_threads_record_every_call_once(mock_url):
    ledger = Ledger()
    client = wrapped_anthropic(mock_url, ledger, route="shared")
    ask(client, 1)
    failures: list[BaseException] = []

    def worker(day: int) -> None:
        try:
            for _ in range(3):
                ask(client, day)
        except BaseException as e:  # surfaced below
            failures.append(e)

    threads = [threading.Thread(target=worker, args=(d,)) for d in range(2, 8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert failures == []
    records = ledger.records
    assert len(records) == 19 and len({r.id for r in records}) == 19
    assert ledger.summary()["requests"] == 19
    # Every thread's prompt shares the static prefix the planner learned.
    assert sum(1 for r in records if r.cache_read > 1000) >= 15


def test_ledger_rejects_bad_settings():
    with pytest.raises(ValueError, match="max_records"):
        Ledger(max_records=0)
