"""The gateway's /metrics with the local backend in-process: the engine's own `prefixgate_backend_*` metrics,
named as `prefixgate backend` serves them (one dashboard for both), and its state before it loads or when it
cannot."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from prefixgate.gateway.app import create_app
from prefixgate.gateway.metrics import Metrics
from prefixgate.local_backend.async_engine import AsyncEngine
from prefixgate.local_backend.frontend import local_target
from prefixgate.local_backend.server import create_app as backend_app
from tests.gateway.support_gateway import ServerThread, policy_for, settings_for
from tests.local_backend.support_tiny import tiny_llama

BLOCK = 16
KV_BLOCKS = 24  # block 0 is the engine's padding target: 23 hold KV (local_backend/config.py)
# The tiny model's tokenizer is one token per byte, plus one per ChatML special token (support_tiny.py), so the
# shared system prompt's tokens are counted by hand: <|im_start|> "system\n" SYSTEM <|im_end|> "\n" <|im_start|>
# "user\n", then the question, whose first byte differs between the two requests.
SYSTEM = "You answer questions about the shipping policy. " * 2 + "Be brief."  # 121 shared: 7 full blocks and 9
OPTIONS = {"dtype": "float32", "block_size": BLOCK, "num_kv_blocks": KV_BLOCKS, "cpu_threads": 1}
SHARED = 1 + len("system\n") + len(SYSTEM) + 1 + len("\n") + 1 + len("user\n")


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(scraped: dict, name: str, **labels: str) -> float | None:
    return scraped.get((name, tuple(sorted(labels.items()))))


def backend_families(text: str) -> dict[str, str]:
    """The engine's families by type (`*_created`, the text format's gauge per counter child, left out)."""
    return {f.name: f.type for f in text_string_to_metric_families(text)
            if f.name.startswith("prefixgate_backend_") and not f.name.endswith("_created")}


@pytest.fixture
def tiny_folder(tmp_path: Path) -> Path:
    loaded, reference = tiny_llama()
    folder = tmp_path / "tiny"
    reference.save_pretrained(folder)
    loaded.tokenizer.save_pretrained(folder)
    return folder


def gateway(tmp_path: Path, model: str, target: object):  # noqa: ANN201 - the app
    settings = settings_for("http://127.0.0.1:9", tmp_path, local_model=model)
    policy = policy_for(settings, {"routes": [{"name": "local", "models": ["tiny"],
                                               "targets": [{"upstream": "local"}]}]})
    return create_app(settings, policy=policy, local=target)


def test_the_engines_metrics_are_on_the_gateways_metrics(tmp_path: Path, tiny_folder: Path) -> None:
    model = str(tiny_folder)
    target = local_target(model, **OPTIONS)
    with ServerThread(gateway(tmp_path, model, target)) as gw:
        client = openai.OpenAI(api_key="unused", base_url=gw.url + "/v1", max_retries=0)
        usage = []
        for question in ("When does my parcel arrive?", "How are returns paid?"):
            answer = client.chat.completions.create(
                model="tiny", max_tokens=4, temperature=0,
                messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}])
            usage.append(answer.usage)
        # The engine thread counts a step before it hands the step's answers over: nothing to wait for.
        text = httpx.get(gw.url + "/metrics").text
    scraped = samples(text)
    assert value(scraped, "prefixgate_local_backend_status", model_name=model, status="loaded") == 1
    assert value(scraped, "prefixgate_local_backend_status", model_name=model, status="failed") == 0
    assert value(scraped, "prefixgate_backend_request_success_total", model_name=model, finished_reason="length") == 2
    # The second request reads the first's full blocks of the shared prefix; a partial block is recomputed.
    assert value(scraped, "prefixgate_backend_prefix_cache_hits_total", model_name=model) == SHARED // BLOCK * BLOCK
    assert usage[1].prompt_tokens_details.cached_tokens == SHARED // BLOCK * BLOCK
    prompts = sum(u.prompt_tokens for u in usage)
    assert value(scraped, "prefixgate_backend_prefix_cache_queries_total", model_name=model) == prompts
    assert value(scraped, "prefixgate_backend_prompt_tokens_total", model_name=model) == prompts
    assert value(scraped, "prefixgate_backend_generation_tokens_total", model_name=model) == 8
    assert value(scraped, "prefixgate_backend_kv_blocks_total", model_name=model) == KV_BLOCKS - 1
    # Both answered: no request holds blocks (cached ones sit free until evicted), none runs or waits.
    assert value(scraped, "prefixgate_backend_kv_blocks_in_use", model_name=model) == 0
    assert value(scraped, "prefixgate_backend_num_requests_running", model_name=model) == 0
    assert value(scraped, "prefixgate_backend_num_requests_waiting", model_name=model) == 0
    assert value(scraped, "prefixgate_backend_time_to_first_token_seconds_count", model_name=model) == 2
    # One dashboard for both: the same families, of the same types, as `prefixgate backend` serves.
    with ServerThread(backend_app(AsyncEngine.from_options(model, **OPTIONS))) as backend:
        served = httpx.get(backend.url + "/metrics").text
    assert backend_families(text) == backend_families(served)


def test_before_the_model_loads_and_when_it_cannot(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-model")
    target = local_target(missing)
    app = gateway(tmp_path, missing, target)
    metrics = Metrics()
    metrics.include_local(target)
    text = metrics.render().decode()
    before = samples(text)
    assert value(before, "prefixgate_local_backend_status", model_name=missing, status="not loaded") == 1
    assert backend_families(text) == {}
    with ServerThread(app) as gw:
        health = httpx.get(gw.url + "/health").json()
        text = httpx.get(gw.url + "/metrics").text
    scraped = samples(text)
    assert health["local_backend"]["status"] == "failed"
    assert value(scraped, "prefixgate_local_backend_status", model_name=missing, status="failed") == 1
    assert value(scraped, "prefixgate_local_backend_status", model_name=missing, status="loaded") == 0
    assert backend_families(text) == {}
