"""What Anthropic's code execution tool answers in the mock: a request with a `code_execution_*` tool runs one
command, which writes one file (downloadable through the Files API, as files a tool writes are), and the answer's
content starts with the `server_tool_use` block and its `bash_code_execution_tool_result` (anthropic 2.14
`BashCodeExecutionToolResultBlock`: `content.content` lists the written files' ids) before the reply's text.
Whole answers only: a stream carries the reply's text alone.
"""

from __future__ import annotations

import secrets

from prefixgate.simulation.mock.files import Files

COMMAND = "python analysis.py > output.txt"
OUTPUT = b"mock analysis output\n"


def runs_code(body: dict) -> bool:
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    return any(isinstance(t, dict) and str(t.get("type", "")).startswith("code_execution_") for t in tools)


def executed(files: Files, account: str) -> list[dict]:
    """The content blocks of one run, its output file written to `account`'s files."""
    use_id = "srvtoolu_" + secrets.token_hex(12)
    file_id = files.written(account, "output.txt", OUTPUT)
    return [{"type": "server_tool_use", "id": use_id, "name": "bash_code_execution", "input": {"command": COMMAND}},
            {"type": "bash_code_execution_tool_result", "tool_use_id": use_id, "content": {
                "type": "bash_code_execution_result", "stdout": "", "stderr": "", "return_code": 0,
                "content": [{"type": "bash_code_execution_output", "file_id": file_id}]}}]
