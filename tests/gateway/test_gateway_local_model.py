"""The main job: with no configuration and no API keys, the gateway serves the bundled model in-process,
and a newcomer's second request with the same (timestamped) system prompt reads cached tokens."""

from __future__ import annotations

import httpx
import openai

from prefixgate.gateway.app import create_app
from tests.gateway.support_gateway import zero_config_settings
from tests.support_services import ServerThread

SYSTEM = "You are a helpful assistant for ACME. Current time: 2026-11-22T10:0{}:00Z. " + "Be kind and brief. " * 60


def test_zero_config_gateway_serves_the_bundled_model_with_prefix_reuse(tmp_path, monkeypatch):
    settings = zero_config_settings(tmp_path, monkeypatch)
    with ServerThread(create_app(settings)) as gw:
        client = openai.OpenAI(api_key="unused", base_url=gw.url + "/v1", max_retries=0)
        answers = []
        for i in range(2):
            raw = client.chat.completions.with_raw_response.create(
                model="smollm2-135m", max_tokens=8, temperature=0,
                messages=[{"role": "system", "content": SYSTEM.format(i)}, {"role": "user", "content": "Say hi."}])
            answers.append((raw.parse(), raw.headers))
        stream = client.chat.completions.create(model="smollm2-135m", max_tokens=8, stream=True,
                                                stream_options={"include_usage": True},
                                                messages=[{"role": "user", "content": "Count to three."}])
        chunks = list(stream)
        health = httpx.get(gw.url + "/health").json()
    assert health["local_backend"] == {"model": "smollm2-135m", "status": "loaded"}
    (first, h1), (second, h2) = answers
    assert first.choices[0].message.content and first.usage.completion_tokens > 0
    assert first.usage.prompt_tokens == second.usage.prompt_tokens
    # The planner moved the timestamp out of the system prompt, so the engine's prefix cache holds it.
    assert second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 32
    assert "rewrites=1" in h2["x-prefixgate-plan"] and h2["x-prefixgate-cost-usd"] == "0"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
