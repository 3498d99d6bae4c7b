"""PG001 on real prompt code: the labelled corpus (Python, Jinja and Markdown prompts of agents, RAG,
support bots and tool definitions, each marking the warnings it must produce), the two cache-busters
of issue 18, and evidence from traces."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from click.testing import CliRunner

from prefixgate.cache_planner.lint.config import LintConfig
from prefixgate.cache_planner.lint.output import to_sarif
from prefixgate.cache_planner.lint.python_source import python_templates
from prefixgate.cache_planner.lint.run import LintReport
from prefixgate.cache_planner.lint.stats import corpus_stats
from prefixgate.cli import main
from tests.cache_planner.lint import support_lint

CORPUS = Path(__file__).parent / "corpus"
# The corpus's prompts are short stand-ins for the prompts they model (real system prompts run to
# thousands of tokens). Judged as if the model cached any length, the corpus measures the evidence
# rules alone; the size rule (nothing below a model's minimum is reported) is measured on real
# repositories' prompts in test_lint_repositories.py.
CORPUS_CONFIG = LintConfig(min_cache_tokens=0)


def lint(*paths: str | Path, config: LintConfig | None = None) -> LintReport:
    return support_lint.lint(*paths, config=config or CORPUS_CONFIG)


def test_corpus_precision_and_recall_of_warnings() -> None:
    stats = corpus_stats([str(CORPUS)], CORPUS_CONFIG)
    print(stats.table())
    assert stats.files >= 40
    assert len(stats.true_positives) + len(stats.missed) >= 15
    assert stats.precision >= 0.95 and stats.recall >= 0.95, stats.table()


def test_stats_from_the_command_line() -> None:
    result = CliRunner().invoke(main, ["lint", "--stats", str(CORPUS)])
    assert result.exit_code == 0, result.output
    assert "| true positives | false positives | missed | precision | recall |" in result.output


def test_tool_description_with_the_clock_says_tools_come_first() -> None:
    (finding,) = lint(CORPUS / "py/01_tool_description_clock.py").findings
    assert finding.severity == "warning" and finding.location.line == 13
    assert "datetime.now()" in finding.message and "tool definition, first in the provider's prefix" in finding.message
    assert "every request re-bills the whole prefix" in finding.message


def test_user_id_and_time_ahead_of_rules_names_the_place_and_the_cost() -> None:
    (finding,) = lint(CORPUS / "py/02_user_id_and_time_first.py").findings
    assert finding.severity == "warning" and "'{user_id}'" in finding.message
    assert "in the system prompt" in finding.message and "per 1,000 requests" in finding.message
    # The time on the next line is the same cause: a related location, not a second finding.
    assert [loc.line for loc in finding.related] == [18]
    sarif = to_sarif(lint(CORPUS / "py/02_user_id_and_time_first.py"))
    (result,) = sarif["runs"][0]["results"]
    assert result["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 18


def test_a_repeated_literal_is_static_text_after_the_value() -> None:
    # `"Refunds follow the policy below. " * 40` is ~240 tokens the clock re-bills; read as an unknown value, the
    # finding counted only the 28 tokens before it (and with nothing static after it, found nothing at all).
    (finding,) = lint(CORPUS / "py/27_repeated_rules_after_the_clock.py").findings
    billed = int(re.search(r"comes before ([\d,]+) tokens", finding.message).group(1).replace(",", ""))
    assert finding.severity == "warning" and billed > 40 * 6, finding.message


def test_session_constants_are_info_and_declarations_change_that(tmp_path: Path) -> None:
    (finding,) = lint(CORPUS / "jinja/25_coding_agent_fences.j2").findings
    assert finding.severity == "info" and "session" in finding.message
    declared = lint(CORPUS / "jinja/25_coding_agent_fences.j2", config=replace(CORPUS_CONFIG, volatile=frozenset({"repo_name"})))
    assert [f.severity for f in declared.findings] == ["warning"]
    quiet = lint(CORPUS / "jinja/39_current_time_first.j2", config=replace(CORPUS_CONFIG, session_constants=frozenset({"current_time"})))
    assert [f.severity for f in quiet.findings] == ["info"]
    (tmp_path / "pyproject.toml").write_text('[tool.prefixgate.lint]\nvolatile = ["repo_name"]\nmin_cache_tokens = 0\n')
    result = CliRunner().invoke(main, ["lint", "--pyproject", str(tmp_path / "pyproject.toml"),
                                       str(CORPUS / "jinja/25_coding_agent_fences.j2")])
    assert result.exit_code == 1 and "declared volatile" in result.output


def test_included_fragments_are_judged_where_they_end_up() -> None:
    report = lint(CORPUS / "jinja")
    paths = {Path(f.location.path).name for f in report.findings}
    assert not any(name in paths for name in ("user_header.j2", "tool_rules.j2", "reminders.j2", "base_agent.j2"))
    (included,) = [f for f in report.findings if f.location.path.endswith("28_include_user_header.j2")]
    assert included.location.line == 3 and "user_name" in included.message


def _request(system: str) -> dict:
    return {"model": "claude-sonnet-4-6", "max_tokens": 256, "system": system,
            "messages": [{"role": "user", "content": "hello"}]}


RULES = ("You are a coding agent. When you fix a bug, add a regression test that reproduces it, e.g. the test "
         "that handles the case from issue #123. Keep changes small, follow the project's style, and run the "
         "whole test suite before you finish. Never commit secrets or generated files. ") * 2


def test_a_pattern_in_static_text_seen_once_is_not_evidence(tmp_path: Path) -> None:
    (tmp_path / "req.json").write_text(json.dumps(_request(RULES)))
    assert [f.severity for f in lint(tmp_path / "req.json").findings if f.rule == "PG001"] in ([], ["info"])


def test_a_value_that_differs_between_trace_records_is_evidence(tmp_path: Path) -> None:
    same = [{"t": i, "provider": "anthropic", "model": "claude-sonnet-4-6", "body": _request(RULES)} for i in range(3)]
    (tmp_path / "same.jsonl").write_text("".join(json.dumps(r) + "\n" for r in same))
    assert not [f for f in lint(tmp_path / "same.jsonl").findings if f.rule == "PG001" and f.severity == "warning"]
    varied = [{"t": i, "provider": "anthropic", "model": "claude-sonnet-4-6",
               "body": _request(f"Open ticket #{4000 + i}.\n" + RULES)} for i in range(3)]
    (tmp_path / "varied.jsonl").write_text("".join(json.dumps(r) + "\n" for r in varied))
    (finding,) = [f for f in lint(tmp_path / "varied.jsonl").findings if f.rule == "PG001"]
    assert finding.severity == "warning" and "differs between requests" in finding.message


def test_fix_suggests_diffs_only_for_prompts_written_in_one_piece(tmp_path: Path) -> None:
    for name in ("py/02_user_id_and_time_first.py", "jinja/39_current_time_first.j2", "jinja/28_include_user_header.j2"):
        (tmp_path / Path(name).name).write_text((CORPUS / name).read_text())
    (tmp_path / "partials").mkdir()
    (tmp_path / "partials/user_header.j2").write_text((CORPUS / "jinja/partials/user_header.j2").read_text())
    (tmp_path / "pyproject.toml").write_text("[tool.prefixgate.lint]\nmin_cache_tokens = 0\n")  # as CORPUS_CONFIG
    result = CliRunner().invoke(main, ["lint", "--fix", "--no-cost", "--pyproject", str(tmp_path / "pyproject.toml"),
                                       str(tmp_path)])
    suggested = [line for line in result.output.splitlines() if line.startswith("suggested")]
    # The Python prompt inlines a module constant and the Jinja one an include: a diff of the
    # assembled text would not apply to either file.
    assert len(suggested) == 1 and "39_current_time_first.j2" in suggested[0]


def test_a_clock_time_in_a_fixed_tool_description_is_not_evidence(tmp_path: Path) -> None:
    # As in a real coding agent's schedule tool: "0 9 * * *" means every day at 9am.
    tool = {"name": "schedule", "description": "Schedule a prompt with 5-field cron in the user's timezone: "
            "\"0 9 * * *\" means every day at 9am. " + "Use it for reminders and recurring checks. " * 10,
            "input_schema": {"type": "object", "properties": {"cron": {"type": "string"}}}}
    body = {**_request(RULES), "tools": [tool]}
    body["system"] = [{"type": "text", "text": RULES, "cache_control": {"type": "ephemeral"}}]
    (tmp_path / "req.json").write_text(json.dumps(body, indent=1))
    findings = lint(tmp_path / "req.json").findings
    assert not [f for f in findings if f.rule in ("PG001", "PG005") and f.severity == "warning"], findings


def test_every_python_file_of_this_repository_reads_without_error() -> None:
    root = Path(__file__).resolve().parents[3]
    files = [p for p in root.rglob("*.py") if not any(part.startswith(".") for part in p.relative_to(root).parts)]
    assert len(files) > 100
    config = LintConfig()
    for path in files:
        try:
            python_templates(path.read_text(encoding="utf-8"), config.python_names, config)
        except SyntaxError:
            continue  # corpus files may be deliberately odd; a syntax error is reported, not raised, by lint
