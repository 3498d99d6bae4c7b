"""Lint on code it was not tuned on: cases taken from public agent repositories (crewAI, SWE-agent,
MetaGPT, the OpenAI Agents SDK, smolagents; MIT or Apache-2.0, sources in repositories/SOURCES.md),
each labelled by hand. A finding must mean money (nothing below the model's minimum, nothing run once
per process), files a repository holds for other reasons are skipped with a note, never an error, and
`lint .` at a repository's root exits 0 unless the user's own prompts cost money."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from prefixgate.cli import main
from tests.cache_planner.lint.support_lint import lint

HERE = Path(__file__).parent / "repositories"


def _lint_root(root: Path) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["lint", "--format", "json", "--no-cost", str(root)])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.output)


def _warnings(report_or_doc) -> list:
    if isinstance(report_or_doc, dict):
        return [f for f in report_or_doc["findings"] if f["severity"] in ("warning", "error")]
    return [f for f in report_or_doc.findings if f.severity in ("warning", "error")]


def test_a_short_single_shot_prompt_is_not_money(tmp_path: Path) -> None:
    # crewAI lib/crewai/src/crewai/memory/recall_flow.py: the query first, then ~30 tokens of instructions,
    # sent as the only user message. Below every model's minimum: no order of it is ever cached.
    (tmp_path / "recall_flow.py").write_text('''
def enhance(self, chunk_text: str) -> str:
    prompt = (
        f"Query: {self.state.query}\\n\\n"
        f"Relevant memory excerpts:\\n{chunk_text}\\n\\n"
        "Extract the most relevant information for the query. "
        "If something is missing, say what's missing in one short line."
    )
    return self._llm.call([{"role": "user", "content": prompt}])
''')
    # crewAI lib/crewai-tools/.../bedrock/agents/invoke_agent_tool.py: the clock, then two sentences.
    (tmp_path / "invoke_agent_tool.py").write_text('''
from datetime import datetime, timezone


def run(query: str) -> str:
    current_utc = datetime.now(timezone.utc)
    prompt = f"""
The current time is: {current_utc}

