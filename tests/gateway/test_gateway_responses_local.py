"""The Responses API to the bundled model: with no configuration, `responses.create` and `.stream` with
`model="smollm2-135m"` answer from the in-process engine (translated to its chat API and back), and a chain
that needs stored state at OpenAI is refused naming `previous_response_id`."""

from __future__ import annotations

import openai
import pytest

from prefixgate.gateway.app import create_app
from tests.gateway.support_gateway import zero_config_settings
from tests.support_services import ServerThread

INSTRUCTIONS = "You are a helpful assistant for ACME. Current time: 2026-11-22T10:0{}:00Z. " + "Be kind and brief. " * 60


def test_smollm2_answers_responses_calls_from_the_local_engine(tmp_path, monkeypatch):
    settings = zero_config_settings(tmp_path, monkeypatch)
    with ServerThread(create_app(settings)) as gw:
        client = openai.OpenAI(api_key="unused", base_url=gw.url + "/v1", max_retries=0)
        answers = [client.responses.create(model="smollm2-135m", instructions=INSTRUCTIONS.format(i), input="Say hi.",
                                           max_output_tokens=16, temperature=0) for i in range(2)]
        with client.responses.stream(model="smollm2-135m", input="Count to three.", max_output_tokens=16) as stream:
            events = list(stream)
        with pytest.raises(openai.BadRequestError) as err:
            client.responses.create(model="smollm2-135m", input="More.", previous_response_id=answers[0].id)
    first, second = answers
    assert first.output_text and first.model == "smollm2-135m" and first.usage.output_tokens > 0
    # The timestamp left the instructions, so the engine's prefix cache holds the second request's prefix.
    assert second.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens - 32
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert events[-1].response.usage.output_tokens > 0
    assert err.value.body["param"] == "previous_response_id"
