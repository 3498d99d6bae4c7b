"""The response cache and what the provider keeps for the caller (docs/response-cache.md): a replay must not hand
out what the upstream no longer has or never made, nor answer from a prompt template the operator has since
republished. Driven with the real openai client against mock-providers."""

from __future__ import annotations

from tests.gateway.support_response_cache import cache_stack, policy
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
