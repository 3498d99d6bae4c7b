"""`prefixgate lint` from the command line: exit codes, formats, config, suppression, directories."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from prefixgate.cli import main
from tests.cache_planner.lint.support_lint import FIXTURES


def run(*args: str):
    return CliRunner().invoke(main, ["lint", "--no-cost", *args])


def test_exit_codes_clean_findings_and_fail_on():
    assert run(str(FIXTURES / "pg003/pass.json")).exit_code == 0
    assert run(str(FIXTURES / "pg001/fail.prompt.md")).exit_code == 1
    # Only warnings: failing on errors only passes; failing on info fails.
    assert run("--fail-on", "error", str(FIXTURES / "pg001/fail.prompt.md")).exit_code == 0
    assert run("--fail-on", "error", str(FIXTURES / "pg004/fail.json")).exit_code == 1
    assert run("--fail-on", "never", str(FIXTURES / "pg004/fail.json")).exit_code == 0
    assert run("--fail-on", "warning", str(FIXTURES / "pg011/fail.json"), "--enable", "PG011").exit_code == 0
    assert run("--fail-on", "info", str(FIXTURES / "pg011/fail.json"), "--enable", "PG011").exit_code == 1


def test_usage_errors_exit_2_with_a_message_and_no_traceback(tmp_path):
    (tmp_path / "broken.json").write_text('{"model": "x",\n  "messages": [}\n')
    (tmp_path / "notes.json").write_text('{"name": "not a request"}')
    (tmp_path / "binary.md").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "data.csv").write_text("a,b\n")
    (tmp_path / "unclosed.j2").write_text("You are a helpful agent.\nHello {{ name\n")
    (tmp_path / "open_if.jinja").write_text("You are a helpful agent.\n{% if expert %}\nBe terse.\n")
    cases = {
        str(tmp_path / "missing.json"): "no such file or directory",
        str(tmp_path / "broken.json"): "broken.json:2:16: not valid JSON",
        str(tmp_path / "notes.json"): "not a request body",
        str(tmp_path / "binary.md"): "not UTF-8 text",
        str(tmp_path / "data.csv"): "cannot lint .csv files",
        # Jinja's own parser: the engine would refuse these, so their prompts never render.
        str(tmp_path / "unclosed.j2"): "unclosed.j2:2: not valid Jinja",
        str(tmp_path / "open_if.jinja"): "open_if.jinja:2: not valid Jinja: Unexpected end of template",
    }
    for path, message in cases.items():
        result = run(path)
        assert result.exit_code == 2, (path, result.output)
        assert message in result.output and "Traceback" not in result.output, result.output
    for bad in (["--format", "xml"], ["--enable", "PG999"], ["--fail-on", "sometimes"], ["--model", "claude-nope"],
                ["--pyproject", str(tmp_path / "nope.toml")], ["--bogus"]):
        result = run(*bad, str(FIXTURES / "pg003/pass.json"))
        assert result.exit_code == 2 and "Traceback" not in result.output, (bad, result.output)


def test_directories_walk_with_include_and_exclude(tmp_path):
    (tmp_path / "prompts").mkdir()
    shutil.copy(FIXTURES / "pg001/fail.prompt.md", tmp_path / "prompts/agent.md")
    (tmp_path / "README.md").write_text("Released on {{ build_timestamp }}.\n" + "Static documentation. " * 500)
    (tmp_path / "node_modules").mkdir()
    shutil.copy(FIXTURES / "pg004/fail.json", tmp_path / "node_modules/dep.json")
    (tmp_path / "package.json").write_text('{"name": "x"}')
    (tmp_path / "other.json").write_text('{"name": "not a request"}')  # found by the walk: skipped, not an error
    shutil.copy(FIXTURES / "pg006/fail.json", tmp_path / "req.json")
    doc = json.loads(run("--format", "json", str(tmp_path)).output)
    assert {Path(f["path"]).name for f in doc["findings"]} == {"agent.md", "req.json"}
    doc = json.loads(run("--format", "json", "--exclude", "prompts/**", str(tmp_path)).output)
    assert {Path(f["path"]).name for f in doc["findings"]} == {"req.json"}
    doc = json.loads(run("--format", "json", "--include", "**/*.md", str(tmp_path)).output)
    assert {Path(f["path"]).name for f in doc["findings"]} == {"agent.md", "README.md"}


def test_naming_the_prompts_folder_lints_what_a_walk_from_above_lints(tmp_path, monkeypatch):
    # The README's `prefixgate lint prompts/ ...`: the templates there are filed as prompts by the folder's name,
    # which the walk's relative paths (`agent.md`) left out, so it linted 0 files and reported no problems.
    (tmp_path / "prompts").mkdir()
    shutil.copy(FIXTURES / "pg001/fail.prompt.md", tmp_path / "prompts/agent.md")
    (tmp_path / "prompts/README.md").write_text("Released on {{ build_timestamp }}.\n" + "Static documentation. " * 500)
    monkeypatch.chdir(tmp_path)
    for named in ("prompts/", str(tmp_path / "prompts")):
        doc = json.loads(run("--format", "json", named).output)
        assert doc["files"] == 1 and {Path(f["path"]).name for f in doc["findings"]} == {"agent.md"}, named
    monkeypatch.chdir(tmp_path / "prompts")
    assert run(".").exit_code == 1


def test_pyproject_config_and_per_file_ignores(tmp_path, monkeypatch):
    shutil.copy(FIXTURES / "pg001/fail.json", tmp_path / "req.json")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "app"\n\n[tool.prefixgate.lint]\ndisable = ["PG012"]\nseverity = { PG001 = "error" }\n'
        'fail_on = "error"\n')
    monkeypatch.chdir(tmp_path)
    doc = json.loads(run("--format", "json", "req.json").output)
    assert [(f["rule"], f["severity"]) for f in doc["findings"]] == [("PG001", "error")]
    assert run("req.json").exit_code == 1
    (tmp_path / "pyproject.toml").write_text('[tool.prefixgate.lint]\nper_file_ignores = { "req*.json" = ["all"] }\n')
    assert run("req.json").exit_code == 0
    (tmp_path / "pyproject.toml").write_text('[tool.prefixgate.lint]\ndisabled = ["PG001"]\n')
    result = run("req.json")
    assert result.exit_code == 2 and "unknown key 'disabled'" in result.output
    (tmp_path / "pyproject.toml").write_text('[tool.prefixgate.lint]\nseverity = { PG001 = "fatal" }\n')
    assert run("req.json").exit_code == 2


def test_inline_suppression_in_templates(tmp_path):
    text = (FIXTURES / "pg001/fail.prompt.md").read_text()
    line = "Today is {{ today }} and you are talking to {customer_name}.\n"
    (tmp_path / "a.prompt.md").write_text(text.replace(line, "<!-- prefixgate: disable=PG001 -->\n" + line))
    (tmp_path / "b.prompt.md").write_text(text.replace(line, line.rstrip() + " {# prefixgate: disable=PG002 #}\n"))
    (tmp_path / "c.j2").write_text("{# prefixgate: disable-file=all #}\n" + (FIXTURES / "pg001/fail.j2").read_text())
    assert run(str(tmp_path / "a.prompt.md")).exit_code == 0
    assert run(str(tmp_path / "b.prompt.md")).exit_code == 1  # another rule's suppression does not count
    assert run(str(tmp_path / "c.j2")).exit_code == 0


def test_output_file_and_colour(tmp_path):
    out = tmp_path / "lint.sarif"
    result = run("--format", "sarif", "-o", str(out), str(FIXTURES / "pg004/fail.json"))
    assert result.exit_code == 1 and result.output == ""
    assert json.loads(out.read_text())["version"] == "2.1.0"
    assert "\x1b[" not in run(str(FIXTURES / "pg004/fail.json")).output  # not a terminal
    assert "\x1b[" in run("--color", "always", str(FIXTURES / "pg004/fail.json")).output


def test_force_exclude_filters_named_files_like_pre_commit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("README.md").write_text("Released on {{ build_timestamp }}.\n" + "Static documentation. " * 500)
    Path("package.json").write_text('{"name": "x"}')
    Path("settings.json").write_text('{"debug": true}')
    assert run("--force-exclude", "README.md", "package.json", "settings.json").exit_code == 0
    assert run("README.md").exit_code == 1  # named without the flag: linted as a template


def test_real_subprocess_exit_codes():
    exe = Path(sys.executable).with_name("prefixgate")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "prefixgate.cli"]
    found = subprocess.run([*cmd, "lint", "--no-cost", str(FIXTURES / "pg004/fail.json")],
                           capture_output=True, text=True, timeout=120)
    assert found.returncode == 1 and "PG004 error" in found.stdout and "\x1b[" not in found.stdout
    usage = subprocess.run([*cmd, "lint", str(FIXTURES / "nope.json")], capture_output=True, text=True, timeout=120)
    assert usage.returncode == 2 and "no such file" in usage.stderr and "Traceback" not in usage.stderr
