"""A file Claude's code execution wrote lives in the account that ran it: with a key whose routes reach two
Anthropic accounts, its download through `/v1/files` goes to that account, not to the first one its routes
reach (which answers a 404 for a file it never held) (real anthropic SDK, the mock)."""

from __future__ import annotations

import anthropic
import pytest

from prefixgate.policies import hash_key
from tests.gateway.support_files_quota import file_code_execution_wrote
from tests.gateway.support_gateway import gateway_over_mock

ACME = "pg-written-home-acme-0123"
FILES_BETA = "files-api-2025-04-14"


@pytest.fixture
def gateway(monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_KEY_A", "sk-ant-account-a-000000000")
    monkeypatch.setenv("ANTHROPIC_KEY_B", "sk-ant-account-b-000000000")
    with gateway_over_mock(tmp_path, lambda mock: {
            "upstreams": {"claude-a": {"kind": "anthropic", "url": mock, "api_key_env": "ANTHROPIC_KEY_A"},
                          "claude-b": {"kind": "anthropic", "url": mock, "api_key_env": "ANTHROPIC_KEY_B"}},
            "routes": [{"name": "haiku", "models": ["claude-haiku-*"], "targets": [{"upstream": "claude-a"}]},
                       {"name": "sonnet", "models": ["claude-sonnet-*"], "targets": [{"upstream": "claude-b"}]}],
            "keys": [{"name": "acme", "key_sha256": hash_key(ACME), "tenant": "acme"}]}) as gw:
        yield gw.url


def test_a_written_file_is_downloaded_from_the_account_that_wrote_it(gateway):
    claude = anthropic.Anthropic(base_url=gateway, api_key=ACME)
    written = file_code_execution_wrote(claude)
    assert claude.beta.files.download(written, betas=[FILES_BETA]).read() == b"mock analysis output\n"
