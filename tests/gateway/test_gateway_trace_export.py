"""`prefixgate ledger export --trace`: requests through the gateway come back out as a replay trace
that `prefixgate replay` prices, with and without the planner."""

from __future__ import annotations

import json
import time

import anthropic
import httpx
from click.testing import CliRunner

from prefixgate.cli import main
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import ServerThread, running_gateway, settings_for
from tests.support_services import wait_until

SYSTEM = "Current time: 2026-11-22T10:{:02d}:00Z\nYou answer ACME billing questions. " + "Billing rule: refunds within 30 days. " * 400


def test_ledger_exports_a_replayable_trace(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-export-0123456789")
    with ServerThread(mock_app(MockContext())) as upstream:
        settings = settings_for(upstream.url, tmp_path, ledger_bodies=True)
        with running_gateway(settings) as gw:
            client = anthropic.Anthropic(api_key="caller", base_url=gw.url, max_retries=0)
            for i in range(4):
                # Anthropic entries are readable once the writing response has started (the replay models
                # it at 0.5 s): back-to-back requests would all be cold, in the trace as on the real API.
                time.sleep(0.6 if i else 0)
                client.messages.create(model="claude-sonnet-4-6", max_tokens=20, system=SYSTEM.format(i),
                                       messages=[{"role": "user", "content": f"Invoice {i}?"}],
                                       extra_headers={"x-prefixgate-route": "billing"})
    out = tmp_path / "trace.jsonl"
    result = CliRunner().invoke(main, ["ledger", "export", "--trace", str(out), "--ledger", settings.ledger_path])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 4 and {line["provider"] for line in lines} == {"anthropic"}
    # The trace holds what the application sent, not the planned request.
    assert lines[0]["body"]["system"] == SYSTEM.format(0)
    passthrough = json.loads(CliRunner().invoke(main, ["replay", str(out), "--json"]).output)
    planned = json.loads(CliRunner().invoke(main, ["replay", str(out), "--strategy", "planner", "--json"]).output)
    assert passthrough["total"]["requests"] == planned["total"]["requests"] == 4
    assert passthrough["total"]["cache_read_tokens"] == 0 < planned["total"]["cache_read_tokens"]


def test_export_skips_records_without_bodies(tmp_path):
    from prefixgate.ledger import Ledger, LedgerRecord

    path = str(tmp_path / "l.sqlite")
    ledger = Ledger(path)
    ledger.append(LedgerRecord(id="a", ts=time.time(), provider="anthropic", model="claude-sonnet-4-6"))
    # A keep-alive refresh is the gateway's own request, not the application's: not exported, not "skipped".
    ledger.append(LedgerRecord(id="k", ts=time.time(), provider="anthropic", model="claude-sonnet-5-5", kind="keepalive"))
    ledger.close()
    result = CliRunner().invoke(main, ["ledger", "export", "--trace", str(tmp_path / "t.jsonl"), "--ledger", path])
    assert result.exit_code == 0 and "skipped 1" in result.output


def test_responses_traffic_exports_and_replays(tmp_path, monkeypatch):
    import openai

    monkeypatch.setenv("OPENAI_API_KEY", "sk-export-0123456789")
    with ServerThread(mock_app(MockContext())) as upstream:
        settings = settings_for(upstream.url, tmp_path, ledger_bodies=True)
        with running_gateway(settings) as gw:
            client = openai.OpenAI(api_key="caller", base_url=gw.url + "/v1", max_retries=0)
            for i in range(3):
                client.responses.create(model="gpt-5.4", instructions=SYSTEM.format(i), input=f"Invoice {i}?")
    out = tmp_path / "trace.jsonl"
    result = CliRunner().invoke(main, ["ledger", "export", "--trace", str(out), "--ledger", settings.ledger_path])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 3 and lines[0]["provider"] == "openai" and lines[0]["body"]["instructions"] == SYSTEM.format(0)
    passthrough = json.loads(CliRunner().invoke(main, ["replay", str(out), "--json"]).output)
    planned = json.loads(CliRunner().invoke(main, ["replay", str(out), "--strategy", "planner", "--json"]).output)
    assert passthrough["total"]["cache_read_tokens"] == 0 < planned["total"]["cache_read_tokens"]


def test_a_kept_body_keeps_its_answer_so_the_exported_trace_plans_upgrades(tmp_path, monkeypatch):
    """With bodies kept, a Claude chat's answers are kept too (their text blocks, as the caller sends them back):
    `plan --keepalive` on the exported trace can then upgrade a session through its answer when its user walks
    away, as the live gateway does; without them it could only re-read."""
    from prefixgate.cache_planner.trace import plan_trace
    from prefixgate.providers.trace import parse_record

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-export-0123456789")
    history, answers = [], []
    with ServerThread(mock_app(MockContext())) as upstream:
        settings = settings_for(upstream.url, tmp_path, ledger_bodies=True)
        with running_gateway(settings) as gw:
            client = anthropic.Anthropic(api_key="caller", base_url=gw.url, max_retries=0)
            # The session's prefix is its conversation (the billing rules come in its first turn): what an
            # upgrade keeps.
            for question in (SYSTEM.format(0) + "\nInvoice 1?", "And invoice 2?", "And invoice 3?"):
                history.append({"role": "user", "content": question})
                with client.messages.stream(model="claude-sonnet-5-5", max_tokens=20, system="You answer billing questions.",
                                            messages=history, extra_headers={"x-prefixgate-route": "billing"}) as s:
                    answers.append(s.get_final_message().content[0].text)
                history.append({"role": "assistant", "content": answers[-1]})
            # The dashboard's API never shows what the ledger keeps of prompts and answers.
            def shown() -> dict:
                return httpx.get(gw.url + "/api/requests", params={"range": "15m"}).json()

            wait_until(lambda: len(shown()["records"]) == 3, 10, "the three records in the ledger")
            assert not any({"body", "response"} & set(r) for r in shown()["records"])
            assert answers[0] not in json.dumps(shown())
    out = tmp_path / "trace.jsonl"
    assert CliRunner().invoke(main, ["ledger", "export", "--trace", str(out), "--ledger", settings.ledger_path]).exit_code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["response"]["content"] for line in lines] == [[{"type": "text", "text": a}] for a in answers]
    # The same session as a person paces it: a reply after a minute, then a 25-minute break.
    for line, t in zip(lines, (0.0, 60.0, 1560.0), strict=True):
        line["t"] = t

    def upgrades(trace: list[dict]) -> list[str]:
        planned = plan_trace([parse_record(json.dumps(line)) for line in trace], keepalive=True)
        return [p["plan"][0] for p in planned if p.get("keepalive") and "upgrade" in p["plan"][0]]

    assert len(upgrades(lines)) == 1
    assert upgrades([{k: v for k, v in line.items() if k != "response"} for line in lines]) == []
