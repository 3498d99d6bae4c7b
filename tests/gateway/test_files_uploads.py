"""OpenAI's Uploads API through a keyed gateway (`/v1/uploads`: what the openai SDK's `upload_file_chunked` and files
over 512 MB use), with the real openai SDK against the mock: the Upload and its Parts are the creating tenant's
(another tenant's id is OpenAI's 404), the File it makes is the tenant's like a Files upload, and the `bytes`
declared at create count toward the key's `uploads.max_mb` until the Upload is completed, cancelled or expires
(an hour, passed here on a clock the gateway and the mock share)."""

from __future__ import annotations

import hashlib
import http.client
import json
from contextlib import ExitStack
from urllib.parse import urlsplit

import httpx
import openai
import pytest

from prefixgate.clock import OffsetClock
from prefixgate.policies import hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.gateway.support_sdk_clients import oai
from tests.support_services import ServerThread

ACME_1, ACME_2, BETA = "pg-acme-upl-0123456789", "pg-acme-upl2-012345678", "pg-beta-upl-0123456789"
GAMMA = "pg-gamma-upl-012345678"
LIMIT, GAMMA_LIMIT = 10_000, 100_000        # acme's and gamma's uploads.max_mb, in bytes
POLICY = {"routes": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}],
          "keys": [{"name": "acme-app", "key_sha256": hash_key(ACME_1), "tenant": "acme",
                    "uploads": {"max_mb": LIMIT / 1024 / 1024}},
                   {"name": "acme-batch", "key_sha256": hash_key(ACME_2), "tenant": "acme",
                    "uploads": {"max_mb": LIMIT / 1024 / 1024}},
                   {"name": "beta", "key_sha256": hash_key(BETA), "tenant": "beta"},
                   {"name": "gamma", "key_sha256": hash_key(GAMMA), "tenant": "gamma",
                    "uploads": {"max_mb": GAMMA_LIMIT / 1024 / 1024}}]}
REPORT = b"Q3 report for acme: revenue was 4417 units, churn fell to 2 percent, and the launch moved to May.\n" * 40
PART = 64 * 1024 * 1024     # OpenAI: "Each Part can be at most 64 MB" (the SDK's DEFAULT_PART_SIZE, 67108864)


