"""A file deleted at the provider itself (its console, a script with the organisation's key), not through the
gateway, frees its share of the tenant's upload quota as soon as the gateway hears it is gone (the provider's
404 to a retrieve, a download or a delete; Gemini's 403 "... or it may not exist"); before, it counted until it
expired: for OpenAI's and Anthropic's files, never (real openai, anthropic and google-genai SDKs, the mock)."""

from __future__ import annotations

import io

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors

from tests.gateway.support_files_quota import (
    FILES_BETA,
    deleted_at_anthropic,
    deleted_at_gemini,
    deleted_at_openai,
    solo_stack,
)

SOLO = "pg-solo-gone-0123456"

stack = solo_stack(SOLO, max_files=1)


def test_an_openai_file_deleted_at_the_provider_frees_its_share(stack):
    gw, mock = stack
    client = openai.OpenAI(base_url=f"{gw}/v1", api_key=SOLO)
    made = client.files.create(file=("n.txt", b"note"), purpose="user_data")
    with pytest.raises(openai.PermissionDeniedError):       # the tenant's one file is taken
        client.files.create(file=("m.txt", b"note"), purpose="user_data")
    gone = deleted_at_openai(mock, made.id)
    assert gone.json()["deleted"] is True
    with pytest.raises(openai.NotFoundError):       # the provider's 404, relayed
        client.files.retrieve(made.id)
    assert client.files.create(file=("m.txt", b"note"), purpose="user_data").id


def test_an_anthropic_file_deleted_at_the_provider_frees_its_share(stack):
    gw, mock = stack
    client = anthropic.Anthropic(base_url=gw, api_key=SOLO)
    made = client.beta.files.upload(file=("n.txt", b"note", "text/plain"), betas=[FILES_BETA])
    gone = deleted_at_anthropic(mock, made.id)
    assert gone.json()["type"] == "file_deleted"
    with pytest.raises(anthropic.NotFoundError):
        client.beta.files.delete(made.id, betas=[FILES_BETA])
    assert client.beta.files.upload(file=("m.txt", b"note", "text/plain"), betas=[FILES_BETA]).id


def test_a_gemini_file_deleted_at_the_provider_frees_its_share(stack):
    gw, mock = stack
    client = genai.Client(api_key=SOLO, http_options={"base_url": gw})
    made = client.files.upload(file=io.BytesIO(b"note"), config={"mime_type": "text/plain"})
    assert deleted_at_gemini(mock, made.name).status_code == 200
    with pytest.raises(genai_errors.ClientError) as refused:
        client.files.get(name=made.name)
    assert refused.value.code == 403 and "may not exist" in refused.value.message
    assert client.files.upload(file=io.BytesIO(b"note"), config={"mime_type": "text/plain"}).name
