"""Fault specs and standing fault rules."""

from __future__ import annotations

import pytest

from prefixgate.simulation.mock.faults import Fault, FaultError, FaultPlan, parse_fault


def test_parse_fault_specs():
    assert parse_fault("latency=0.5") == Fault(latency_s=0.5)
    assert parse_fault("status=429;retry_after=2") == Fault(status=429, retry_after=2.0)
    assert parse_fault("status=529, latency=0.1") == Fault(latency_s=0.1, status=529)
    assert parse_fault("drop_stream_after=3") == Fault(drop_stream_after=3)
    err = parse_fault("status=529").error()
    assert err.status == 529 and err.kind == "overloaded"
    assert parse_fault("status=429;retry_after=2").error().retry_after == 2.0


@pytest.mark.parametrize(("spec", "message"), [
    ("status=200", "400-599"), ("latency=-1", ">= 0"), ("colour=red", "unknown key 'colour'"),
    ("status", "expected key=value"), ("latency=soon", "must be a number"), ("", "empty"),
])
def test_bad_fault_specs_say_what_is_wrong(spec, message):
    with pytest.raises(FaultError, match=message):
        parse_fault(spec)


def test_standing_rules_match_count_and_stop():
    plan = FaultPlan.from_config({"faults": [
        {"fault": "status=500", "provider": "openai", "every": 2, "times": 2},
        {"fault": "latency=0.2", "path": "/v1beta"},
    ]})
    fired = [plan.for_request("openai", "/v1/chat/completions", "gpt-5.4", None) for _ in range(6)]
    assert [f.status if f else None for f in fired] == [None, 500, None, 500, None, None]
    assert plan.for_request("gemini", "/v1beta/models/x:generateContent", "x", None) == Fault(latency_s=0.2)
    assert plan.for_request("anthropic", "/v1/messages", "m", None) is None
    # A request's own header wins over the standing rules.
    assert plan.for_request("openai", "/v1/chat/completions", "gpt-5.4", "status=429") == Fault(status=429)


def test_faults_file_errors_name_the_rule(tmp_path):
    path = tmp_path / "faults.yaml"
    path.write_text("faults:\n  - fault: 'status=429'\n    every: 0\n")
    with pytest.raises(FaultError, match=r"faults\[0\].every"):
        FaultPlan.from_file(path)
    path.write_text("faults:\n  - fault: 'status=99'\n")
    with pytest.raises(FaultError, match="400-599"):
        FaultPlan.from_file(path)
    toml = tmp_path / "faults.toml"
    toml.write_text('[[faults]]\nfault = "status=503"\nprovider = "gemini"\n')
    assert FaultPlan.from_file(toml).rules[0].fault == Fault(status=503)


def test_a_faults_file_that_is_not_utf8_is_an_error_naming_it(tmp_path):
    path = tmp_path / "faults.yaml"
    path.write_bytes("faults:\n  - fault: 'status=503'  # r\xe9essai\n".encode("latin-1"))
    with pytest.raises(FaultError, match=r"faults.yaml is not UTF-8 text: byte 0xe9 at offset 36"):
        FaultPlan.from_file(path)


def test_a_faults_file_that_is_not_yaml_is_one_line_naming_where(tmp_path):
    """As the gateway's own files (prefixgate/yaml_file.py): PyYAML's own message ran over several lines."""
    path = tmp_path / "faults.yaml"
    path.write_text("faults:\n  - fault: 'status=503\n    every: 2\n")
    with pytest.raises(FaultError) as caught:
        FaultPlan.from_file(path)
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"faults file {path} is not valid YAML: line 4, column 1: ")
