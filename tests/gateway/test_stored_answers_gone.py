"""A stored answer the caller deletes through the gateway once its provider no longer holds it (deleted there by an
operator's script, or expired): the provider's 404 reaches the caller, and the response cache forgets the id all the
same (gateway/stored_answers.py), so no replay hands out an id the provider answers 404 to. Real openai and
google-genai clients, the gateway in front of mock-providers; the answer is removed at the mock directly."""

from __future__ import annotations

import httpx
import openai
import pytest
from google import genai

from tests.gateway.support_response_cache import KEYS, cache_stack, policy
from tests.gateway.test_response_cache import CACHE, oa

ON = {"mode": "on"}


def removed_at_the_provider(settings, path: str, headers: dict[str, str]) -> None:
    assert httpx.delete(f"{settings.openai_base_url}/{path}", headers=headers).status_code == 200


def test_a_response_gone_at_the_provider_and_deleted_through_the_gateway_is_never_replayed(tmp_path):
    with cache_stack(tmp_path, policy(gpt=ON)) as (up, gw, settings):
        client = oa(gw)
        ask = dict(model="gpt-5.5", input="What does a prefix cache keep?")
        first = client.responses.create(**ask)
        assert client.responses.with_raw_response.create(**ask).headers[CACHE] == "hit"
        removed_at_the_provider(settings, f"v1/responses/{first.id}", {"authorization": "Bearer sk-gw-openai"})
        with pytest.raises(openai.NotFoundError):
            client.responses.delete(first.id)           # OpenAI's 404: it holds no such response
        raw = client.responses.with_raw_response.create(**ask)
        again = raw.parse()
        assert raw.headers[CACHE] == "miss" and again.id != first.id and len(up.posts) == 2


def test_an_interaction_gone_at_the_provider_and_deleted_through_the_gateway_is_never_replayed(tmp_path):
    with cache_stack(tmp_path, policy(gemini=ON)) as (up, gw, settings):
        client = genai.Client(api_key=KEYS["ACME_KEY"], http_options={"base_url": gw.url, "api_version": "v1beta"})
        ask = dict(model="gemini-3.8-flash", input="What does a prefix cache keep?")
        first = client.interactions.create(**ask)
        assert client.interactions.create(**ask).id == first.id and len(up.posts) == 1      # a hit
        removed_at_the_provider(settings, f"v1beta/interactions/{first.id}", {"x-goog-api-key": "gw-gemini"})
        with pytest.raises(Exception, match="not found") as refused:     # Google's 404 for an unknown id
            client.interactions.delete(first.id)
        assert refused.value.status_code == 404
        again = client.interactions.create(**ask)
        assert again.id != first.id and len(up.posts) == 2
