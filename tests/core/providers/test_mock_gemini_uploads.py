"""The mock's Gemini resumable upload refuses a malformed start or chunk with Google's 400 INVALID_ARGUMENT, as
the Files API does, rather than a 500: a start whose metadata is not JSON or not an object, and a byte count
or offset header that is not a number."""

from __future__ import annotations

import httpx
import pytest

KEY = {"x-goog-api-key": "AIzaMockUploadsKey000000000000"}
START = {**KEY, "x-goog-upload-protocol": "resumable", "x-goog-upload-command": "start"}


@pytest.mark.parametrize("headers,body", [
    ({}, b"{not json"),
    ({}, b'{"file": "notes.txt"}'),
    ({"x-goog-upload-header-content-length": "four"}, b'{"file": {"displayName": "notes"}}'),
])
def test_a_malformed_start_is_a_400(mock_server, headers, body):
    url, _ = mock_server
    answer = httpx.post(f"{url}/upload/v1beta/files", headers={**START, **headers}, content=body)
    assert answer.status_code == 400 and answer.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_a_chunk_at_an_offset_that_is_not_a_number_is_a_400(mock_server):
    url, _ = mock_server
    started = httpx.post(f"{url}/upload/v1beta/files", json={"file": {"displayName": "notes"}},
                         headers={**START, "x-goog-upload-header-content-length": "4"})
    chunk = httpx.post(started.headers["x-goog-upload-url"], content=b"note",
                       headers={"x-goog-upload-command": "upload, finalize", "x-goog-upload-offset": "start"})
    assert chunk.status_code == 400 and chunk.json()["error"]["status"] == "INVALID_ARGUMENT"
