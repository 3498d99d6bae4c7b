"""The local engine's `/v1/responses`, driven by the real `openai` client over HTTP."""

from __future__ import annotations

import openai
import pytest

from tests.local_backend import test_server as chat_tests

MODEL = chat_tests.MODEL
# The chat tests' fixtures, registered here too: one server per module, as there.
server = chat_tests.server
client = chat_tests.client


def test_create_reports_usage_and_reads_the_prefix_cache(client) -> None:
    args = {"model": MODEL, "instructions": "You are terse. " * 8, "input": "Say hi", "max_output_tokens": 16,
            "temperature": 0}
    first = client.responses.create(**args)
    assert first.status in ("completed", "incomplete") and first.output[0].type == "message"
    assert first.usage.input_tokens > 30 and 1 <= first.usage.output_tokens <= 16
    again = client.responses.create(**args)
    assert again.output_text == first.output_text
    assert again.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens - 4


def test_stream_matches_the_plain_answer_with_the_full_event_sequence(client) -> None:
    args = {"model": MODEL, "input": "Count", "max_output_tokens": 16, "temperature": 0, "store": False}
    with client.responses.stream(**args) as stream:
        events = list(stream)
    # The SDK's get_final_response() wants response.completed; a reply cut at max_output_tokens ends
    # with response.incomplete, as OpenAI's does.
    final = events[-1].response
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-1] in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == final.output_text
    assert final.usage.output_tokens >= 1
    assert final.output_text == client.responses.create(**args).output_text


def test_stored_responses_chain_and_delete(client) -> None:
    first = client.responses.create(model=MODEL, input="Hello", max_output_tokens=16, temperature=0)
    chained = client.responses.create(model=MODEL, input="More", previous_response_id=first.id,
                                      max_output_tokens=16, temperature=0)
    assert chained.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    assert client.responses.retrieve(first.id).id == first.id
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input="x", previous_response_id=first.id)
    assert err.value.body["param"] == "previous_response_id"


@pytest.mark.parametrize(("extra", "param"), [
    ({"tools": [{"type": "function", "name": "f"}]}, "tools"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:,"}]}]}, "input.0.content.0.type"),
    ({"input": 3}, "input"),
])
def test_what_the_engine_cannot_do_is_a_400_naming_it(client, extra, param) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(**{"model": MODEL, "input": "x", **extra})
    assert err.value.body["param"] == param
