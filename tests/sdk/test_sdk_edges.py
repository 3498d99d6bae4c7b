"""The wrapper's edges as a user of the real SDK meets them: its own failures (a planner bug, usage it
cannot read) never block or break a call the unwrapped client would have made, and the caller's own
objects are never touched."""

from __future__ import annotations

import asyncio
import copy
import json
import threading

import anthropic
import httpx
import openai
import pytest

import prefixgate
from prefixgate.sdk import Ledger, exchange
from tests.sdk.support_sdk import (
    ANTHROPIC_MODEL,
    OPENAI_MODEL,
    dated_system,
    fresh_key,
)


def _openai(url: str, ledger: Ledger) -> tuple[openai.OpenAI, openai.OpenAI]:
    raw = openai.OpenAI(api_key=fresh_key(), base_url=url + "/v1", max_retries=0)
    return raw, prefixgate.wrap(raw, ledger=ledger)


def _broken(monkeypatch: pytest.MonkeyPatch, step: str, bug: str) -> None:
    """The wrapper's own `exchange.<step>` raises RuntimeError(bug)."""
    def raise_bug(*args, **kwargs):
        raise RuntimeError(bug)

    monkeypatch.setattr(exchange, step, raise_bug)


def _hi(wrapped: openai.OpenAI, **extra):
    return wrapped.chat.completions.create(model=OPENAI_MODEL, max_tokens=8,
                                           messages=[{"role": "user", "content": "hi"}], **extra)


def test_a_planning_failure_sends_the_call_as_asked_with_a_warning(mock_url, monkeypatch):
    ledger = Ledger()
    _, wrapped = _openai(mock_url, ledger)
    _broken(monkeypatch, "plan", "planner bug")
    with pytest.warns(RuntimeWarning, match="planning failed"):
        answer = _hi(wrapped)
    assert answer.choices[0].message.content
    (rec,) = ledger.records
    assert rec.status == 200 and rec.output > 0
    assert any("planning failed (RuntimeError: planner bug)" in line for line in rec.explanation)


