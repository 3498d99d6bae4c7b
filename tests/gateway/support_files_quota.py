"""One tenant's key with an uploads limit, on a gateway over the mock's OpenAI, Anthropic and Gemini, and a file
deleted at the provider itself (the quota-after-a-provider-side-delete suites); a file written by Claude's code
execution."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import anthropic
import httpx
import pytest

from prefixgate.policies import hash_key
from tests.gateway.support_gateway import gateway_over_mock

OPENAI_KEY, ANTHROPIC_KEY, GEMINI_KEY = "sk-gateway-own-000000", "sk-ant-gateway-own-0000", "AIzaGone00000000000000000000000000000"
FILES_BETA = "files-api-2025-04-14"


def solo_stack(key: str, max_files: int) -> Callable[..., Iterator[tuple[str, str]]]:
    """A fixture of (gateway URL, mock URL): the gateway routes gpt-*, claude-*, gemini-* to the mock, and
    `key` (tenant `solo`) is allowed `max_files` stored files."""

    @pytest.fixture
    def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
        monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
        mock = []

        def policy(url: str) -> dict:
            mock.append(url)
            return {"routes": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
                               {"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
                               {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}],
                    "keys": [{"name": "solo", "key_sha256": hash_key(key), "tenant": "solo",
                              "uploads": {"max_files": max_files}}]}

        with gateway_over_mock(tmp_path, policy) as gw:
            yield gw.url, mock[0]

    return stack


def deleted_at_openai(mock: str, file_id: str) -> httpx.Response:
    """OpenAI's answer to deleting `file_id` with the organisation's own key, not through the gateway."""
    return httpx.delete(f"{mock}/v1/files/{file_id}", headers={"authorization": f"Bearer {OPENAI_KEY}"})


def deleted_at_anthropic(mock: str, file_id: str) -> httpx.Response:
    """Anthropic's answer to deleting `file_id` with the organisation's own key, not through the gateway."""
    return httpx.delete(f"{mock}/v1/files/{file_id}", headers={
        "x-api-key": ANTHROPIC_KEY, "anthropic-version": "2023-06-01", "anthropic-beta": FILES_BETA})


def deleted_at_gemini(mock: str, name: str) -> httpx.Response:
    """Google's answer to deleting the file `name` (files/ID) with the project's own key, not through the gateway."""
    return httpx.delete(f"{mock}/v1beta/{name}", headers={"x-goog-api-key": GEMINI_KEY})


def file_code_execution_wrote(claude: anthropic.Anthropic) -> str:
    """The id of the file one code execution run writes (the mock's 21-byte `mock analysis output` line)."""
    ran = claude.messages.create(
        model="claude-sonnet-5-5", max_tokens=64, tools=[{"type": "code_execution_20250825", "name": "code_execution"}],
        messages=[{"role": "user", "content": "Analyse the numbers 3, 5 and 10 and save the result to a file."}])
    (written,) = [out.file_id for block in ran.content if block.type == "bash_code_execution_tool_result"
                  for out in block.content.content]
    return written
