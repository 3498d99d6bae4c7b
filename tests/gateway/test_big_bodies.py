"""Fair under big bodies: a big request is worked off the event loop, so `/health` and other callers are answered
while it is; a body with more messages or content parts than the gateway takes is refused with a 413 in the
caller's own error shape that names the limit (Bedrock: its ValidationException, the only error its API defines
for a request it will not take)."""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
import weakref
from urllib.parse import quote

import httpx
import pytest

from prefixgate import slices
from prefixgate.gateway import intake, off_loop
from tests.gateway.support_gateway import running_gateway, running_upstream, settings_for

GATE = "hold-this-body-at-the-gate"
HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-caller-0000"}


def messages(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(n)]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    """Bodies of 1 KB and more are worked off the loop; at most 6 messages and 8 content parts a request."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ANTHROPIC_API_KEY", "sk-ant-upstream-0123456789")
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path_factory.mktemp("big"), off_loop_bytes=1024, max_messages=6,
                                max_content_parts=8)
        with running_gateway(settings) as server:
            yield server
    mp.undo()


def test_health_and_other_requests_answer_while_a_big_body_is_worked(gateway, monkeypatch) -> None:
    entered, release = threading.Event(), threading.Event()
    parse = intake.within_limits

    def held(*args):
        if GATE.encode() in args[1]:
            entered.set()
            release.wait(60)    # only a guard against a hung test: the test sets it
        return parse(*args)

    monkeypatch.setattr(intake, "within_limits", held)
    big = {"model": "claude-sonnet-5-5", "max_tokens": 16,
           "messages": [{"role": "user", "content": GATE + " " + "words " * 400}]}
    answers: list[httpx.Response] = []
    sender = threading.Thread(target=lambda: answers.append(
        httpx.post(gateway.url + "/v1/messages", json=big, headers=HEADERS, timeout=120)))
    sender.start()
    try:
        assert entered.wait(60), "the big request never reached its parse"
        # The big body is held mid-parse; on the event loop, nothing else would be answered until it is let go.
        assert httpx.get(gateway.url + "/health", timeout=20).status_code == 200
        small = {"model": "claude-sonnet-5-5", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(gateway.url + "/v1/messages", json=small, headers=HEADERS, timeout=20).status_code == 200
        assert not answers, "the big request answered before it was let go"
    finally:
        release.set()
        sender.join(120)
    assert answers[0].status_code == 200, answers[0].text


def test_off_loop_work_pauses_the_collector_and_restores_it() -> None:
    for _ in range(500):    # an earlier test's big body may still be being freed
        if not off_loop.busy():
            break
        time.sleep(0.01)
    before = sys.getswitchinterval()
    seen = {}

    def inside() -> str:
        seen.update(collecting=gc.isenabled(), interval=sys.getswitchinterval(), thread=threading.current_thread())
        return "done"

    assert asyncio.run(off_loop.work(10, 1, inside)) == "done"
    assert seen["thread"] is not threading.main_thread()
    assert seen["collecting"] is False and seen["interval"] == off_loop.SWITCH_S
    assert gc.isenabled() and sys.getswitchinterval() == before
    assert asyncio.run(off_loop.work(0, 1, inside)) == "done"     # a small body: worked here
    assert seen["thread"] is threading.main_thread() and seen["collecting"] is True


class Blocks(list):
    """A list that can be watched (weakref) as it is freed."""


class Node:
    """A planned message's stand-in: an object with a list of its own."""

    def __init__(self, i: int) -> None:
        self.i, self.blocks = i, Blocks([str(i) * 3, {"text": f"block {i}"}])


class Finalised:
    """An object with a finaliser, like an upstream response or a future: its `__del__` runs on the loop."""

    threads: list[int] = []

    def __del__(self) -> None:
        Finalised.threads.append(threading.get_ident())


