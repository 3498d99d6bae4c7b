"""A tenant's uploads are bounded by its key's `uploads` in the policy (files and MiB stored), counted in Redis
so two replicas agree, a deleted file's share freed: behind the gateway's one provider key one tenant could
otherwise fill the organisation's storage (real openai, anthropic and google-genai SDKs; two gateway replicas
on one real redis-server, the mock in-process)."""

from __future__ import annotations

import asyncio
import io
from contextlib import ExitStack

import anthropic
import httpx
import openai
import pytest
import redis
from google import genai
from google.genai import errors as genai_errors

from prefixgate.gateway.file_quota import HELD, FileQuota
from prefixgate.policies import PolicyError, hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_files_quota import file_code_execution_wrote
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for, shared_owner
from tests.support_services import ServerThread, wait_until

ACME, ACME_2, BETA, SMALL = "pg-acme-quota-012345", "pg-acme-quota-2-0123", "pg-beta-quota-012345", "pg-small-012345678"
SOLO, TINY = "pg-solo-quota-012345", "pg-tiny-quota-012345"
TINY_BYTES = 30         # tiny's uploads.max_mb, in bytes
FILES_BETA = "files-api-2025-04-14"
POLICY = {
    "routes": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
               {"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
               {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}],
    "keys": [{"name": "acme", "key_sha256": hash_key(ACME), "tenant": "acme", "uploads": {"max_files": 2}},
             {"name": "acme-2", "key_sha256": hash_key(ACME_2), "tenant": "acme", "uploads": {"max_files": 2}},
             {"name": "beta", "key_sha256": hash_key(BETA), "tenant": "beta"},
             {"name": "small", "key_sha256": hash_key(SMALL), "tenant": "small", "uploads": {"max_mb": 0.01}},
             {"name": "solo", "key_sha256": hash_key(SOLO), "tenant": "solo", "uploads": {"max_files": 1}},
             {"name": "tiny", "key_sha256": hash_key(TINY), "tenant": "tiny",
              "uploads": {"max_mb": TINY_BYTES / 1024 / 1024}}]}


