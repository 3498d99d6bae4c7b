"""A Gemini countTokens body may wrap its request in `generateContentRequest` (the Gemini API's way to count a system
instruction and tools with the contents: ai.google.dev/api/tokens). On a route whose target speaks another format
the gateway counts it itself, and refused that form as `contents: field required`; it now counts what the wrapped
request holds, and a wrapped request of the wrong type is the caller's 400 naming the field."""

from __future__ import annotations

import httpx
import pytest

from tests.gateway.support_gateway import keyed_stack

KEY = {"x-goog-api-key": "pg-k"}
CONTENTS = [{"role": "user", "parts": [{"text": "What is the weather like in Paris this weekend?"}]}]
SYSTEM = {"parts": [{"text": "You are a terse assistant who answers about the weather in one short sentence."}]}


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with keyed_stack(tmp_path_factory.mktemp("count")) as stack:
        yield stack


def _count(server, model: str, body: dict) -> httpx.Response:
    return httpx.post(f"{server.url}/v1beta/models/{model}:countTokens", headers=KEY, json=body)


@pytest.mark.parametrize("model", ["claude-sonnet-5-5", "gpt-5.4"])
def test_a_wrapped_request_counts_what_it_holds(gw, model):
    server, up = gw
    plain = _count(server, model, {"contents": CONTENTS})
    wrapped = _count(server, model, {"generateContentRequest": {"model": f"models/{model}", "contents": CONTENTS}})
    with_system = _count(server, model, {"generateContentRequest": {"model": f"models/{model}", "contents": CONTENTS,
                                                                     "systemInstruction": SYSTEM}})
    assert [plain.status_code, wrapped.status_code, with_system.status_code] == [200, 200, 200]
    assert wrapped.json()["totalTokens"] == plain.json()["totalTokens"] > 0
    assert with_system.json()["totalTokens"] > plain.json()["totalTokens"]
    assert up.received == []


@pytest.mark.parametrize("wrapped", ["contents", CONTENTS])
def test_a_wrapped_request_of_the_wrong_type_is_the_callers_400(gw, wrapped):
    server, up = gw
    answer = _count(server, "claude-sonnet-5-5", {"generateContentRequest": wrapped})
    assert answer.status_code == 400 and answer.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert answer.json()["error"]["message"].startswith("generateContentRequest: expected an object")
    assert up.received == []
