"""The OpenAI-compatible server, driven by the real `openai` client over HTTP."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import openai
import pytest

from prefixgate.local_backend.async_engine import AsyncEngine
from prefixgate.local_backend.config import EngineConfig
from prefixgate.local_backend.engine import LLMEngine
from prefixgate.local_backend.server import create_app
from tests.support_services import ServerThread, wait_until

MODEL = "tiny-llama"


@contextmanager
def running_server(loaded, **options) -> Iterator[tuple[str, AsyncEngine]]:  # noqa: ANN001
    engine = AsyncEngine(LLMEngine(EngineConfig(model=MODEL, **options), loaded))
    with ServerThread(create_app(engine)) as server:
        yield server.url, engine


@pytest.fixture(scope="module")
def server(tiny) -> Iterator[tuple[str, AsyncEngine]]:
    with running_server(tiny[0], block_size=4, max_num_batched_tokens=64, max_waiting=4) as s:
        yield s


@pytest.fixture
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server[0] + "/v1", api_key="unused", max_retries=0)


def metric(base: str, name: str, label: str = "") -> float:
    text = httpx.get(base + "/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if (line.startswith(name + "{") or line.startswith(name + " ")) and label in line)


def test_health_and_models(server, client) -> None:
    assert httpx.get(server[0] + "/health").json()["status"] == "ok"
    assert [m.id for m in client.models.list().data] == [MODEL]


def test_chat_completion_with_usage_and_cached_tokens(client) -> None:
    messages = [{"role": "system", "content": "You are terse. " * 8}, {"role": "user", "content": "Say hi"}]
    first = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=5, temperature=0)
    assert first.object == "chat.completion" and first.choices[0].message.role == "assistant"
    assert first.choices[0].finish_reason in ("stop", "length")
    assert first.usage.prompt_tokens > 100 and 1 <= first.usage.completion_tokens <= 5
    again = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=5, temperature=0)
    assert again.choices[0].message.content == first.choices[0].message.content
    assert again.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 4


def test_completion_matches_the_offline_engine(server, client, tiny) -> None:
    from prefixgate.local_backend.engine import LLM
    from prefixgate.local_backend.sampling_params import SamplingParams

    got = client.completions.create(model=MODEL, prompt="The sky is", max_tokens=8, temperature=0,
                                    extra_body={"ignore_eos": True})
    want = LLM(MODEL, loaded=tiny[0]).generate("The sky is", SamplingParams(temperature=0, max_tokens=8,
                                                                            ignore_eos=True))[0]
    assert got.choices[0].text == want.outputs[0].text and got.usage.completion_tokens == 8
    assert got.choices[0].finish_reason == "length"


def test_chat_stream_with_include_usage(client) -> None:
    stream = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Count"}],
                                            max_tokens=12, temperature=0, stream=True,
                                            stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]
    last = chunks[-1]
    assert last.choices == [] and last.usage.completion_tokens == 12
    assert all(c.usage is None for c in chunks[:-1])
    full = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Count"}],
                                          max_tokens=12, temperature=0, extra_body={"ignore_eos": True})
    assert text == full.choices[0].message.content


def test_completion_stream_ends_with_usage_then_done(server) -> None:
    body = {"model": MODEL, "prompt": "abc", "max_tokens": 4, "stream": True, "temperature": 0, "ignore_eos": True,
            "stream_options": {"include_usage": True}}
    with httpx.stream("POST", server[0] + "/v1/completions", json=body) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    usage_chunk = json.loads(events[-2])
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["completion_tokens"] == 4
    assert "cached_tokens" in usage_chunk["usage"]["prompt_tokens_details"]
    assert all(json.loads(e)["object"] == "text_completion" for e in events[:-1])


def test_logprobs_chat_and_completions(client) -> None:
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=3,
                                       temperature=0, logprobs=True, top_logprobs=2, extra_body={"ignore_eos": True})
    content = r.choices[0].logprobs.content
    assert len(content) == 3 and all(len(c.top_logprobs) == 2 and c.logprob <= 0 for c in content)
    assert all(c.top_logprobs[0].logprob >= c.top_logprobs[1].logprob for c in content)
    assert content[0].logprob == pytest.approx(content[0].top_logprobs[0].logprob)  # greedy: the top token
    c = client.completions.create(model=MODEL, prompt="x", max_tokens=3, temperature=0, logprobs=2,
                                  extra_body={"ignore_eos": True})
    lp = c.choices[0].logprobs
    assert len(lp.tokens) == 3 and len(lp.token_logprobs) == 3 and all(len(t) <= 2 for t in lp.top_logprobs)
    assert "".join(lp.tokens) == c.choices[0].text and lp.text_offset[0] == 0


@pytest.mark.parametrize(("body", "field"), [
    ({"prompt": ""}, "prompt"), ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
    ({"prompt": "x", "max_tokens": -1}, "max_tokens"), ({"prompt": "x" * 5000}, "prompt"),
    ({"prompt": "x", "model": "gpt-5.4"}, "model"), ({"prompt": "x", "temperature": -0.5}, "temperature"),
    ({"prompt": "x", "top_p": 2}, "top_p"), ({"prompt": "x", "temperature": "hot"}, "temperature"),
    ({"prompt": "x", "n": 3}, "n"), ({"prompt": "x", "logprobs": 99}, "logprobs"), ({"prompt": []}, "prompt"),
    ({"prompt": "x", "extra_body": {"min_tokens": 1, "stop_token_ids": [10**6]}}, "stop_token_ids"),
])
def test_bad_input_is_a_400_naming_the_field_and_serving_goes_on(client, body: dict, field: str) -> None:
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(**{"model": MODEL, **body})
    assert e.value.status_code == 400 and e.value.body["param"] == field
    assert e.value.body["type"] == "invalid_request_error"
    assert client.completions.create(model=MODEL, prompt="ok", max_tokens=1).choices


def test_bad_chat_messages(client) -> None:
    for messages in ([], [{"content": "no role"}], [{"role": "user", "content": [{"type": "image_url"}]}]):
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=MODEL, messages=messages)
        assert e.value.body["param"].startswith("messages")


def test_client_disconnect_mid_stream_frees_blocks_at_once(server, monkeypatch) -> None:
    base, engine = server
    real_step = engine.engine.step

    def slow_step():  # noqa: ANN202 - the tiny model could finish all 400 tokens before the client reads 7 lines
        time.sleep(0.01)
        return real_step()

    monkeypatch.setattr(engine.engine, "step", slow_step)
    body = {"model": MODEL, "prompt": "a long story " * 5, "max_tokens": 400, "stream": True, "ignore_eos": True}
    with httpx.stream("POST", base + "/v1/completions", json=body) as r:
        for i, _ in enumerate(r.iter_lines()):
            if i > 6:
                break
        assert engine.engine.kv.num_used_blocks > 0
    # Closing the connection cancels the response; the request is aborted before the next step.
    wait_until(lambda: engine.engine.kv.num_used_blocks == 0, 30, "the cancelled stream aborted")
    assert not engine.engine.has_unfinished_requests()
    assert metric(base, "prefixgate_backend_request_success_total", 'finished_reason="abort"') >= 1


def test_full_queue_answers_429_with_retry_after(tiny) -> None:
    with running_server(tiny[0], max_waiting=2) as (base, engine):
        # Hold the engine inside a step so that requests pile up in front of it.
        gate, stepping, real_step = threading.Event(), threading.Event(), engine.engine.step

        def held_step():  # noqa: ANN202
            stepping.set()
            gate.wait(30)
            return real_step()

        engine.engine.step = held_step
        statuses: list[int] = []

        def post(prompt: str) -> None:
            r = httpx.post(base + "/v1/completions", json={"model": MODEL, "prompt": prompt, "max_tokens": 2},
                           timeout=60)
            statuses.append(r.status_code)

        first = threading.Thread(target=post, args=("first",))
        first.start()
        wait_until(stepping.is_set, 30, "first request stepping")  # "first" waits in the scheduler's queue: 1 of 2
        second = threading.Thread(target=post, args=("second",))
        second.start()
        wait_until(lambda: engine._pending_adds == 1, 30, "second request queued")  # "second" is queued behind the held step: 2 of 2
        r = httpx.post(base + "/v1/completions", json={"model": MODEL, "prompt": "one too many"})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        # OpenAI's rate-limit 429 (its error codes guide): code rate_limit_exceeded, type the limit reached (requests)
        assert (r.json()["error"]["code"], r.json()["error"]["type"]) == ("rate_limit_exceeded", "requests")
        gate.set()
        for t in (first, second):
            t.join(60)
        assert statuses == [200, 200]
        wait_until(lambda: engine.engine.kv.num_used_blocks == 0, 30, "blocks freed")


def test_metrics_count_tokens_cache_and_latency(server, client) -> None:
    base, _ = server
    before_hits = metric(base, "prefixgate_backend_prefix_cache_hits_total")
    prompt = "shared prefix for metrics " * 4
    for _ in range(2):
        client.completions.create(model=MODEL, prompt=prompt, max_tokens=3, temperature=0)
    text = httpx.get(base + "/metrics").text
    for name in ("prefixgate_backend_prompt_tokens_total", "prefixgate_backend_generation_tokens_total",
                 "prefixgate_backend_prefix_cache_queries_total", "prefixgate_backend_kv_blocks_in_use",
                 "prefixgate_backend_num_requests_running", "prefixgate_backend_num_requests_waiting",
                 "prefixgate_backend_time_to_first_token_seconds_bucket",
                 "prefixgate_backend_inter_token_latency_seconds_bucket"):
        assert name in text, name
    assert metric(base, "prefixgate_backend_prefix_cache_hits_total") - before_hits >= 96
    assert metric(base, "prefixgate_backend_generation_tokens_total") >= 6
    assert metric(base, "prefixgate_backend_time_to_first_token_seconds_count") >= 2


def test_client_giving_up_on_a_non_streaming_request_frees_its_blocks(server, monkeypatch) -> None:
    base, engine = server
    aborted = metric(base, "prefixgate_backend_request_success_total", 'finished_reason="abort"')
    # The engine is held inside a step until the client has given up, so a fast machine cannot finish
    # the answer first.
    gate, real_step = threading.Event(), engine.engine.step

    def held_step():  # noqa: ANN202
        gate.wait(30)
        return real_step()

    monkeypatch.setattr(engine.engine, "step", held_step)
    body = {"model": MODEL, "prompt": "wait for me " * 5, "max_tokens": 900, "ignore_eos": True}
    try:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(base + "/v1/completions", json=body, timeout=httpx.Timeout(5, read=0.3))
    finally:
        gate.set()
    wait_until(lambda: engine.engine.kv.num_used_blocks == 0 and not engine.engine.has_unfinished_requests(), 30,
               "the abandoned request aborted")
    assert metric(base, "prefixgate_backend_request_success_total", 'finished_reason="abort"') == aborted + 1
