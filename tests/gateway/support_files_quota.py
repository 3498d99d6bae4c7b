"""One tenant's key with an uploads limit, on a gateway over the mock's OpenAI, Anthropic and Gemini (the
quota-after-a-provider-side-delete suites); a file written by Claude's code execution."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anthropic
import pytest

from prefixgate.policies import hash_key
from tests.gateway.support_gateway import gateway_over_mock

OPENAI_KEY, ANTHROPIC_KEY, GEMINI_KEY = "sk-gateway-own-000000", "sk-ant-gateway-own-0000", "AIzaGone00000000000000000000000000000"
FILES_BETA = "files-api-2025-04-14"


@contextmanager
def solo_over_mock(folder: Path, monkeypatch: pytest.MonkeyPatch, key: str, max_files: int) -> Iterator[tuple[str, str]]:
    """(gateway URL, mock URL): routes gpt-*, claude-*, gemini-* to the mock, and `key` (tenant `solo`) allowed
    `max_files` stored files."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    mock = []

    def policy(url: str) -> dict:
        mock.append(url)
        return {"routes": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
                           {"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
                           {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}],
                "keys": [{"name": "solo", "key_sha256": hash_key(key), "tenant": "solo", "uploads": {"max_files": max_files}}]}

    with gateway_over_mock(folder, policy) as gw:
        yield gw.url, mock[0]


def file_code_execution_wrote(claude: anthropic.Anthropic) -> str:
    """The id of the file one code execution run writes (the mock's 21-byte `mock analysis output` line)."""
    ran = claude.messages.create(
        model="claude-sonnet-5-5", max_tokens=64, tools=[{"type": "code_execution_20250825", "name": "code_execution"}],
        messages=[{"role": "user", "content": "Analyse the numbers 3, 5 and 10 and save the result to a file."}])
    (written,) = [out.file_id for block in ran.content if block.type == "bash_code_execution_tool_result"
                  for out in block.content.content]
    return written
