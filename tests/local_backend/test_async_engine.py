"""AsyncEngine, the in-process API the server (and the gateway) use: concurrent streams, early exit, errors."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from prefixgate.errors import RequestError
from prefixgate.local_backend.async_engine import AsyncEngine
from prefixgate.local_backend.config import EngineConfig
from prefixgate.local_backend.engine import LLM, LLMEngine
from prefixgate.local_backend.frontend import Frontend
from tests.local_backend.support_reference import greedy


@pytest.fixture
def engine(tiny):  # noqa: ANN201
    e = AsyncEngine(LLMEngine(EngineConfig(model="tiny", block_size=4, max_num_batched_tokens=32, max_waiting=3),
                              tiny[0]))
    yield e
    e.shutdown()


def test_concurrent_requests_stream_and_match_offline_results(engine: AsyncEngine, tiny) -> None:
    prompts = ["alpha beta", "gamma", "delta epsilon zeta"]

    async def collect(prompt: str) -> list:
        return [out async for out in engine.generate(prompt, greedy(6))]

    async def main() -> list:
        return await asyncio.gather(*(collect(p) for p in prompts))

    streams = asyncio.run(main())
    offline = LLM("tiny", loaded=tiny[0]).generate(prompts, greedy(6))
    for outs, want in zip(streams, offline, strict=True):
        assert [len(o.outputs[0].token_ids) for o in outs] == list(range(1, 7))  # one output per token
        assert outs[-1].finished and not any(o.finished for o in outs[:-1])
        assert outs[-1].outputs[0].token_ids == want.outputs[0].token_ids
        assert outs[-1].outputs[0].text == want.outputs[0].text


def test_leaving_a_stream_early_aborts_and_frees_blocks(engine: AsyncEngine) -> None:
    async def main() -> None:
        async for out in engine.generate("a fairly long prompt to hold blocks", greedy(200)):
            if len(out.outputs[0].token_ids) == 3:
                break
        # A wait on the condition; 30 s is only a generous bound for a loaded machine.
        deadline = time.monotonic() + 30
        while engine.engine.kv.num_used_blocks or engine.engine.has_unfinished_requests():
            assert time.monotonic() < deadline, "blocks were not freed"
            await asyncio.sleep(0.01)

    asyncio.run(main())


def test_bad_requests_raise_at_once_and_a_full_queue_is_429(tiny) -> None:
    engine = AsyncEngine(LLMEngine(EngineConfig(model="tiny", max_waiting=2), tiny[0]))
    gate, stepping, real_step = threading.Event(), threading.Event(), engine.engine.step

    def held_step():  # noqa: ANN202 - holds the engine inside a step so requests pile up in front of it
        stepping.set()
        gate.wait(30)
        return real_step()

    engine.engine.step = held_step

    async def main() -> None:
        with pytest.raises(RequestError) as e:
            engine.add_request("", greedy(1))
        assert e.value.field == "prompt"
        first = engine.add_request("first", greedy(2))
        while not stepping.is_set():
            await asyncio.sleep(0.01)
        second = engine.add_request("second", greedy(2))  # 2 of 2: one in the scheduler, one queued
        with pytest.raises(RequestError) as e:
            engine.add_request("one too many", greedy(1))
        assert e.value.status == 429 and e.value.retry_after
        gate.set()
        for s in (first, second):
            assert [o async for o in s][-1].finished

    try:
        asyncio.run(main())
    finally:
        gate.set()
        engine.shutdown()


def test_closing_a_stream_that_never_began_aborts_its_request(engine: AsyncEngine) -> None:
    """The gateway closes a local stream whose client left before the body began (relay.let_go): the
    request must be aborted, not computed to max_tokens for nobody."""
    reasons: list[str] = []
    engine.observer = lambda stats, _: reasons.extend(stats.finished_reasons)
    gate, real_step = threading.Event(), engine.engine.step

    def held_step():  # noqa: ANN202 - nothing is computed until the stream has been closed
        gate.wait(30)
        return real_step()

    engine.engine.step = held_step
    body = {"model": engine.model_name, "prompt": "never read", "max_tokens": 100, "ignore_eos": True,
            "stream": True}

    async def main() -> None:
        answer = await Frontend(engine).serve(body, chat=False)
        await answer.aclose()
        gate.set()
        deadline = time.monotonic() + 30  # a bound on the wait, not a timing assertion
        while reasons == [] or engine.engine.has_unfinished_requests():
            assert time.monotonic() < deadline, "the request neither finished nor was aborted"
            await asyncio.sleep(0.01)

    try:
        asyncio.run(main())
    finally:
        gate.set()
    assert reasons == ["abort"] and engine.engine.kv.num_used_blocks == 0