@pytest.fixture
def replicas(tmp_path, redis_url, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-gateway-own-000000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-gateway-own-0000")
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaFilesQuota0000000000000000000000")
    with ExitStack() as stack:
        mock = stack.enter_context(ServerThread(mock_app(MockContext()))).url
        urls = []
        for name in ("a", "b"):
            folder = tmp_path / name
            folder.mkdir()
            settings = settings_for(mock, folder, redis_url=redis_url)
            urls.append(stack.enter_context(running_gateway(settings, policy=policy_for(settings, POLICY))).url)
        yield urls


def counted(redis_url: str, tenant: str, file_id: str, size: int | None = None) -> None:
    """Until the replicas' shared quota counts `tenant`'s file `file_id` (as `size` bytes): a file code execution
    wrote is counted after its answer went out, and its size once the provider's metadata gives it
    (gateway/written_files.py); another replica knows of it from then."""
    shared = redis.Redis.from_url(redis_url)

    def there() -> bool:
        found = shared.hget(f"prefixgate:files:stored:tenant:{tenant}", file_id)
        return found is not None and (size is None or int(found) == size)
    wait_until(there, 10, f"{tenant}'s written file counted" + (f" as {size} bytes" if size is not None else ""))


def oai(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key)     # the SDK's own retries: a refusal is not retried


def test_a_tenants_stored_files_are_bounded_across_replicas(replicas, redis_url):
    a, b = replicas
    kept = [oai(a, ACME).files.create(file=(f"n{i}.txt", b"note"), purpose="user_data") for i in range(2)]
    shared_owner(redis_url, "file", kept[0].id)     # replica b deletes it below
    # Its third file, through the other replica and its other key: refused in each SDK's format, a 403.
    with pytest.raises(openai.PermissionDeniedError) as refused:
        oai(b, ACME_2).files.create(file=("n3.txt", b"note"), purpose="user_data")
    assert "uploads.max_files" in refused.value.message and refused.value.body["param"] == "file"
    with pytest.raises(anthropic.PermissionDeniedError) as refused:
        anthropic.Anthropic(base_url=b, api_key=ACME).beta.files.upload(file=("n.txt", b"note", "text/plain"),
                                                                        betas=[FILES_BETA])
    assert refused.value.body["error"]["type"] == "permission_error"
    gemini = genai.Client(api_key=ACME, http_options={"base_url": a})
    with pytest.raises(genai_errors.ClientError) as refused:
        gemini.files.upload(file=io.BytesIO(b"note"), config={"mime_type": "text/plain"})
    assert refused.value.code == 403 and "uploads.max_files" in refused.value.message
    # Another tenant is not held to acme's files.
    assert oai(b, BETA).files.create(file=("n.txt", b"note"), purpose="user_data").id
    # A file deleted (through the other replica) frees its share, for either replica.
    assert oai(b, ACME_2).files.delete(kept[0].id).deleted is True
    assert oai(a, ACME).files.create(file=("n3.txt", b"note"), purpose="user_data").id


def test_a_tenants_stored_bytes_are_bounded(replicas):
    a, b = replicas
    limit = int(0.01 * 1024 * 1024)     # 10,485 bytes
    first = oai(a, SMALL).files.create(file=("six.txt", b"x" * 6000), purpose="user_data")
    with pytest.raises(openai.PermissionDeniedError) as refused:
        oai(b, SMALL).files.create(file=("six.txt", b"x" * 6000), purpose="user_data")
    assert "uploads.max_mb" in refused.value.message
    assert oai(b, SMALL).files.create(file=("small.txt", b"x" * (limit - 6000 - 1000)), purpose="user_data").id
    oai(a, SMALL).files.delete(first.id)
    assert oai(b, SMALL).files.create(file=("six.txt", b"x" * 6000), purpose="user_data").id
    # A body sent without a content-length is measured before it goes on: 12,000 bytes pass the limit alone.
    form = httpx.Request("POST", f"{a}/v1/files", files={"file": ("c.txt", b"x" * 12000)}, data={"purpose": "user_data"})
    body = form.read()
    sent = httpx.post(f"{a}/v1/files", content=iter([body[:5000], body[5000:]]),
                      headers={"authorization": f"Bearer {SMALL}", "content-type": form.headers["content-type"]})
    assert sent.status_code == 403 and "uploads.max_mb" in sent.json()["error"]["message"]
    assert "c.txt" not in [f.filename for f in oai(a, SMALL).files.list()]


def test_an_upload_under_way_counts_against_another(replicas):
    a, b = replicas
    # A Gemini resumable upload started on replica a: its file is under way until the last chunk.
    started = httpx.post(f"{a}/upload/v1beta/files", json={"file": {"displayName": "n"}}, headers={
        "x-goog-api-key": SOLO, "x-goog-upload-protocol": "resumable", "x-goog-upload-command": "start",
        "x-goog-upload-header-content-length": "4", "x-goog-upload-header-content-type": "text/plain"})
    # Meanwhile the tenant's one file is taken: another upload, on replica b, is refused.
    with pytest.raises(openai.PermissionDeniedError):
        oai(b, SOLO).files.create(file=("n.txt", b"note"), purpose="user_data")
    done = httpx.post(started.headers["x-goog-upload-url"], content=b"note",
                      headers={"x-goog-upload-command": "upload, finalize", "x-goog-upload-offset": "0"})
    assert done.headers["x-goog-upload-status"] == "final"
    with pytest.raises(openai.PermissionDeniedError):     # now the file itself, counted once
        oai(b, SOLO).files.create(file=("n.txt", b"note"), purpose="user_data")
    gemini = genai.Client(api_key=SOLO, http_options={"base_url": a})     # held while used
    gemini.files.delete(name=done.json()["file"]["name"])
    assert oai(b, SOLO).files.create(file=("n.txt", b"note"), purpose="user_data").id


@pytest.mark.parametrize(("uploads", "error"), [
    ({"max_mb": -1}, "keys.0.uploads.max_mb"), ({"max_files": 1.5}, "keys.0.uploads.max_files"),
    ({"max_gb": 1}, "keys.0.uploads.max_gb"), ({}, "keys.0.uploads"), ([1], "keys.0.uploads")])
def test_an_upload_limit_is_checked_when_the_policy_loads(tmp_path, uploads, error):
    key = {"name": "k", "key_sha256": hash_key(ACME), "uploads": uploads}
    with pytest.raises(PolicyError) as refused:
        policy_for(settings_for("http://127.0.0.1:9", tmp_path), {**POLICY, "keys": [key]})
    assert error in str(refused.value)


def test_a_file_code_execution_wrote_counts_toward_the_tenants_files(replicas, monkeypatch):
    a, b = replicas
    add = FileQuota._added

    async def slowly(self, owner, ident, size, ttl_s):     # a stored file counted takes 0.3 s to reach Redis
        if not ident.startswith(HELD):                      # (an upload's hold as ever: the upload checks at once)
            await asyncio.sleep(0.3)
        await add(self, owner, ident, size, ttl_s)

    monkeypatch.setattr(FileQuota, "_added", slowly)
    claude = anthropic.Anthropic(base_url=a, api_key=SOLO)
    written = file_code_execution_wrote(claude)
    # It lies in the organisation's storage as an upload would: the tenant's one file, on either replica, from
    # the moment its answer arrives (nothing here waits for Redis).
    with pytest.raises(openai.PermissionDeniedError) as refused:
        oai(b, SOLO).files.create(file=("n.txt", b"note"), purpose="user_data")
    assert "uploads.max_files" in refused.value.message
    claude.beta.files.delete(written, betas=[FILES_BETA])
    assert oai(b, SOLO).files.create(file=("n.txt", b"note"), purpose="user_data").id


def test_a_file_code_execution_wrote_counts_its_size_toward_the_tenants_bytes(replicas, redis_url):
    a, b = replicas
    claude = anthropic.Anthropic(base_url=a, api_key=TINY)
    written = file_code_execution_wrote(claude)
    # Its size is the provider's (the file's metadata), not the 0 bytes the answer names.
    size = claude.beta.files.retrieve_metadata(written, betas=[FILES_BETA]).size_bytes
    assert size == 21
    counted(redis_url, "tiny", written, size)
    # An OpenAI Upload holds exactly the bytes it declares (a Files upload's multipart body holds more).
    with pytest.raises(openai.PermissionDeniedError, match="uploads.max_mb"):
        declared(oai(b, TINY), TINY_BYTES - size + 1)
    assert declared(oai(b, TINY), TINY_BYTES - size).status == "pending"
    claude.beta.files.delete(written, betas=[FILES_BETA])
    assert declared(oai(a, TINY), size).status == "pending"


def declared(client: openai.OpenAI, size: int):  # noqa: ANN201 (the SDK's Upload)
    return client.uploads.create(bytes=size, filename="n.txt", mime_type="text/plain", purpose="user_data")


def test_an_empty_files_deletion_frees_its_share(replicas, redis_url):
    a, b = replicas
    empty = oai(a, SOLO).files.create(file=("empty.txt", b""), purpose="user_data")
    assert empty.bytes == 0
    shared_owner(redis_url, "file", empty.id)       # replica b deletes it below
    with pytest.raises(openai.PermissionDeniedError):
        oai(b, SOLO).files.create(file=("n.txt", b"note"), purpose="user_data")
    oai(b, SOLO).files.delete(empty.id)
    assert oai(a, SOLO).files.create(file=("n.txt", b"note"), purpose="user_data").id
