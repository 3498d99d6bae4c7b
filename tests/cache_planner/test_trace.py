"""`prefixgate plan TRACE.jsonl`: planned records out, learning across records, clear errors."""

import json

from click.testing import CliRunner

from prefixgate.cli import main
from tests.cache_planner.support_planning import POLICY


def record(i: int) -> dict:
    return {"t": i * 30, "provider": "anthropic", "model": "claude-sonnet-4-6", "route": "support", "tenant": "acme",
            "output_tokens": 50, "body": {"model": "claude-sonnet-4-6", "max_tokens": 100,
                                          "system": f"Request id: req_{i:06d}x\n" + POLICY,
                                          "messages": [{"role": "user", "content": f"question {i}"}]}}


def test_plan_command_writes_planned_records(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(json.dumps(record(i)) for i in range(3)) + "\n")
    result = CliRunner().invoke(main, ["plan", str(trace)])
    assert result.exit_code == 0, result.output
    out = [json.loads(line) for line in result.output.splitlines()]
    assert len(out) == 3
    assert all(o["route"] == "support" and o["t"] == i * 30 for i, o in enumerate(out))
    assert "req_000002x" not in json.dumps(out[2]["body"]["system"])
    assert any(line.startswith("rewrite: moved") for line in out[2]["plan"])
    assert out[2]["body"]["system"][-1]["cache_control"] == {"type": "ephemeral"}


def test_invalid_body_passes_through_with_a_note(tmp_path):
    bad = record(0)
    bad["body"] = {"model": "claude-sonnet-4-6", "messages": []}  # no max_tokens
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps(bad) + "\n")
    out = json.loads(CliRunner().invoke(main, ["plan", str(trace)]).output)
    assert out["body"] == bad["body"] and out["plan"][0].startswith("passthrough:")


def test_bad_trace_line_names_the_line(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps(record(0)) + "\n{oops\n")
    result = CliRunner().invoke(main, ["plan", str(trace)])
    assert result.exit_code == 1 and ":2:" in result.output and "Traceback" not in result.output
    trace.write_text(json.dumps({"t": 0, "provider": "azure", "model": "x", "body": {}}) + "\n")
    result = CliRunner().invoke(main, ["plan", str(trace)])
    assert result.exit_code == 1 and "must be one of" in result.output
