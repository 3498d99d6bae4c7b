"""A Claude caller's document block whose `source` is not an object (`"source": "x"`, which Anthropic refuses) is its
400 naming the block before anything is sent, on every route and on count_tokens too: a count the gateway makes
itself (a route ending at another provider) answered it with a token count (200), as if the document were empty."""

from __future__ import annotations

import httpx
import pytest

from tests.gateway.support_gateway import keyed_stack

HEADERS = {"x-api-key": "pg-k", "anthropic-version": "2023-06-01"}
MESSAGES = [{"role": "user", "content": [{"type": "text", "text": "Summarise it."}, {"type": "document", "source": "x"}]}]


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with keyed_stack(tmp_path_factory.mktemp("doc")) as stack:
        yield stack


@pytest.mark.parametrize("model", ["claude-sonnet-5-5", "gpt-5.4", "gemini-3.5-flash"])
@pytest.mark.parametrize("path,extra", [("/v1/messages", {"max_tokens": 50}), ("/v1/messages/count_tokens", {})])
def test_a_document_source_that_is_not_an_object(gw, model, path, extra):
    server, up = gw
    answer = httpx.post(server.url + path, headers=HEADERS, json={"model": model, "messages": MESSAGES, **extra})
    assert answer.status_code == 400 and answer.json()["error"]["type"] == "invalid_request_error"
    assert answer.json()["error"]["message"] == "messages.0.content.1.source: expected an object, got a string"
    assert up.received == []
