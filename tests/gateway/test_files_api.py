"""The Files APIs through the gateway (`/v1/files`, OpenAI's and Anthropic's beta), with the real SDKs against a
real `prefixgate serve` in front of `prefixgate mock-providers`: behind the gateway's one provider key every
tenant's upload lands in one account, so the gateway alone keeps tenant B from reading, listing, deleting or
naming tenant A's file in a model request."""

from __future__ import annotations

import base64
import io

import anthropic
import httpx
import openai
import pytest
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from prefixgate.policies import hash_key
from tests.gateway.support_sdk_clients import claude, gemini, oai
from tests.support_stack import policy_env, running_stack

ACME_1, ACME_2, BETA = "pg-acme-one-0123456789", "pg-acme-two-0123456789", "pg-beta-0123456789ab"
GAMMA, DELTA = "pg-gamma-0123456789a", "pg-delta-0123456789a"     # tenants with no file but the list test's
CLAUDE_ONLY = "pg-claude-only-012345"
POLICY = {
    "routes": [{"name": "openai", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
               {"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
               {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}],
    "keys": [{"name": "acme-app", "key_sha256": hash_key(ACME_1), "tenant": "acme"},
             {"name": "acme-batch", "key_sha256": hash_key(ACME_2), "tenant": "acme"},
             {"name": "beta", "key_sha256": hash_key(BETA), "tenant": "beta"},
             {"name": "gamma", "key_sha256": hash_key(GAMMA), "tenant": "gamma"},
             {"name": "delta", "key_sha256": hash_key(DELTA), "tenant": "delta"},
             {"name": "claude-only", "key_sha256": hash_key(CLAUDE_ONLY), "tenant": "epsilon", "routes": ["claude"]}],
}
GPT, CLAUDE, GEMINI = "gpt-5.4", "claude-sonnet-5-5", "gemini-3.5-flash"
FILES_BETA = "files-api-2025-04-14"
REPORT = b"Q3 report for acme: revenue was 4417 units, churn fell to 2 percent, and the launch moved to May.\n" * 20
UPLOAD_MB = 1       # the gateway's max_upload_mb here, so a refused upload is small


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("files_api")
    env = policy_env(tmp, POLICY, ANTHROPIC_API_KEY="sk-ant-gateway-own-0000", PREFIXGATE_MAX_UPLOAD_MB=str(UPLOAD_MB))
    with running_stack(tmp, env) as (gw, mock):
        yield gw, mock


def chat_with(client: openai.OpenAI, file_id: str | None) -> openai.types.chat.ChatCompletion:
    parts = [{"type": "file", "file": {"file_id": file_id}}] if file_id else []
    return client.chat.completions.create(model=GPT, messages=[
        {"role": "user", "content": [*parts, {"type": "text", "text": "Summarise the attached report."}]}])


def claude_with(client: anthropic.Anthropic, file_id: str | None):  # noqa: ANN201 (the SDK's BetaMessage)
    parts = [{"type": "document", "source": {"type": "file", "file_id": file_id}}] if file_id else []
    return client.beta.messages.create(model=CLAUDE, max_tokens=64, betas=[FILES_BETA], messages=[
        {"role": "user", "content": [*parts, {"type": "text", "text": "Summarise the attached report."}]}])


def test_an_openai_upload_is_its_tenants_alone(stack):
    gw, _ = stack
    made = oai(gw, ACME_1).files.create(file=("q3.txt", REPORT), purpose="user_data")
    assert (made.object, made.filename, made.bytes, made.purpose) == ("file", "q3.txt", len(REPORT), "user_data")
    # Its tenant reads it in a model request (the mock reads the file's text: the prompt is that much longer),
    # and through its other key too.
    bare = chat_with(oai(gw, ACME_1), None).usage.prompt_tokens
    assert chat_with(oai(gw, ACME_1), made.id).usage.prompt_tokens > bare + 400
    assert chat_with(oai(gw, ACME_2), made.id).choices[0].message.content
    asked = [{"role": "user", "content": [{"type": "input_file", "file_id": made.id},
                                          {"type": "input_text", "text": "Summarise the attached report."}]}]
    assert oai(gw, ACME_2).responses.create(model=GPT, input=asked).usage.input_tokens > bare + 400
    assert oai(gw, ACME_2).files.retrieve(made.id).bytes == len(REPORT)
    assert oai(gw, ACME_2).files.content(made.id).read() == REPORT
    assert made.id in [f.id for f in oai(gw, ACME_2).files.list()]
    # Another tenant: OpenAI's own 404 for an id its organisation does not hold, whatever it tries.
    other = oai(gw, BETA)
    for attempt in (lambda: other.files.retrieve(made.id), lambda: other.files.content(made.id),
                    lambda: other.files.delete(made.id)):
        with pytest.raises(openai.NotFoundError) as refused:
            attempt()
        assert refused.value.body["message"] == f"No such File object: {made.id}"
    with pytest.raises(openai.NotFoundError) as refused:
        chat_with(other, made.id)
    assert refused.value.body["message"] == f"File with id '{made.id}' not found."
    with pytest.raises(openai.NotFoundError):
        other.responses.create(model=GPT, input=asked)
    assert made.id not in [f.id for f in other.files.list()]
    # Its owner deletes it (B's delete did nothing): then it is gone, for the owner's model requests too.
    assert oai(gw, ACME_1).files.retrieve(made.id).id == made.id
    assert oai(gw, ACME_1).files.delete(made.id).deleted is True
    with pytest.raises(openai.NotFoundError):
        oai(gw, ACME_1).files.retrieve(made.id)
    with pytest.raises(openai.NotFoundError):
        chat_with(oai(gw, ACME_1), made.id)
    assert made.id not in [f.id for f in oai(gw, ACME_1).files.list()]


def test_an_anthropic_upload_is_its_tenants_alone(stack):
    gw, _ = stack
    made = claude(gw, ACME_1).beta.files.upload(file=("q3.txt", REPORT, "text/plain"), betas=[FILES_BETA])
    assert (made.type, made.filename, made.size_bytes, made.mime_type) == ("file", "q3.txt", len(REPORT), "text/plain")
    bare = claude_with(claude(gw, ACME_1), None).usage.input_tokens
    read = claude_with(claude(gw, ACME_1), made.id).usage.input_tokens
    assert read > bare + 400
    # Counting the same request reads the same file: the count is what the request was billed.
    counted = claude(gw, ACME_2).beta.messages.count_tokens(model=CLAUDE, betas=[FILES_BETA], messages=[
        {"role": "user", "content": [{"type": "document", "source": {"type": "file", "file_id": made.id}},
                                     {"type": "text", "text": "Summarise the attached report."}]}])
    assert counted.input_tokens == read
    assert claude(gw, ACME_2).beta.files.retrieve_metadata(made.id, betas=[FILES_BETA]).size_bytes == len(REPORT)
    assert made.id in [f.id for f in claude(gw, ACME_2).beta.files.list(betas=[FILES_BETA])]
    # Anthropic serves the content only of files a tool wrote: an upload is not downloadable, even to its owner.
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude(gw, ACME_1).beta.files.download(made.id, betas=[FILES_BETA])
    # The provider's own code, which callers branch on (docs.claude.com's Files API errors), as it sent it.
    assert refused.value.body["error"]["details"] == {"error_code": "file_not_downloadable"}
    other = claude(gw, BETA).beta.files
    for attempt in (lambda: other.retrieve_metadata(made.id, betas=[FILES_BETA]),
                    lambda: other.download(made.id, betas=[FILES_BETA]),
                    lambda: other.delete(made.id, betas=[FILES_BETA])):
        with pytest.raises(anthropic.NotFoundError) as refused:
            attempt()
        assert refused.value.body["error"]["message"] == f"File not found: {made.id}"
    with pytest.raises(anthropic.NotFoundError) as refused:
        claude_with(claude(gw, BETA), made.id)
    assert refused.value.body["error"]["message"] == f"File with id '{made.id}' not found."
    assert made.id not in [f.id for f in other.list(betas=[FILES_BETA])]
    assert claude(gw, ACME_1).beta.files.delete(made.id, betas=[FILES_BETA]).type == "file_deleted"
    with pytest.raises(anthropic.NotFoundError):
        claude(gw, ACME_1).beta.files.retrieve_metadata(made.id, betas=[FILES_BETA])
    with pytest.raises(anthropic.NotFoundError):
        claude_with(claude(gw, ACME_1), made.id)


def test_a_tenants_list_pages_past_other_tenants_files(stack):
    gw, _ = stack
    gamma = {oai(gw, GAMMA).files.create(file=(f"g{i}.txt", b"gamma"), purpose="user_data").id for i in range(2)}
    delta = {oai(gw, DELTA).files.create(file=(f"d{i}.txt", b"delta"), purpose="user_data").id for i in range(3)}
    # Newest first, one a page: gamma's first pages would be delta's three files, which the gateway skips.
    assert {f.id for f in oai(gw, GAMMA).files.list(limit=1)} == gamma
    assert {f.id for f in oai(gw, DELTA).files.list(limit=1, order="asc")} == delta
    gamma = {claude(gw, GAMMA).beta.files.upload(file=(f"g{i}.txt", b"gamma", "text/plain"), betas=[FILES_BETA]).id
             for i in range(2)}
    delta = {claude(gw, DELTA).beta.files.upload(file=(f"d{i}.txt", b"delta", "text/plain"), betas=[FILES_BETA]).id
             for i in range(3)}
    assert {f.id for f in claude(gw, GAMMA).beta.files.list(limit=1, betas=[FILES_BETA])} == gamma
    assert {f.id for f in claude(gw, DELTA).beta.files.list(limit=2, betas=[FILES_BETA])} == delta
    # Delta's second page ends on gamma's newest file (newest first: d d | d g | g): the provider's cursor after it
    # (the mock's spells out that id, base64) reaches delta sealed, never readable.
    headers = {"x-api-key": DELTA, "anthropic-version": "2023-06-01", "anthropic-beta": FILES_BETA}
    first = httpx.get(f"{gw}/v1/files", params={"limit": 2}, headers=headers)
    second = httpx.get(f"{gw}/v1/files", params={"limit": 2, "page": first.json()["next_page"]}, headers=headers)
    assert [f["id"] for f in second.json()["data"]] and second.json()["next_page"].startswith("page_")
    for text in (first.text, second.text):
        for other in gamma:
            assert other not in text and base64.urlsafe_b64encode(other.encode()).decode().rstrip("=") not in text
    forged = httpx.get(f"{gw}/v1/files", params={"page": "page_" + base64.urlsafe_b64encode(b"file_011x").decode()},
                       headers=headers)
    assert forged.status_code == 400 and forged.json()["error"]["type"] == "invalid_request_error"


def test_uploads_are_bounded_and_streamed(stack):
    gw, mock = stack
    over = b"x" * (UPLOAD_MB * 1024 * 1024 + 100 * 1024)       # past the file cap and the form's 64 KiB allowance
    with pytest.raises(openai.APIStatusError) as refused:
        oai(gw, BETA).files.create(file=("big.bin", over), purpose="user_data")
    assert refused.value.status_code == 413 and "max_upload_mb" in refused.value.message
    with pytest.raises(anthropic.APIStatusError) as refused:
        claude(gw, BETA).beta.files.upload(file=("big.bin", over, "application/octet-stream"), betas=[FILES_BETA])
    assert refused.value.status_code == 413 and refused.value.body["type"] == "error"
    assert "big.bin" not in [f.filename for f in oai(gw, BETA).files.list()]     # nothing reached the provider
    # A body sent without a content-length (chunked) is taken too, and counted as it comes.
    form = httpx.Request("POST", f"{gw}/v1/files", files={"file": ("c.txt", b"chunked upload\n")},
                         data={"purpose": "user_data"})
    body = form.read()

    def chunks():
        yield body[:50]
        yield body[50:]

    headers = {"authorization": f"Bearer {BETA}", "content-type": form.headers["content-type"]}
    sent = httpx.post(f"{gw}/v1/files", content=chunks(), headers=headers)
    assert sent.status_code == 200 and "content-length" not in sent.request.headers
    assert oai(gw, BETA).files.content(sent.json()["id"]).read() == b"chunked upload\n"
    # Without a declared length, the limit is met while the bytes arrive.
    cut = httpx.post(f"{gw}/v1/files", content=(over[i:i + 65536] for i in range(0, len(over), 65536)),
                     headers=headers)
    assert cut.status_code == 413 and cut.json()["error"]["param"] == "file"


def test_the_mock_speaks_each_providers_files_rules(stack):
    _, mock = stack
    direct = anthropic.Anthropic(base_url=mock, api_key="sk-ant-someone-0000", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as refused:       # the beta header is required
        direct.beta.files.list()
    assert FILES_BETA in refused.value.message
    made = direct.beta.files.upload(file=("n.txt", b"note", "text/plain"), betas=[FILES_BETA])
    assert made.downloadable is False and made.id.startswith("file_")
    with pytest.raises(anthropic.BadRequestError) as refused:       # naming a file in Messages needs it too
        direct.messages.create(model=CLAUDE, max_tokens=16, messages=[{"role": "user", "content": [
            {"type": "document", "source": {"type": "file", "file_id": made.id}}]}])
    # Another account (another key) does not hold it: a 404.
    with pytest.raises(anthropic.NotFoundError):
        anthropic.Anthropic(base_url=mock, api_key="sk-ant-another-000", max_retries=0).beta.files.retrieve_metadata(
            made.id, betas=[FILES_BETA])
    plain = openai.OpenAI(base_url=f"{mock}/v1", api_key="sk-someone-0000", max_retries=0)
    with pytest.raises(openai.NotFoundError) as refused:       # a model request naming a file it does not hold
        chat_with(plain, "file-NotThisAccounts0000")
    assert refused.value.body["message"] == "No such File object: file-NotThisAccounts0000"
    with pytest.raises(openai.BadRequestError) as refused:
        plain.files.create(file=("n.txt", b"note"), purpose="nonsense")
    assert refused.value.body["param"] == "purpose"
    batch = plain.files.create(file=("b.jsonl", b"{}\n"), purpose="batch")
    assert batch.expires_at == batch.created_at + 30 * 86400        # batch files expire after 30 days by default


def test_a_key_reaches_only_the_files_of_providers_its_routes_reach(stack):
    gw, _ = stack
    # Its routes reach Anthropic alone: OpenAI's Files API is refused (403), Anthropic's served.
    with pytest.raises(openai.PermissionDeniedError):
        oai(gw, CLAUDE_ONLY).files.create(file=("n.txt", b"note"), purpose="user_data")
    with pytest.raises(openai.PermissionDeniedError):
        oai(gw, CLAUDE_ONLY).files.list()
    made = claude(gw, CLAUDE_ONLY).beta.files.upload(file=("n.txt", b"note", "text/plain"), betas=[FILES_BETA])
    assert [f.id for f in claude(gw, CLAUDE_ONLY).beta.files.list(betas=[FILES_BETA])] == [made.id]


def test_a_file_claudes_code_execution_wrote_is_its_tenants_to_download(stack):
    gw, _ = stack
    ask = {"model": CLAUDE, "max_tokens": 64, "tools": [{"type": "code_execution_20250825", "name": "code_execution"}],
           "messages": [{"role": "user", "content": "Analyse the numbers 3, 5 and 10 and save the result to a file."}]}
    whole = claude(gw, ACME_1).messages.create(**ask)
    with claude(gw, ACME_1).messages.stream(**ask) as events:
        streamed = events.get_final_message()
    written = [out.file_id for ran in (whole, streamed) for block in ran.content
               if block.type == "bash_code_execution_tool_result" for out in block.content.content]
    assert len(set(written)) == 2
    # Anthropic serves the content of files a tool wrote: to the tenant whose request ran it, through any of its keys.
    for file_id in written:
        assert claude(gw, ACME_2).beta.files.retrieve_metadata(file_id, betas=[FILES_BETA]).downloadable is True
        assert claude(gw, ACME_2).beta.files.download(file_id, betas=[FILES_BETA]).read() == b"mock analysis output\n"
        for attempt in (lambda: claude(gw, BETA).beta.files.download(file_id, betas=[FILES_BETA]),  # noqa: B023
                        lambda: claude(gw, BETA).beta.files.delete(file_id, betas=[FILES_BETA])):  # noqa: B023
            with pytest.raises(anthropic.NotFoundError):
                attempt()


def test_a_gemini_upload_is_its_tenants_alone(stack):
    gw, _ = stack
    # Clients held while used (the SDK closes its HTTP client when a Client is collected).
    acme, acme_2, other = gemini(gw, ACME_1), gemini(gw, ACME_2), gemini(gw, BETA)
    made = acme.files.upload(file=io.BytesIO(REPORT), config={"mime_type": "text/plain", "display_name": "q3"})
    assert made.name.startswith("files/") and made.size_bytes == len(REPORT) and made.display_name == "q3"
    bare = acme.models.generate_content(model=GEMINI, contents="Summarise the attached report.")
    read = acme_2.models.generate_content(model=GEMINI, contents=[made, "Summarise the attached report."])
    assert read.usage_metadata.prompt_token_count > bare.usage_metadata.prompt_token_count + 400
    assert acme_2.files.get(name=made.name).uri == made.uri
    assert made.name in [f.name for f in acme_2.files.list()]
    # Another tenant: Google's answer for a file its project does not hold, whatever it tries.
    for attempt in (lambda: other.files.get(name=made.name), lambda: other.files.delete(name=made.name)):
        with pytest.raises(genai_errors.ClientError) as refused:
            attempt()
        assert refused.value.code == 403 and refused.value.status == "PERMISSION_DENIED"
        assert refused.value.message == f"You do not have permission to access the File {made.name[6:]} or it may not exist."
    for named in (made, genai_types.Part.from_uri(file_uri=made.name, mime_type="text/plain")):   # uri, or name
        with pytest.raises(genai_errors.ClientError):
            other.models.generate_content(model=GEMINI, contents=[named, "Summarise the attached report."])
    assert made.name not in [f.name for f in other.files.list()]
    acme.files.delete(name=made.name)
    with pytest.raises(genai_errors.ClientError):
        acme.files.get(name=made.name)


def test_a_gemini_upload_id_is_the_starters_alone(stack):
    gw, _ = stack
    # The upload URL the gateway hands out seals the provider's: one it did not issue goes nowhere.
    forged = httpx.post(f"{gw}/upload/v1beta/files", params={"upload_id": "abc", "upload_protocol": "resumable"},
                        headers={"x-goog-upload-command": "upload, finalize", "x-goog-upload-offset": "0"},
                        content=b"bytes")
    assert forged.status_code == 404 and forged.json()["error"]["status"] == "NOT_FOUND"
    started = httpx.post(f"{gw}/upload/v1beta/files", json={"file": {"displayName": "n"}}, headers={
        "x-goog-api-key": GAMMA, "x-goog-upload-protocol": "resumable", "x-goog-upload-command": "start",
        "x-goog-upload-header-content-length": "4", "x-goog-upload-header-content-type": "text/plain"})
    url = started.headers["x-goog-upload-url"]
    assert url.startswith(f"{gw}/upload/v1beta/files?upload_id=") and "127.0.0.1" in url
    done = httpx.post(url, content=b"note", headers={"x-goog-upload-command": "upload, finalize",
                                                      "x-goog-upload-offset": "0"})
    assert done.headers["x-goog-upload-status"] == "final"
    name = done.json()["file"]["name"]
    # The file is the starter's tenant's, though the chunks carried no key.
    gamma, delta = gemini(gw, GAMMA), gemini(gw, DELTA)
    assert gamma.files.get(name=name).size_bytes == 4
    with pytest.raises(genai_errors.ClientError):
        delta.files.get(name=name)
