"""Reading inputs: JSON positions, provider detection, traces and raw logs, Python templates, globs."""

from __future__ import annotations

import json
import re

from prefixgate.cache_planner.lint.config import LintConfig
from prefixgate.cache_planner.lint.inputs import Request, detect_provider, matches, read_subjects
from prefixgate.cache_planner.lint.json_offsets import offset
from prefixgate.cache_planner.lint.python_source import python_templates
from prefixgate.cache_planner.lint.variables import template_spans
from tests.cache_planner.lint.support_lint import FIXTURES


def test_json_offsets_follow_paths_and_escapes():
    value = {"a": [1, {"b": "x\\ny\u00e9\U0001f600z"}], "c": "hello"}
    text = json.dumps(value, indent=1)
    decoded = value["a"][1]["b"]
    for i in range(len(decoded)):
        raw = text[offset(text, ("a", 1, "b"), i):]
        assert json.loads('"' + raw[:raw.index('"')] + '"').startswith(decoded[i:]) or decoded[i:] == ""
    assert text[offset(text, ("c",), 0)] == "h"
    assert text[offset(text, ("c",))] == '"'


def test_template_variable_styles():
    text = "A {{ user.name }} B {% if vip %}V{% endif %} C ${env} D {name!r:>10} E {{literal}} F {0}"
    kinds = [text[s.start:s.end] for s in template_spans(text)]
    assert kinds == ["{{ user.name }}", "{% if vip %}", "${env}", "{name!r:>10}", "{{literal}}", "{0}"]
    assert [text[s.start:s.end] for s in template_spans(text, "jinja")] == ["{{ user.name }}", "{% if vip %}", "{{literal}}"]
    # JSON examples in a prompt are not variables.
    assert template_spans('Reply as {"answer": "..."}', "any") == ()


def test_python_templates_by_name_and_kind():
    source = (
        'SYSTEM_PROMPT = """Be brief. Customer: {name}."""\n'
        'greeting = f"Hi {name}"\n'
        'user_template = "Order {order}".format(order=1)\n'
        'PLAIN_PROMPT = "no placeholders"\n'
        'class A:\n    instructions: str = f"Now {now()} and then"\n'
    )
    found = {t.name: t for t in python_templates(source, re.compile(LintConfig().python_names.pattern))}
    assert set(found) == {"SYSTEM_PROMPT", "user_template", "instructions"}
    inst = found["instructions"]
    assert inst.text == "Now {now()} and then" and inst.fields == ((4, 6, 30),)
    assert found["SYSTEM_PROMPT"].line == 1 and found["SYSTEM_PROMPT"].col == 19


def test_provider_detection():
    cfg = LintConfig()
    assert detect_provider({"contents": []}, cfg) == "gemini"
    assert detect_provider({"model": "claude-haiku-4-5", "messages": []}, cfg) == "anthropic"
    assert detect_provider({"model": "anthropic/claude-x", "messages": []}, cfg) == "anthropic"
    assert detect_provider({"model": "x", "system": "s", "messages": []}, cfg) == "anthropic"
    assert detect_provider({"model": "gpt-5.4", "messages": []}, cfg) == "openai"
    assert detect_provider({"model": "m", "messages": [{"role": "developer", "content": "d"}]}, cfg) == "openai"


def test_traces_and_raw_request_logs_are_read_per_line():
    trace = read_subjects(FIXTURES / "pg010/fail.jsonl", "t.jsonl", LintConfig(), named=True)
    assert len(trace) == 4 and all(isinstance(r, Request) and r.record.route == "chat" for r in trace)
    (raw,) = read_subjects(FIXTURES / "inputs/raw_log.jsonl", "raw.jsonl", LintConfig(), named=True)
    assert raw.provider == "openai" and raw.body_path == ("request",) and raw.model.id == "gpt-5.4"
    loc = raw.where(0, 0)
    assert loc.line == 1 and raw.source.text[loc.col - 1:].startswith("Now: 2026-11-20")


def test_globs():
    assert matches("**/*.json", "a.json") and matches("**/*.json", "x/y/a.json")
    assert matches("prompts/**", "prompts/a/b.md") and not matches("prompts/**", "src/prompts.md")
    assert matches("**/*prompt*/**/*.md", "app/prompts/agent.md") and not matches("*.md", "a/b.md")