@pytest.fixture
def gateway(tmp_path, monkeypatch):
    """(gateway URL, the shared clock's offset file)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-gateway-own-000000")
    offset = tmp_path / "clock-offset"
    with ExitStack() as stack:
        mock = stack.enter_context(ServerThread(mock_app(MockContext(clock=OffsetClock(str(offset)))))).url
        settings = settings_for(mock, tmp_path, clock_offset_file=str(offset))
        yield stack.enter_context(running_gateway(settings, policy=policy_for(settings, POLICY))).url, offset


def new_upload(client: openai.OpenAI, size: int):  # noqa: ANN201 (the SDK's Upload)
    return client.uploads.create(bytes=size, filename="notes.txt", mime_type="text/plain", purpose="user_data")


def test_a_chunked_upload_makes_the_tenants_file(gateway, tmp_path):
    gw, _ = gateway
    acme = oai(gw, ACME_1)
    made = acme.uploads.upload_file_chunked(file=REPORT, filename="q3.txt", bytes=len(REPORT), mime_type="text/plain",
                                            purpose="user_data", part_size=1500, md5=hashlib.md5(REPORT).hexdigest())
    assert (made.status, made.file.bytes, made.file.filename) == ("completed", len(REPORT), "q3.txt")
    # The File is the tenant's, through its other key too: read back whole, listed, read by a model request.
    assert oai(gw, ACME_2).files.content(made.file.id).read() == REPORT
    assert made.file.id in [f.id for f in oai(gw, ACME_2).files.list()]
    asked = [{"role": "user", "content": [{"type": "file", "file": {"file_id": made.file.id}},
                                          {"type": "text", "text": "Summarise the attached report."}]}]
    assert oai(gw, ACME_2).chat.completions.create(model="gpt-5.4", messages=asked).usage.prompt_tokens > 800
    # Another tenant: OpenAI's 404 for a file its organisation does not hold, and not in its list.
    with pytest.raises(openai.NotFoundError) as refused:
        oai(gw, BETA).files.retrieve(made.file.id)
    assert refused.value.body["message"] == f"No such File object: {made.file.id}"
    assert made.file.id not in [f.id for f in oai(gw, BETA).files.list()]
    # From a file on disk, in the SDK's default 64 MB parts (one here).
    path = tmp_path / "notes.txt"
    path.write_bytes(b"a short note\n")
    assert acme.uploads.upload_file_chunked(file=path, mime_type="text/plain", purpose="user_data").file.bytes == 13


def test_another_tenants_upload_is_openais_404(gateway):
    gw, _ = gateway
    acme, beta = oai(gw, ACME_1), oai(gw, BETA)
    upload = new_upload(acme, 10)
    for attempt in (lambda: beta.uploads.parts.create(upload.id, data=b"0123456789"),
                    lambda: beta.uploads.complete(upload.id, part_ids=[]), lambda: beta.uploads.cancel(upload.id)):
        with pytest.raises(openai.NotFoundError) as refused:
            attempt()
        assert refused.value.body["message"] == f"No such Upload object: {upload.id}"
    # Its own tenant's other key carries on with it: beta's cancel did nothing.
    part = oai(gw, ACME_2).uploads.parts.create(upload.id, data=b"0123456789")
    assert acme.uploads.complete(upload.id, part_ids=[part.id]).file.bytes == 10
    # What the provider checks, it answers as it does: parts that are not the declared bytes, a wrong md5.
    short = new_upload(acme, 10)
    part = acme.uploads.parts.create(short.id, data=b"01234")
    with pytest.raises(openai.BadRequestError, match="not the 10 bytes"):
        acme.uploads.complete(short.id, part_ids=[part.id])
    with pytest.raises(openai.BadRequestError, match="md5"):
        acme.uploads.complete(short.id, part_ids=[part.id, acme.uploads.parts.create(short.id, data=b"56789").id],
                              md5="0" * 32)
    # A Part over 64 MB is refused on its declared length, before a byte of it is sent.
    assert part_head_answer(gw, short.id, PART + 1024 * 1024) == (413, "data")
    # Only OpenAI's API has Uploads: an Anthropic client's call is a 404 in its own shape.
    other = httpx.post(f"{gw}/v1/uploads", json={}, headers={"x-api-key": ACME_1, "anthropic-version": "2023-06-01"})
    assert other.status_code == 404 and other.json()["error"]["type"] == "not_found_error"


def part_head_answer(url: str, upload_id: str, length: int) -> tuple[int, str]:
    """(status, error param) of a Part whose head declares `length` bytes and whose body never comes."""
    conn = http.client.HTTPConnection(urlsplit(url).netloc, timeout=10)
    try:
        conn.putrequest("POST", f"/v1/uploads/{upload_id}/parts")
        for name, value in (("authorization", f"Bearer {ACME_1}"), ("content-length", str(length)),
                            ("content-type", "multipart/form-data; boundary=x")):
            conn.putheader(name, value)
        conn.endheaders()
        answer = conn.getresponse()
        return answer.status, json.loads(answer.read())["error"]["param"]
    finally:
        conn.close()


def test_declared_bytes_count_from_the_create_until_the_upload_ends(gateway):
    gw, offset = gateway
    acme = oai(gw, ACME_1)
    pending = new_upload(acme, 6000)
    # 6,000 bytes are under way: 5,000 more would pass acme's 10,000, through either API and either key.
    with pytest.raises(openai.PermissionDeniedError, match="uploads.max_mb"):
        new_upload(oai(gw, ACME_2), 5000)
    with pytest.raises(openai.PermissionDeniedError, match="uploads.max_mb"):
        acme.files.create(file=("n.txt", b"x" * 5000), purpose="user_data")
    assert oai(gw, BETA).files.create(file=("n.txt", b"x" * 5000), purpose="user_data").id     # another tenant's own
    # Cancelled, its bytes are free again.
    assert acme.uploads.cancel(pending.id).status == "cancelled"
    second = new_upload(acme, 5000)
    # Completed, the File counts instead (5,000 bytes, once).
    part = acme.uploads.parts.create(second.id, data=b"y" * 5000)
    assert acme.uploads.complete(second.id, part_ids=[part.id]).status == "completed"
    with pytest.raises(openai.PermissionDeniedError, match="uploads.max_mb"):
        new_upload(acme, 5500)
    # Left pending, an Upload expires after an hour, and its bytes with it.
    new_upload(acme, 4000)
    with pytest.raises(openai.PermissionDeniedError, match="uploads.max_mb"):
        new_upload(acme, 1500)
    offset.write_text(str(3601))
    assert new_upload(acme, 4500).status == "pending"


def test_parts_past_the_declared_bytes_count_too(gateway):
    gw, offset = gateway
    gamma = oai(gw, GAMMA)
    upload = new_upload(gamma, 30_000)
    # The provider keeps every Part until the Upload's hour is out, whatever was declared: Parts past the 30,000
    # declared bytes fill gamma's 100,000 as uploads would, and are refused past it.
    accepted = []
    with pytest.raises(openai.PermissionDeniedError, match="uploads.max_mb"):
        for _ in range(10):
            accepted.append(gamma.uploads.parts.create(upload.id, data=b"z" * 30_000).id)
    assert 2 <= len(accepted) <= GAMMA_LIMIT // 30_000 + 1
    assert gamma.uploads.complete(upload.id, part_ids=accepted[:1]).file.bytes == 30_000
    with pytest.raises(openai.PermissionDeniedError, match="uploads.max_mb"):
        new_upload(gamma, GAMMA_LIMIT - 30_000)
    offset.write_text(str(3601))        # the Upload's hour is out: its other Parts are gone, only the File counts
    assert new_upload(gamma, GAMMA_LIMIT - 30_000).status == "pending"
