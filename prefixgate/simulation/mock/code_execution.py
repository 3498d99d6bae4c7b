"""What Anthropic's code execution tool answers in the mock: a request with a `code_execution_*` tool runs one
command, which writes one file (downloadable through the Files API, as files a tool writes are), and the answer's
content starts with the `server_tool_use` block and its `bash_code_execution_tool_result` (anthropic 2.14
`BashCodeExecutionToolResultBlock`: `content.content` lists the written files' ids) before the reply's text.
A stream carries them as Anthropic streams server tool blocks: the tool use's input as one `input_json_delta`,
the result whole in its `content_block_start`.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Iterator

from prefixgate.dialects.sse import encode_sse, event_json
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


def streamed(blocks: list[dict], events: Iterable[bytes]) -> Iterator[bytes]:
    """A Messages stream's `events` with `blocks` as its first content blocks (the reply's renumbered after)."""
    for event in events:
        data = event_json(event)
        if data is None or "index" not in data:
            yield event
            continue
        if data["type"] == "content_block_start" and data["index"] == 0:
            for at, block in enumerate(blocks):
                yield from _block_events(at, block)
        yield encode_sse({**data, "index": data["index"] + len(blocks)}, data["type"])


def _block_events(index: int, block: dict) -> Iterator[bytes]:
    if block["type"] == "server_tool_use":
        yield encode_sse({"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}},
                         "content_block_start")
        yield encode_sse({"type": "content_block_delta", "index": index, "delta": {
            "type": "input_json_delta", "partial_json": json.dumps(block["input"])}}, "content_block_delta")
    else:
        yield encode_sse({"type": "content_block_start", "index": index, "content_block": block}, "content_block_start")
    yield encode_sse({"type": "content_block_stop", "index": index}, "content_block_stop")