class Plan:
    """What two parts of a request both hold (as the parsed and the planned conversation share segments)."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes


def dismantled(nodes: int, shared: list, order: list[tuple[str, int]]) -> tuple[int, list[int]]:
    """Hand a graph of `nodes` nodes (each with its own blocks, all under one `Plan` that two of the graph's
    objects hold), `shared` and an object with a finaliser to `let_go_later` on an event loop; wait until all
    of it is freed. Returns the loop's thread and the threads that freed the nodes and blocks; `order` gets
    ("node"|"blocks", i) as each is freed."""
    freed_on: list[int] = []

    def freed(kind: str, i: int) -> None:
        freed_on.append(threading.get_ident())
        order.append((kind, i))

    async def main() -> int:
        plan = Plan([Node(i) for i in range(nodes)])
        root = {"call": {"plan": plan}, "record": [plan], "shared": shared, "response": Finalised()}
        for node in plan.nodes:
            weakref.finalize(node, freed, "node", node.i)
            weakref.finalize(node.blocks, freed, "blocks", node.i)
        del node, plan
        off_loop.let_go_later(root)
        del root
        for _ in range(500):
            if len(freed_on) == 2 * nodes and Finalised.threads:
                break
            await asyncio.sleep(0.01)
        return threading.get_ident()

    return asyncio.run(main()), freed_on


def test_a_finished_graph_is_freed_by_a_worker_and_shared_values_are_left_alone() -> None:
    shared = [{"memo": "value"}]
    Finalised.threads.clear()
    loop_thread, freed_on = dismantled(3 * off_loop.SLICE, shared, [])
    assert len(freed_on) == 6 * off_loop.SLICE, "not all of the graph was freed"
    assert loop_thread not in freed_on, "the event loop freed part of the graph"
    assert Finalised.threads == [loop_thread], "an object with a finaliser must be dropped on the loop"
    assert shared == [{"memo": "value"}] and sys.getrefcount(shared) == 2      # untouched, still held here only


def test_a_graph_is_freed_in_slices_that_shrink_when_they_take_long(monkeypatch) -> None:
    """With no time allowed per slice, every slice is too slow: they halve down to one node each, and the
    worker lets the GIL go between them. Freed at once, all nodes would go in one run (as they would if the
    walk stopped at the plan, which two of the graph's objects hold)."""
    class Clock:
        thread_time = staticmethod(time.thread_time)

        @staticmethod
        def sleep(seconds: float) -> None:
            order.append(("slice", 0))
            time.sleep(seconds)

    order: list[tuple[str, int]] = []
    monkeypatch.setattr(off_loop, "time", Clock)
    monkeypatch.setattr(slices, "time", Clock)
    monkeypatch.setattr(slices, "SLICE_S", 0.0)
    dismantled(3 * off_loop.SLICE, [], order)
    runs, run = [], 0       # nodes freed between two turns of the GIL
    for kind, _ in order:
        if kind == "slice":
            runs.append(run)
            run = 0
        elif kind == "node":
            run += 1
    runs.append(run)
    assert sum(runs) == 3 * off_loop.SLICE
    assert max(runs) <= off_loop.SLICE and runs.count(1) > off_loop.SLICE, runs


def test_a_big_requests_parsed_body_is_freed_off_the_loop(gateway, monkeypatch) -> None:
    freed_on: list[str] = []
    parse = intake.within_limits

    def watched(*args):
        conv = parse(*args)
        if GATE.encode() in args[1]:
            weakref.finalize(conv, lambda: freed_on.append(threading.current_thread().name))
        return conv

    monkeypatch.setattr(intake, "within_limits", watched)
    big = {"model": "claude-sonnet-5-5", "max_tokens": 16,
           "messages": [{"role": "user", "content": GATE + " " + "words " * 400}]}
    r = httpx.post(gateway.url + "/v1/messages", json=big, headers=HEADERS, timeout=60)
    assert r.status_code == 200, r.text
    for _ in range(500):
        if freed_on:
            break
        time.sleep(0.01)
    assert freed_on and freed_on[0].startswith("prefixgate-big-body"), freed_on


def post(gateway, path: str, body: dict, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(gateway.url + path, json=body, headers=headers or {"authorization": "Bearer sk-caller"}, timeout=30)


LIMIT = "limit of 6 messages per request (max_messages, PREFIXGATE_MAX_MESSAGES)"


def test_openai_chat_over_the_message_limit_is_413_in_openai_shape(gateway) -> None:
    r = post(gateway, "/v1/chat/completions", {"model": "gpt-5.4", "messages": messages(7)})
    assert r.status_code == 413
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == "messages"
    assert "request has 7 messages" in error["message"] and LIMIT in error["message"]


def test_responses_over_the_message_limit_is_413_in_openai_shape(gateway) -> None:
    r = post(gateway, "/v1/responses", {"model": "gpt-5.4", "input": messages(7)})
    assert r.status_code == 413
    assert r.json()["error"]["type"] == "invalid_request_error" and LIMIT in r.json()["error"]["message"]


def test_anthropic_over_the_message_limit_is_413_request_too_large(gateway) -> None:
    r = post(gateway, "/v1/messages", {"model": "claude-sonnet-5-5", "max_tokens": 8, "messages": messages(7)},
             HEADERS)
    assert r.status_code == 413
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == "request_too_large"
    assert LIMIT in r.json()["error"]["message"]


def test_anthropic_over_the_part_limit_names_that_limit(gateway) -> None:
    parts = [{"type": "text", "text": f"part {i}"} for i in range(9)]
    r = post(gateway, "/v1/messages", {"model": "claude-sonnet-5-5", "max_tokens": 8,
                                        "messages": [{"role": "user", "content": parts}]}, HEADERS)
    assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"
    assert "request has 9 content parts" in r.json()["error"]["message"]
    assert "limit of 8 content parts per request (max_content_parts" in r.json()["error"]["message"]


def gemini_contents(n: int) -> dict:
    return {"contents": [{"role": "user" if i % 2 == 0 else "model", "parts": [{"text": f"turn {i}"}]} for i in range(n)]}


@pytest.mark.parametrize("path", ["/v1beta/models/gemini-3.8-flash:generateContent",
                                  "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-3.8-flash:generateContent"])
def test_gemini_and_vertex_gemini_over_the_limit_are_413_in_google_shape(gateway, path) -> None:
    r = post(gateway, path, gemini_contents(7), {"x-goog-api-key": "caller"})
    assert r.status_code == 413
    error = r.json()["error"]
    assert error["code"] == 413 and error["status"] == "INVALID_ARGUMENT" and LIMIT in error["message"]


def test_vertex_claude_over_the_limit_is_413_in_anthropic_shape(gateway) -> None:
    path = "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-5-5:rawPredict"
    r = post(gateway, path, {"anthropic_version": "vertex-2023-10-16", "max_tokens": 8, "messages": messages(7)})
    assert r.status_code == 413
    assert r.json()["error"]["type"] == "request_too_large" and LIMIT in r.json()["error"]["message"]


def test_bedrock_converse_over_the_limit_is_its_validation_exception(gateway) -> None:
    model = quote("anthropic.claude-sonnet-5-5-v1:0", safe="")
    body = {"messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": [{"text": f"turn {i}"}]}
                         for i in range(7)]}
    r = post(gateway, f"/model/{model}/converse", body)
    assert r.status_code == 400
    assert r.headers["x-amzn-errortype"].startswith("ValidationException:")
    assert LIMIT in r.json()["message"]


def test_a_body_within_the_limits_is_answered(gateway) -> None:
    r = post(gateway, "/v1/messages", {"model": "claude-sonnet-5-5", "max_tokens": 8, "messages": messages(5)}, HEADERS)
    assert r.status_code == 200, r.text
