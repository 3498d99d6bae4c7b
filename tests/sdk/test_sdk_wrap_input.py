"""`wrap()` at the edge: what it accepts, clear errors for what it does not, and no effect on the original."""

from __future__ import annotations

import anthropic
import openai
import pytest
from google import genai

import prefixgate
from prefixgate.cache_planner import PlannerState
from prefixgate.sdk import Ledger, ledger
from prefixgate.sdk.endpoints import endpoint_of, gemini_cache_url


def test_rejects_what_it_cannot_wrap():
    with pytest.raises(TypeError, match="openai.OpenAI"):
        prefixgate.wrap(object())
    client = anthropic.Anthropic(api_key="k", base_url="http://127.0.0.1:9")
    with pytest.raises(ValueError, match="route"):
        prefixgate.wrap(client, route="")
    with pytest.raises(TypeError, match="rewrite"):
        prefixgate.wrap(client, rewrite="yes")
    with pytest.raises(TypeError, match="ledger"):
        prefixgate.wrap(client, ledger={})
    with pytest.raises(TypeError, match="state"):
        prefixgate.wrap(client, state={})
    with pytest.raises(ValueError, match="already wrapped"):
        prefixgate.wrap(prefixgate.wrap(client))
    gclient = genai.Client(api_key="k")
    with pytest.raises(TypeError, match=r"\.aio"):
        prefixgate.wrap(gclient.aio)


def test_the_original_client_is_left_alone_and_options_are_honoured():
    raw = openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    state, own = PlannerState(), Ledger()
    wrapped = prefixgate.wrap(raw, rewrite=False, ledger=own, state=state, route="r")
    assert raw._client is not wrapped._client and type(raw._client).__module__.startswith("openai")
    interceptor = wrapped._client._prefixgate_interceptor
    assert (interceptor.config.mode, interceptor.config.state, interceptor.config.ledger) == ("checkpoints", state, own)
    # Settings fall through to the original HTTP client; closing the wrapped client closes the shared pool.
    assert wrapped._client.timeout == raw._client.timeout and not wrapped.is_closed()
    assert prefixgate.wrap(raw)._client._prefixgate_interceptor.config.ledger is ledger


def test_endpoints_planned_and_passed_through():
    assert endpoint_of("openai", "POST", "/v1/chat/completions").kind == "generate"
    assert endpoint_of("openai", "GET", "/v1/models") is None
    assert endpoint_of("anthropic", "POST", "/v1/messages/count_tokens") is None
    found = endpoint_of("gemini", "POST", "/v1beta/models/gemini-3.5-flash:streamGenerateContent")
    assert (found.model, found.streams) == ("gemini-3.5-flash", True)
    vertex = "/v1beta1/projects/p/locations/l/publishers/google/models/gemini-3.8-flash:generateContent"
    assert endpoint_of("gemini", "POST", vertex).model == "gemini-3.8-flash" and gemini_cache_url(vertex) is None
    assert gemini_cache_url("/v1beta/models/m:generateContent") == "/v1beta/cachedContents"
    assert endpoint_of("gemini", "DELETE", "/v1beta/cachedContents/abc").name == "cachedContents/abc"
    assert endpoint_of("gemini", "GET", "/v1beta/cachedContents/abc") is None
