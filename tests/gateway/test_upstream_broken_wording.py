"""An upstream whose connection breaks (a body cut off after its 200, a stream that breaks) is the gateway's own
finding, not a provider's words: the caller's error and the ledger's `error` name the upstream, as a timeout's
("upstream 'openai' timed out") and an unreachable one's do, never a bare "response cut off (...)" (as 923df6f
left them). The provider's own messages go on unprefixed (test_upstream_not_found_wording.py). Real openai SDK."""

from __future__ import annotations

import openai
import pytest

from prefixgate.ledger import read_records
from tests.gateway.support_gateway import policy_stack
from tests.support_services import wait_until

POLICY = {"routes": [{"name": "gpt", "models": ["gpt-*"], "retry": {"attempts": 1},
                      "targets": [{"upstream": "openai"}]}]}
MSG = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with policy_stack(tmp_path_factory.mktemp("broken"), POLICY) as parts:
        yield parts


def error_of(settings, rid: str) -> str:
    wait_until(lambda: any(r["id"] == rid for r in read_records(settings.ledger_path)), 5, "ledger record")
    return next(r for r in read_records(settings.ledger_path) if r["id"] == rid)["error"]


def test_a_whole_answer_cut_off_names_its_upstream(stack):
    up, gw, settings = stack
    up.reset()
    up.fail("drop")
    client = openai.OpenAI(api_key="caller", base_url=gw.url + "/v1", max_retries=0)
    with pytest.raises(openai.APIStatusError) as cut:
        client.chat.completions.create(model="gpt-5.4", messages=MSG, max_tokens=50)
    assert cut.value.status_code == 502 and cut.value.body["message"].startswith("upstream 'openai'")
    assert error_of(settings, cut.value.response.headers["x-prefixgate-request-id"]).startswith("upstream 'openai'")


def test_a_stream_broken_off_names_its_upstream(stack):
    up, gw, settings = stack
    up.reset()
    up.fail("drop")
    client = openai.OpenAI(api_key="caller", base_url=gw.url + "/v1", max_retries=0)
    stream = client.chat.completions.create(model="gpt-5.4", messages=MSG, stream=True)
    with pytest.raises(openai.APIError):
        for _ in stream:
            pass
    assert error_of(settings, stream.response.headers["x-prefixgate-request-id"]).startswith("upstream 'openai'")
