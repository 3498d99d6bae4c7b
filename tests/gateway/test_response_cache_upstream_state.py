"""The response cache and what the provider keeps for the caller (docs/response-cache.md): a replay must not hand
out what the upstream no longer has or never made, nor answer from a prompt template the operator has since
republished. Driven with the real openai client against mock-providers."""

from __future__ import annotations

import pytest
from google import genai

from tests.gateway.support_response_cache import KEYS, cache_stack, policy
from tests.gateway.test_response_cache import CACHE, chat, oa, streamed_chat

ON = {"mode": "on"}


def test_a_chat_completion_the_caller_asks_to_store_upstream_bypasses_the_cache(tmp_path):
    # OpenAI keeps each `store: true` completion (GET /v1/chat/completions/{id}, its list, evals and distillation):
    # a replay keeps none, and a streamed one names an id the upstream never stored.
    with cache_stack(tmp_path, policy(gpt=ON)) as (up, gw, _):
        client = oa(gw)
        assert chat(client, store=True)[1] == "bypass" and chat(client, store=True)[1] == "bypass"
        assert streamed_chat(client, store=True)[1] == "bypass" and len(up.posts) == 3
        # Not stored upstream: cached as ever.
        assert chat(client, store=False)[1] == "miss" and chat(client, store=False)[1] == "hit" and len(up.posts) == 4


def test_an_unversioned_prompt_template_bypasses_and_a_versioned_one_is_cached(tmp_path):
    # A Responses `prompt` without `version` is answered from the template's current version: once the operator
    # publishes another, an entry keyed by the id alone would replay the old template's answer.
    with cache_stack(tmp_path, policy(gpt=ON)) as (up, gw, _):
        client = oa(gw)
        template = {"id": "pmpt_68b5e1f0c9a48190a1b2c3d4e5f60718", "variables": {"customer": "Ada"}}

        def ask(prompt: dict) -> str | None:
            raw = client.responses.with_raw_response.create(model="gpt-5.5", prompt=prompt, input="Where is my order?")
            return raw.headers.get(CACHE)

        assert ask(template) == "bypass" and ask(template) == "bypass" and len(up.posts) == 2
        pinned = {**template, "version": "3"}
        assert ask(pinned) == "miss" and ask(pinned) == "hit" and len(up.posts) == 3


@pytest.mark.parametrize("store", ["memory", "redis"])
def test_a_response_deleted_through_the_gateway_is_never_replayed_under_its_id(tmp_path, request, store):
    # After DELETE /v1/responses/{id} the upstream has no such response: a replay naming it would hand the caller
    # an id that a retrieve or a previous_response_id answers 404 to (and keep what the caller asked to erase).
    settings = {"redis_url": request.getfixturevalue("redis_url")} if store == "redis" else {}
    with cache_stack(tmp_path, policy(gpt=ON), **settings) as (up, gw, _):
        client = oa(gw)
        ask = dict(model="gpt-5.5", input="What does a prefix cache keep?")
        first = client.responses.create(**ask)
        with client.responses.stream(**ask) as stream:
            assert stream.get_final_response().id == first.id and len(up.posts) == 1    # a hit, under the stored id
        client.responses.delete(first.id)
        raw = client.responses.with_raw_response.create(**ask)
        again = raw.parse()
        assert raw.headers[CACHE] == "miss" and len(up.posts) == 2 and again.id != first.id
        assert client.responses.retrieve(again.id).output_text == again.output_text
        assert client.responses.with_raw_response.create(**ask).parse().id == again.id and len(up.posts) == 2


def test_an_interaction_deleted_through_the_gateway_is_never_replayed_under_its_id(tmp_path):
    with cache_stack(tmp_path, policy(gemini=ON)) as (up, gw, _):
        client = genai.Client(api_key=KEYS["ACME_KEY"], http_options={"base_url": gw.url, "api_version": "v1beta"})
        ask = dict(model="gemini-3.8-flash", input="What does a prefix cache keep?")
        first = client.interactions.create(**ask)
        assert client.interactions.create(**ask).id == first.id and len(up.posts) == 1      # a hit, under the stored id
        client.interactions.delete(first.id)
        again = client.interactions.create(**ask)
        assert again.id != first.id and len(up.posts) == 2 and client.interactions.get(again.id).id == again.id
