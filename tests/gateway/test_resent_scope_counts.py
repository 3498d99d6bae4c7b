"""A token count's body is remembered for its own party alone, as a model request's is (`dialects.resent.SCOPE`): a
remembered body is found only by requests of the party that sent it, so no tenant learns from parse times what another
sent. The count endpoints parsed their bodies before the party was set, so every tenant's counts shared one scope: a
tenant resending the start of another's conversation to count it took up the other's parsed turns. Real anthropic and
openai clients against mock-providers."""

from __future__ import annotations

import anthropic
import openai
import pytest

from prefixgate.dialects import anthropic as messages_format
from prefixgate.dialects import responses as responses_format
from prefixgate.policies.schema import hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread

ACME, GLOBEX = "pg-count-scope-acme-0001", "pg-count-scope-globex-0001"
TURNS = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"Turn {i}: the warranty covers parts. " * 20}
         for i in range(40)]       # ~32 kB: a body the memo remembers
NEXT = [*TURNS, {"role": "user", "content": "And labour?"}]


@pytest.fixture
def gateway(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-count-scope-0001")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-count-scope-0001")
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path)
        policy = policy_for(settings, {
            "routes": [{"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
                       {"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}],
            "keys": [{"name": "acme-app", "key_sha256": hash_key(ACME), "tenant": "acme"},
                     {"name": "globex-app", "key_sha256": hash_key(GLOBEX), "tenant": "globex"}]})
        with running_gateway(settings, policy=policy) as gw:
            yield gw.url


def _claude(url: str, key: str, messages: list[dict]) -> None:
    client = anthropic.Anthropic(api_key=key, base_url=url, max_retries=0)
    assert client.messages.count_tokens(model="claude-sonnet-5-5", messages=messages).input_tokens > 0


def _gpt(url: str, key: str, messages: list[dict]) -> None:
    client = openai.OpenAI(api_key=key, base_url=url + "/v1", max_retries=0)
    assert client.responses.input_tokens.count(model="gpt-5.4", input=messages).input_tokens > 0


@pytest.mark.parametrize(("count", "bodies"), [(_claude, messages_format.BODIES), (_gpt, responses_format.BODIES)],
                         ids=["messages", "responses"])
def test_a_count_is_found_only_by_its_own_partys_counts(gateway, count, bodies):
    bodies.clear()                      # its entries; its counts run on over the whole test session
    hits, misses = bodies.hits, bodies.misses
    count(gateway, ACME, TURNS)
    count(gateway, GLOBEX, NEXT)        # another tenant's resend: parsed afresh
    assert (bodies.hits - hits, bodies.misses - misses) == (0, 2)
    count(gateway, ACME, NEXT)          # the party's own: its turns taken up
    assert bodies.hits - hits == 1
