"""The response cache on an open gateway (no keys: each caller brings its own provider key) and answers deleted
through it, whatever Redis was doing then: a request continuing a deleted response must go upstream (which refuses it), never be replayed from
an entry stored while that response existed. A keyed gateway refuses it before the lookup (the id's owner is
forgotten); an open one has no owners to forget. Driven with the real openai client against mock-providers."""

from __future__ import annotations

import signal

import openai
import pytest

from tests.gateway.support_response_cache import cache_stack
from tests.gateway.test_counters_outage_memory import stoppable_redis  # noqa: F401  (a fixture)
from tests.support_services import wait_until

CACHE = "x-prefixgate-response-cache"


def open_policy() -> dict:
    return {"routes": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}],
                        "response_cache": {"mode": "on"}}]}


@pytest.mark.parametrize("store", ["memory", "redis"])
def test_a_request_continuing_a_response_deleted_through_an_open_gateway_is_not_replayed(tmp_path, request, store):
    settings = {"redis_url": request.getfixturevalue("redis_url")} if store == "redis" else {}
    with cache_stack(tmp_path, open_policy(), **settings) as (up, gw, _):
        client = openai.OpenAI(api_key="sk-caller-own-key", base_url=gw.url + "/v1", max_retries=0)
        first = client.responses.create(model="gpt-5.4", input="Name a prime number.")
        follow = dict(model="gpt-5.4", input="And the next one?", previous_response_id=first.id)
        assert client.responses.with_raw_response.create(**follow).headers[CACHE] == "miss"
        assert client.responses.with_raw_response.create(**follow).headers[CACHE] == "hit" and len(up.posts) == 2
        client.responses.delete(first.id)
        # OpenAI refuses a previous_response_id it no longer has (400, "Previous response with id ... not found."):
        # so must the gateway, rather than replay the answer continuing what the caller erased.
        with pytest.raises(openai.BadRequestError, match="not found"):
            client.responses.create(**follow)
        assert len(up.posts) == 3


def test_a_response_deleted_while_redis_blipped_is_never_replayed_once_it_answers(tmp_path, stoppable_redis):  # noqa: F811
    # The DELETE reaches OpenAI, but Redis (where the entry lives, for every replica) does not answer the forget:
    # the entry used to stay, handing out the deleted id for its whole TTL.
    proc, url = stoppable_redis
    with cache_stack(tmp_path, open_policy(), redis_url=url) as (up, gw, _):
        client = openai.OpenAI(api_key="sk-caller-own-key", base_url=gw.url + "/v1", max_retries=0)
        ask = dict(model="gpt-5.4", input="Name a prime number.")
        first = client.responses.create(**ask)
        assert client.responses.create(**ask).id == first.id and len(up.posts) == 1     # a hit
        proc.send_signal(signal.SIGSTOP)
        try:
            client.responses.delete(first.id)
        finally:
            proc.send_signal(signal.SIGCONT)       # Redis answers again
        # The forget that timed out rests every client of that Redis for its retry window (docs/reliability.md):
        # the cache is bypassed meanwhile (upstream), then answers again, and the entry is gone by then.
        answers: list[tuple[str, str]] = []

        def answering() -> bool:
            raw = client.responses.with_raw_response.create(**ask)
            answers.append((raw.headers[CACHE], raw.parse().id))
            return answers[-1][0] != "bypass"
        wait_until(answering, 10, "the response cache answering again")
        assert answers[-1][0] == "miss" and first.id not in {ident for _, ident in answers}
        assert len(up.posts) == 1 + len(answers)