Below is the users query or task. Complete it and answer it consicely and to the point:
{query}
"""
    return prompt
''')
    assert not lint(tmp_path).findings
    code, doc = _lint_root(tmp_path)
    assert code == 0 and not doc["findings"]


def test_the_same_prompt_past_the_minimum_is_a_warning(tmp_path: Path) -> None:
    # The size rule is a threshold, not a blanket silence: the recall prompt with 1,500 tokens of rules.
    rules = "Keep every fact the excerpts state about the query, with its source and date. " * 100
    (tmp_path / "recall_flow.py").write_text(f'''
def enhance(self, chunk_text: str) -> str:
    prompt = (
        f"Query: {{self.state.query}}\\n\\n"
        "{rules}"
        f"Relevant memory excerpts:\\n{{chunk_text}}"
    )
    return self._llm.call([{{"role": "user", "content": prompt}}])
''')
    (finding,) = _warnings(lint(tmp_path))
    assert finding.rule == "PG001" and "self.state.query" in finding.message


def test_a_clock_read_once_at_import_is_a_session_value(tmp_path: Path) -> None:
    # MetaGPT metagpt/prompts/di/engineer2.py: a module constant formatted with int(time.time()) when the
    # module loads. The value is fixed for the process's life, like a session constant: info at most.
    rules = "\n".join(f"{i}. Follow the project's conventions for file {i} and keep the plan current." for i in range(80))
    (tmp_path / "engineer2.py").write_text(f'''
import time

ENGINEER2_INSTRUCTION = """
You are an autonomous programmer.
{rules}
14. When not specified, you should write files in a folder named "{{{{project_name}}}}_{{timestamp}}".
{rules}
""".format(timestamp=int(time.time()))
''')
    findings = lint(tmp_path).findings
    assert findings and not _warnings(lint(tmp_path))
    assert {f.severity for f in findings} == {"info"}


def test_a_tool_class_s_own_description_is_no_finding(tmp_path: Path) -> None:
    """anthropics/anthropic-quickstarts agents/tools/base.py (`Tool.to_dict`) and openai/openai-agents-python
    src/agents/models/chatcmpl_converter.py (`tool_to_openai`): every agent framework turns its tool objects
    into the provider's tool dicts from their own fields. Nothing shows those change per request and no static
    text follows them in the code: lint . reported each as "comes before 0 tokens of static prompt" (19 of
    the 33 findings on openai-agents-python). A value proven to change is still reported (test below)."""
    (tmp_path / "base.py").write_text('''
class Tool:
    def to_dict(self):
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


def tool_to_openai(tool):
    return {"type": "function", "function": {"name": tool.name, "description": tool.description or "",
                                             "parameters": tool.params_json_schema}}
''')
    assert not lint(tmp_path).findings


def test_a_clock_in_a_tool_description_is_still_a_warning(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text('''
from datetime import datetime


def tools():
    return [{"name": "clock", "description": f"Now is {datetime.now():%H:%M:%S}", "input_schema": {}}]
''')
    (finding,) = lint(tmp_path).findings
    assert finding.rule == "PG001" and finding.severity == "warning" and "tool definition" in finding.message


def test_semantic_kernel_skprompt_below_the_minimum_is_quiet() -> None:
    # MetaGPT metagpt/skills/WriterSkill/TellMeMore/skprompt.txt: `{{$input}}` before ~60 tokens.
    assert not _warnings(lint(HERE / "metagpt_tell_me_more_skprompt.txt"))


def test_a_long_prompt_file_with_a_changing_diff_early_is_a_warning() -> None:
    # openai-agents-python src/agents/sandbox/memory/prompts/memory_consolidation_prompt.md: the diff since
    # the last consolidation (new every run) comes before ~8,000 tokens of fixed instructions.
    (finding,) = _warnings(lint(HERE / "openai_agents_memory_consolidation_prompt.md"))
    assert finding.rule == "PG001" and finding.location.line == 151
    assert "phase_two_input_selection" in finding.message


def test_files_a_repository_holds_for_other_reasons_are_skipped_with_a_note(tmp_path: Path) -> None:
    # SWE-agent: a predictions file, one JSON object per line, neither a trace nor a request.
    (tmp_path / "trajectories").mkdir()
    (tmp_path / "trajectories/all_preds.jsonl").write_text(json.dumps(
        {"model_name_or_path": "gpt4", "instance_id": "pydicom__pydicom-1458", "model_patch": "diff --git a/x b/x"}) + "\n")
    # crewAI lib/cli/src/crewai_cli/templates: Python files that are Jinja-like templates of Python.
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates/main.py").write_text("from {{folder_name}}.crew import Crew\n")
    # OpenAI Agents SDK tests/fixtures/run_state: saved run state with `input` and no model.
    (tmp_path / "state").mkdir()
    (tmp_path / "state/run_state.json").write_text(json.dumps(
        {"$schemaVersion": "1.10", "input": [{"role": "user", "content": "hi"}], "auto_previous_response_id": False}))
    (tmp_path / "state/system_prompt.txt").write_bytes(b"\xff\xfe not utf-8 \x00")
    code, doc = _lint_root(tmp_path)
    assert code == 0 and not _warnings(doc), doc
    skipped = {Path(s["path"]).name: s["reason"] for s in doc["skipped"]}
    assert set(skipped) == {"all_preds.jsonl", "main.py", "run_state.json", "system_prompt.txt"}, skipped
    assert "neither a trace record nor a request body" in skipped["all_preds.jsonl"]
    assert "no model" in skipped["run_state.json"] and "not UTF-8" in skipped["system_prompt.txt"]
    text = CliRunner().invoke(main, ["lint", "--no-cost", str(tmp_path)])
    assert text.exit_code == 0 and "Skipped 4 files" in text.output
    # Named on the command line, a file must be what it claims: that stays a usage error.
    named = CliRunner().invoke(main, ["lint", str(tmp_path / "trajectories/all_preds.jsonl")])
    assert named.exit_code == 2


def test_a_fine_tuning_dataset_is_skipped_with_a_note_not_an_error(tmp_path: Path) -> None:
    """anthropics/anthropic-cookbook finetuning/datasets/json_mode_dataset.jsonl: Bedrock fine-tuning records
    (`system` and `messages`, no model). `lint .` at the cookbook's root reported PG000 error "model: field
    required (and 499 more records)" and exited 1; a .json file of the same shape was already skipped."""
    (tmp_path / "datasets").mkdir()
    record = {"system": "JSON Mode: Enabled", "messages": [{"role": "user", "content": "whats the first line of moby dick"},
                                                            {"role": "assistant", "content": '{"answer": "Call me Ishmael."}'}]}
    (tmp_path / "datasets/json_mode_dataset.jsonl").write_text((json.dumps(record) + "\n") * 3)
    code, doc = _lint_root(tmp_path)
    assert code == 0 and not doc["findings"], doc
    (skipped,) = doc["skipped"]
    assert skipped["reason"].endswith("has no model, so it is not a request log"), skipped
    # Named on the command line, it is linted as requests: the missing model is the provider's 400.
    named = CliRunner().invoke(main, ["lint", "--no-cost", str(tmp_path / "datasets/json_mode_dataset.jsonl")])
    assert named.exit_code == 1 and "PG000" in named.output


def test_a_readme_in_a_folder_filed_as_prompts_is_documentation(tmp_path: Path) -> None:
    """openai/openai-agents-python examples/mcp/prompt_server/README.md: the folder's name matched the walk's
    `**/*prompt*/**/*.md`, and the README how to run the example drew PG002 "static prefix ... below the
    minimum". A prompt file beside it is still linted."""
    (tmp_path / "prompt_server").mkdir()
    (tmp_path / "prompt_server/README.md").write_text(
        "# MCP Prompt Server Example\n\nThis example uses a local MCP prompt server in [server.py](server.py).\n\n"
        "Run the example via:\n\n```\nuv run python examples/mcp/prompt_server/main.py\n```\n")
    (tmp_path / "prompt_server/review_prompt.md").write_text("Review the code below.\n\n{code}\n")
    report = lint(tmp_path)
    assert not report.findings and report.files == 1 and not report.skipped


def test_test_suites_are_left_out_of_a_walk_but_linted_when_named(tmp_path: Path) -> None:
    # crewAI lib/crewai/tests/agents/test_agent.py: prompts sent to mocked models in the test suite.
    rules = "Answer with the final answer only, in the format the task asks for.\n" * 120
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_agent.py").write_text(f'''
def test_agent(user_query: str) -> None:
    system_prompt = f"{{user_query}}\\n" + RULES
    client.messages.create(model="claude-sonnet-5-5", system=system_prompt, messages=[])


RULES = """{rules}"""
''')
    code, doc = _lint_root(tmp_path)
    assert code == 0 and doc["files"] == 0
    assert _warnings(lint(tmp_path / "tests/test_agent.py"))
