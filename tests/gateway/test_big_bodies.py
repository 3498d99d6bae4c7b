"""Fair under big bodies: a big request is worked off the event loop, so `/health` and other callers are answered
while it is; a body with more messages or content parts than the gateway takes is refused with a 413 in the
caller's own error shape that names the limit (Bedrock: its ValidationException, the only error its API defines
for a request it will not take)."""

from __future__ import annotations

import asyncio
import gc
import itertools
import sys
import threading
import time
import weakref
from urllib.parse import quote

import httpx
import pytest

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


def test_a_finished_graph_is_freed_by_a_worker_in_slices_and_shared_values_are_left_alone() -> None:
    freed_on: list[int] = []
    order: list[tuple[str, int]] = []
    shared = [{"memo": "value"}]
    Finalised.threads.clear()

    async def main() -> int:
        root = {"nodes": [Node(i) for i in range(3 * off_loop.SLICE)], "shared": shared, "response": Finalised()}
        for node in root["nodes"]:
            weakref.finalize(node, lambda i=node.i: (freed_on.append(threading.get_ident()), order.append(("node", i))))
            weakref.finalize(node.blocks, lambda i=node.i: (freed_on.append(threading.get_ident()),
                                                            order.append(("blocks", i))))
        del node
        off_loop.let_go_later(root)
        del root
        for _ in range(500):
            if len(freed_on) == 6 * off_loop.SLICE and Finalised.threads:
                break
            await asyncio.sleep(0.01)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert len(freed_on) == 6 * off_loop.SLICE, "not all of the graph was freed"
    assert loop_thread not in freed_on, "the event loop freed part of the graph"
    assert Finalised.threads == [loop_thread], "an object with a finaliser must be dropped on the loop"
    assert shared == [{"memo": "value"}] and sys.getrefcount(shared) == 2      # untouched, still held here only
    # Each object on its own: freed in one cascade, a node's blocks would go the moment it went.
    cascades = [a for a, b in itertools.pairwise(order) if a[0] == "node" and b == ("blocks", a[1])]
    assert not cascades, f"{len(cascades)} nodes took their blocks with them"


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
