"""`prefixgate backend --api-key`: the /v1 API wants the key (vLLM's convention), probes and scrapers do not,
and a gateway with `backend_url` reaches it with the same variable."""

from __future__ import annotations

import httpx
import openai
import pytest

from prefixgate.gateway.app import create_app as gateway_app
from prefixgate.local_backend.async_engine import AsyncEngine
from prefixgate.local_backend.config import EngineConfig
from prefixgate.local_backend.engine import LLMEngine
from prefixgate.local_backend.server import create_app
from tests.gateway.support_gateway import settings_for
from tests.support_services import ServerThread

KEY = "backend-key-0001"
MESSAGES = [{"role": "user", "content": "Say hi"}]


@pytest.fixture(scope="module")
def backend(tiny):  # noqa: ANN001, ANN201
    engine = AsyncEngine(LLMEngine(EngineConfig(model="tiny-llama", block_size=4, max_num_batched_tokens=64), tiny[0]))
    with ServerThread(create_app(engine, api_key=KEY)) as server:
        yield server.url


def test_the_api_wants_the_key_and_probes_do_not(backend: str) -> None:
    assert httpx.get(backend + "/health").status_code == 200
    assert httpx.get(backend + "/metrics").status_code == 200
    for key in ("wrong-key", ""):
        client = openai.OpenAI(base_url=backend + "/v1", api_key=key or "x", max_retries=0,
                               default_headers={} if key else {"authorization": ""})
        with pytest.raises(openai.AuthenticationError) as caught:
            client.chat.completions.create(model="tiny-llama", messages=MESSAGES, max_tokens=2)
        assert "invalid or missing API key" in caught.value.message
    client = openai.OpenAI(base_url=backend + "/v1", api_key=KEY, max_retries=0)
    assert client.chat.completions.create(model="tiny-llama", messages=MESSAGES, max_tokens=2).usage.completion_tokens


def test_a_gateway_with_backend_url_sends_the_backend_key(backend: str, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PREFIXGATE_BACKEND_API_KEY", KEY)
    settings = settings_for("http://127.0.0.1:9", tmp_path, backend_url=backend)
    with ServerThread(gateway_app(settings)) as gateway:
        client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="caller", max_retries=0)
        reply = client.chat.completions.create(model="tiny-llama", messages=MESSAGES, max_tokens=2)
    assert reply.usage.completion_tokens >= 1
