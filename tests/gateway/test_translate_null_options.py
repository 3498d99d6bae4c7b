"""An OpenAI option sent as null asks for its default (the API reference types them nullable: `n` "Defaults to 1"),
and openai-python sends an explicit None as null: translated to another provider, such a request is answered, not
refused for asking what it did not ask (`n: null` is one choice, not "n > 1")."""

from __future__ import annotations

import openai
import pytest

from tests.gateway.support_gateway import gateway_over_mock


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ANTHROPIC_API_KEY", "sk-ant-null-options-000")
    mp.setenv("GEMINI_API_KEY", "gemini-null-options-key-000")
    with gateway_over_mock(tmp_path_factory.mktemp("null")) as server:
        yield server.url
    mp.undo()


@pytest.mark.parametrize("model", ["claude-sonnet-5-5", "gemini-3.5-flash"])
def test_n_null_is_one_choice_on_another_provider(gateway_url, model):
    client = openai.OpenAI(api_key="pg-null-options", base_url=gateway_url + "/v1", max_retries=0)
    reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], n=None,
                                           max_tokens=96)  # Gemini's thinking counts against it
    assert len(reply.choices) == 1 and reply.choices[0].message.content


def test_n_two_is_still_refused_by_name(gateway_url):
    client = openai.OpenAI(api_key="pg-null-options", base_url=gateway_url + "/v1", max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="claude-sonnet-5-5", messages=[{"role": "user", "content": "hi"}], n=2,
                                       max_tokens=8)
    assert "n > 1" in str(refused.value)
