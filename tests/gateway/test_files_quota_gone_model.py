"""A model request naming a file deleted at the provider (not through the gateway) frees the file's share of the
tenant's upload quota when the provider's refusal names that file (OpenAI's 404 `No such File object: ID`,
Anthropic's 404 `File not found: ID`, Gemini's 403 `... the File ID or it may not exist.`); before, only a
retrieve, download or delete did, and a tenant whose model request heard it stayed refused uploads (real openai,
anthropic and google-genai SDKs, the mock). A refusal that names another file frees nothing."""

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

SOLO = "pg-solo-gone-model-0123"

stack = solo_stack(SOLO, max_files=2)


def _openai_read(client: openai.OpenAI, file_id: str) -> None:
    client.chat.completions.create(model="gpt-5.4-mini", messages=[{"role": "user", "content": [
        {"type": "text", "text": "Summarise"}, {"type": "file", "file": {"file_id": file_id}}]}])


def test_an_openai_file_a_model_request_hears_is_gone_frees_its_share(stack):
    gw, mock = stack
    client = openai.OpenAI(base_url=f"{gw}/v1", api_key=SOLO, max_retries=0)
    kept = client.files.create(file=("k.txt", b"kept"), purpose="user_data")
    made = client.files.create(file=("n.txt", b"note"), purpose="user_data")
    with pytest.raises(openai.PermissionDeniedError):       # the tenant's two files are taken
        client.files.create(file=("m.txt", b"note"), purpose="user_data")
    assert deleted_at_openai(mock, made.id).json()["deleted"]
    with pytest.raises(openai.NotFoundError) as refused:       # the provider's 404, relayed
        _openai_read(client, made.id)
    assert made.id in refused.value.message
    client.files.create(file=("m.txt", b"note"), purpose="user_data")      # the freed share
    with pytest.raises(openai.PermissionDeniedError):       # the file still there still counts
        client.files.create(file=("o.txt", b"note"), purpose="user_data")
    assert client.files.retrieve(kept.id).id == kept.id


def test_a_refusal_naming_another_file_frees_nothing(stack):
    gw, mock = stack
    client = openai.OpenAI(base_url=f"{gw}/v1", api_key=SOLO, max_retries=0)
    kept = client.files.create(file=("k.txt", b"kept"), purpose="user_data")
    made = client.files.create(file=("n.txt", b"note"), purpose="user_data")
    deleted_at_openai(mock, made.id)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-5.4-mini", messages=[{"role": "user", "content": [
            {"type": "file", "file": {"file_id": kept.id}}, {"type": "file", "file": {"file_id": made.id}}]}])
    client.files.create(file=("m.txt", b"note"), purpose="user_data")      # the deleted one's share, freed
    with pytest.raises(openai.PermissionDeniedError):       # the one the refusal did not name still counts
        client.files.create(file=("o.txt", b"note"), purpose="user_data")
    assert client.files.retrieve(kept.id).id == kept.id


def test_an_anthropic_file_a_model_request_hears_is_gone_frees_its_share(stack):
    gw, mock = stack
    client = anthropic.Anthropic(base_url=gw, api_key=SOLO, max_retries=0)
    client.beta.files.upload(file=("k.txt", b"kept", "text/plain"), betas=[FILES_BETA])
    made = client.beta.files.upload(file=("n.txt", b"note", "text/plain"), betas=[FILES_BETA])
    gone = deleted_at_anthropic(mock, made.id)
    assert gone.json()["type"] == "file_deleted"
    with pytest.raises(anthropic.NotFoundError):
        client.beta.messages.create(model="claude-haiku-4-5", max_tokens=16, betas=[FILES_BETA], messages=[
            {"role": "user", "content": [{"type": "document", "source": {"type": "file", "file_id": made.id}},
                                         {"type": "text", "text": "Summarise"}]}])
    assert client.beta.files.upload(file=("m.txt", b"note", "text/plain"), betas=[FILES_BETA]).id


def test_a_gemini_file_a_model_request_hears_is_gone_frees_its_share(stack):
    gw, mock = stack
    client = genai.Client(api_key=SOLO, http_options={"base_url": gw})
    client.files.upload(file=io.BytesIO(b"kept"), config={"mime_type": "text/plain"})
    made = client.files.upload(file=io.BytesIO(b"note"), config={"mime_type": "text/plain"})
    assert deleted_at_gemini(mock, made.name).status_code == 200
    with pytest.raises(genai_errors.ClientError) as refused:
        client.models.generate_content(model="gemini-2.5-flash", contents=[
            {"role": "user", "parts": [{"file_data": {"file_uri": made.uri, "mime_type": "text/plain"}},
                                       {"text": "Summarise"}]}])
    assert refused.value.code == 403 and "may not exist" in refused.value.message
    assert client.files.upload(file=io.BytesIO(b"note"), config={"mime_type": "text/plain"}).name
