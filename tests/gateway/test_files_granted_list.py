"""A file the operator made outside the gateway and granted a key (`provider_ids` in the policy) is that key's to
read through `/v1/files/{id}`, and so it is listed by that key's `GET /v1/files` (and Gemini's list), never to
another key or tenant (real openai and google-genai SDKs, the mock)."""

from __future__ import annotations

import io

import openai
import pytest
from google import genai

from prefixgate.policies import hash_key
from tests.gateway.support_gateway import gateway_over_mock
from tests.gateway.support_sdk_clients import gemini, oai

ACME, ACME_OTHER, BETA = "pg-granted-acme-012345", "pg-granted-acme2-01234", "pg-granted-beta-012345"
OPENAI_KEY, GEMINI_KEY = "sk-gateway-own-000000", "AIzaGranted000000000000000000000000000"


@pytest.fixture
def granted(tmp_path, monkeypatch):
    """(gateway URL, the OpenAI file id and the Gemini file name the operator made and granted to ACME's key)."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    made = []

    def policy(mock: str) -> dict:
        # The operator's own files, made at the provider with the gateway's keys (not through the gateway).
        made.append(openai.OpenAI(base_url=f"{mock}/v1", api_key=OPENAI_KEY).files.create(
            file=("handbook.txt", b"the acme handbook\n"), purpose="user_data").id)
        google = genai.Client(api_key=GEMINI_KEY, http_options={"base_url": mock})
        made.append(google.files.upload(file=io.BytesIO(b"the acme handbook\n"), config={"mime_type": "text/plain"}).name)
        return {"routes": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
                           {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}],
                "keys": [{"name": "acme", "key_sha256": hash_key(ACME), "tenant": "acme", "provider_ids": made},
                         {"name": "acme-other", "key_sha256": hash_key(ACME_OTHER), "tenant": "acme"},
                         {"name": "beta", "key_sha256": hash_key(BETA), "tenant": "beta"}]}

    with gateway_over_mock(tmp_path, policy) as gw:
        yield gw.url, made[0], made[1]


def test_a_granted_file_is_listed_to_its_key_alone(granted):
    gw, file_id, name = granted
    own = oai(gw, ACME).files.create(file=("notes.txt", b"acme notes\n"), purpose="user_data").id
    assert oai(gw, ACME).files.retrieve(file_id).filename == "handbook.txt"
    assert {f.id for f in oai(gw, ACME).files.list()} == {file_id, own}
    # A grant is the key's (as its retrieve is), not its tenant's other keys', and never another tenant's.
    assert {f.id for f in oai(gw, ACME_OTHER).files.list()} == {own}
    assert [f.id for f in oai(gw, BETA).files.list()] == []
    for key, listed in ((ACME, [name]), (ACME_OTHER, []), (BETA, [])):
        client = gemini(gw, key)        # held while its pager reads
        assert [f.name for f in client.files.list()] == listed
