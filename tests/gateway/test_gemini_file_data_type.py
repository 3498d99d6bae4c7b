"""A Gemini caller's `fileData` of the wrong shape (a `fileUri` that is not a string, a fileData that is not an object:
Google refuses both) is its 400 naming the field before anything is sent: a countTokens the gateway answers itself
(a route ending at Anthropic or OpenAI) counted it as an empty part (200)."""

from __future__ import annotations

import httpx
import pytest

from tests.gateway.support_gateway import keyed_stack

KEY = {"x-goog-api-key": "pg-k"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with keyed_stack(tmp_path_factory.mktemp("fd")) as stack:
        yield stack


@pytest.mark.parametrize("model", ["claude-sonnet-5-5", "gpt-5.4"])
@pytest.mark.parametrize("method", ["countTokens", "generateContent"])
@pytest.mark.parametrize("file_data,field,got", [
    ({"fileUri": 5, "mimeType": "application/pdf"}, "contents.0.parts.1.fileData.fileUri", "a string, got a number"),
    ({"fileUri": "https://x.test/a.pdf", "mimeType": ["application/pdf"]}, "contents.0.parts.1.fileData.mimeType",
     "a string, got an array"),
    ("files/abc", "contents.0.parts.1.fileData", "an object, got a string"),
])
def test_a_file_data_of_the_wrong_shape(gw, model, method, file_data, field, got):
    server, up = gw
    contents = [{"role": "user", "parts": [{"text": "Summarise it."}, {"fileData": file_data}]}]
    answer = httpx.post(f"{server.url}/v1beta/models/{model}:{method}", headers=KEY, json={"contents": contents})
    assert answer.status_code == 400 and answer.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert answer.json()["error"]["message"] == f"{field}: expected {got}"
    assert up.received == []