def test_a_recording_failure_never_breaks_the_callers_answer(mock_url, monkeypatch):
    _, wrapped = _openai(mock_url, Ledger())
    # Recording runs inside the SDK's read of the body: its failure used to raise out of create().
    _broken(monkeypatch, "prefix_shape", "shape bug")
    with pytest.warns(RuntimeWarning, match=r"recording the call failed \(RuntimeError: shape bug\)"):
        answer = _hi(wrapped)
    assert answer.choices[0].message.content
    with pytest.warns(RuntimeWarning, match="recording the call failed"):
        stream = _hi(wrapped, stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


def test_input_the_planner_cannot_read_is_the_sdks_business(mock_url):
    # `stream_options` that is not an object: the unwrapped client sends it and the provider refuses it (OpenAI:
    # "Invalid type for 'stream_options'"); wrapped, the caller gets that same SDK error, not an AttributeError of
    # the planner's (which cannot read it, and sends the call as asked).
    ledger = Ledger()
    raw, wrapped = _openai(mock_url, ledger)
    kwargs = dict(model=OPENAI_MODEL, max_tokens=8, stream=True, stream_options="yes",
                  messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError) as plain:
        list(raw.chat.completions.create(**kwargs))
    with pytest.raises(openai.BadRequestError) as through:
        list(wrapped.chat.completions.create(**kwargs))
    assert through.value.status_code == plain.value.status_code == 400
    assert through.value.body == plain.value.body


def test_the_callers_messages_are_never_modified(mock_url):
    ledger = Ledger()
    _, wrapped = _openai(mock_url, ledger)
    chat = [{"role": "system", "content": dated_system(1)}, {"role": "user", "content": "Where is my parcel?"}]
    before = copy.deepcopy(chat)
    for _ in (1, 2):
        wrapped.chat.completions.create(model=OPENAI_MODEL, messages=chat, max_tokens=8)
        list(wrapped.chat.completions.create(model=OPENAI_MODEL, messages=chat, max_tokens=8, stream=True))
    assert chat == before
    client = prefixgate.wrap(anthropic.Anthropic(api_key=fresh_key(), base_url=mock_url, max_retries=0), ledger=ledger)
    system = [{"type": "text", "text": dated_system(3)}]
    turns = [{"role": "user", "content": [{"type": "text", "text": "Where is my parcel?"}]}]
    snapshot = copy.deepcopy((system, turns))
    for _ in range(2):
        client.messages.create(model=ANTHROPIC_MODEL, max_tokens=8, system=system, messages=turns)
    assert (system, turns) == snapshot
    assert len(ledger.records) == 6


def _answering(body: bytes, content_type: str) -> httpx.Client:
    """An httpx client whose every request gets `body` (streamed, as a real transport gives it)."""
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": content_type}, content=iter([body]))
    return httpx.Client(transport=httpx.MockTransport(handler))


_CHAT = {"id": "c1", "object": "chat.completion", "created": 1, "model": OPENAI_MODEL,
         "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}


@pytest.mark.parametrize("usage", [{"prompt_tokens": 5.0, "completion_tokens": 2}, "n/a",
                                   {"prompt_tokens": 5, "completion_tokens": 2, "prompt_tokens_details": "none"},
                                   # Impossible: no answer has 10**18 tokens or a negative count.
                                   {"prompt_tokens": 10**18, "completion_tokens": 2}, {"prompt_tokens": 5, "completion_tokens": -2}])
def test_usage_the_wrapper_cannot_read_never_breaks_the_answer(usage):
    body = json.dumps({**_CHAT, "usage": usage}).encode()
    chunk = {**_CHAT, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "hi"}}]}
    events = [chunk, {**chunk, "choices": [], "usage": usage}]
    sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode() + b"data: [DONE]\n\n"
    ledger = Ledger()
    ask = dict(model=OPENAI_MODEL, messages=[{"role": "user", "content": "hi"}])
    answers = []
    for content, content_type, stream in ((body, "application/json", False), (sse, "text/event-stream", True)):
        raw = openai.OpenAI(api_key="k", base_url="http://provider/v1", http_client=_answering(content, content_type))
        wrapped = prefixgate.wrap(raw, ledger=ledger)
        if stream:
            kwargs = dict(ask, stream=True, stream_options={"include_usage": True})
            answers.append(([c.model_dump(warnings=False) for c in raw.chat.completions.create(**kwargs)],
                            [c.model_dump(warnings=False) for c in wrapped.chat.completions.create(**kwargs)]))
        else:
            answers.append((raw.chat.completions.create(**ask).model_dump(warnings=False),
                            wrapped.chat.completions.create(**ask).model_dump(warnings=False)))
    assert all(raw == planned for raw, planned in answers)
    records = ledger.records
    assert [r.status for r in records] == [200, 200] and all(r.cost_usd is None for r in records)
    assert "usage: unreadable" in records[0].error


def test_an_openai_stream_read_to_its_end_is_not_recorded_as_cut_short(mock_url):
    # The openai SDK stops at `[DONE]` and closes the body without reading to its end: that stream ended.
    ledger = Ledger()
    _, wrapped = _openai(mock_url, ledger)
    kwargs = dict(model=OPENAI_MODEL, max_tokens=64, stream=True, messages=[{"role": "user", "content": "Tell me a story"}])
    chunks = list(wrapped.chat.completions.create(**kwargs))
    cut = wrapped.chat.completions.create(**kwargs)
    next(iter(cut))
    cut.close()
    whole, early = ledger.records
    assert chunks and whole.error == "" and whole.output > 0
    assert "closed before it ended" in early.error


def test_async_tasks_and_threads_share_one_ledger_and_early_breaks_count_once(mock_url):
    ledger = Ledger()
    ask = dict(model=OPENAI_MODEL, max_tokens=4, messages=[{"role": "user", "content": "hi"}])

    async def tasks() -> None:
        client = prefixgate.wrap(openai.AsyncOpenAI(api_key=fresh_key(), base_url=mock_url + "/v1", max_retries=0),
                                 ledger=ledger)
        await asyncio.gather(*(client.chat.completions.create(**ask) for _ in range(20)))
        stream = await client.chat.completions.create(**ask, stream=True)
        async for _ in stream:
            break
        await stream.close()
        await client.close()

    def calls() -> None:
        _, client = _openai(mock_url, ledger)
        for _ in range(10):
            client.chat.completions.create(**ask)

    workers = [threading.Thread(target=calls) for _ in range(3)] + [threading.Thread(target=asyncio.run, args=(tasks(),))
                                                                     for _ in range(2)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(60)
    records = ledger.records
    assert len(records) == len({r.id for r in records}) == ledger.summary()["requests"] == 3 * 10 + 2 * 21
    assert sum("closed before it ended" in r.error for r in records) == 2
