"""Hostile input at the gateway: huge, deeply nested, invalid UTF-8, lone surrogates, header and path
injection, malformed HTTP. Every one is answered with a 4xx (in the caller's dialect where the request
got that far) and no internals, nothing reaches the upstream unescaped, and the process keeps serving."""

from __future__ import annotations

import logging
import socket

import httpx
import pytest

from prefixgate.gateway.app import create_app
from tests.gateway.support_gateway import ServerThread, policy_for, running_upstream, settings_for

LIMIT = 64 * 1024
POLICY = {"routes": [{"name": "openai", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
                     {"name": "anthropic", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
                     {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}]}
INTERNALS = ("Traceback", 'File "', "site-packages", "Error:", "prefixgate/")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        mp.setenv(var, f"sk-hostile-{var.lower()}")
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path_factory.mktemp("hostile"), max_body_bytes=LIMIT)
        with ServerThread(create_app(settings, policy=policy_for(settings, POLICY))) as gw:
            yield gw, up
    mp.undo()


@pytest.fixture
def gateway_errors(caplog):
    """Errors the gateway logged as unhandled: there must be none."""
    caplog.set_level(logging.ERROR, logger="prefixgate")
    yield caplog
    assert not [r for r in caplog.records if "unhandled" in r.getMessage()]


def raw_http(port: int, request: bytes) -> tuple[int, bytes]:
    """Send bytes as they are (clients refuse to build these requests); the status and body that came back."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            data += chunk
    if not data:
        return 0, b""      # the server closed the connection without an answer: also a refusal
    return int(data.split(b" ", 2)[1]), data.partition(b"\r\n\r\n")[2]


def assert_clean_4xx(status: int, body: bytes | str) -> None:
    text = body.decode(errors="replace") if isinstance(body, bytes) else body
    assert 400 <= status < 500 or status == 0, (status, text[:300])
    assert not any(mark in text for mark in INTERNALS), text[:300]


def chat(text: str = "hi") -> dict:
    return {"model": "gpt-5.4", "messages": [{"role": "user", "content": text}]}


def still_serving(gw) -> None:
    assert httpx.get(gw.url + "/health").status_code == 200
    r = httpx.post(gw.url + "/v1/chat/completions", json=chat())
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions", b"[" * 20_000 + b"]" * 20_000),
    ("/v1/messages", b'{"model":"claude-haiku-4-5","max_tokens":5,"messages":' + b"[" * 3000 + b"]" * 3000 + b"}"),
    ("/v1beta/models/gemini-3.5-flash:generateContent", b'{"contents":[{"parts":[{"text":"x","a":' + b'{"b":' * 3000
     + b"1" + b"}" * 3000 + b"}]}]}"),
])
def test_deeply_nested_json_is_400(stack, gateway_errors, path, body):
    gw, up = stack
    r = httpx.post(gw.url + path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and "nested" in r.text
    assert_clean_4xx(r.status_code, r.text)
    still_serving(gw)


def test_huge_bodies_are_413_with_or_without_a_length(stack, gateway_errors):
    gw, _ = stack
    big = b'{"model":"gpt-5.4","messages":[{"role":"user","content":"' + b"x" * (4 * LIMIT) + b'"}]}'
    r = httpx.post(gw.url + "/v1/chat/completions", content=big)
    assert r.status_code == 413
    chunked = httpx.post(gw.url + "/v1/messages", content=iter([big[i:i + 8192] for i in range(0, len(big), 8192)]))
    assert chunked.status_code == 413 and chunked.json()["error"]["type"] == "request_too_large"
    lying, _ = raw_http(gw.port, b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 99999999999\r\n\r\n{}")
    assert lying == 413
    still_serving(gw)


@pytest.mark.parametrize("body", [
    b'{"model":"gpt-5.4","messages":[{"role":"user","content":"\xff\xfe\xfd"}]}',
    b'\xef\xbb\xbf\xff{"model":"gpt-5.4"}',
    b'{"model":"gpt-5.4","messages":[{"role":"user","content":"\xc3\x28"}]}',
])
def test_invalid_utf8_is_400(stack, gateway_errors, body):
    gw, up = stack
    r = httpx.post(gw.url + "/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert_clean_4xx(r.status_code, r.text)
    still_serving(gw)


def test_lone_surrogates_are_400_and_escaped_pairs_pass(stack, gateway_errors):
    """Valid JSON, but no UTF-8 can carry half a surrogate pair: refused, as the providers do; a whole
    escaped pair (an emoji) is ordinary text."""
    gw, up = stack
    up.reset()
    for escape in (b"\\ud800", b"\\uDFFF x", b"\\ud83d"):
        r = httpx.post(gw.url + "/v1/chat/completions", content=b'{"model":"gpt-5.4","messages":[{"role":"user",'
                       b'"content":"half a pair: ' + escape + b'"}]}', headers={"content-type": "application/json"})
        assert r.status_code == 400 and "surrogate" in r.json()["error"]["message"], r.text
    r = httpx.post(gw.url + "/v1/chat/completions", content=b'{"model":"gpt-5.4","messages":[{"role":"user",'
                   b'"content":"a pair: \\ud83d\\ude00"}]}', headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert up.received[-1].body["messages"][-1]["content"] == "a pair: \U0001f600"
    still_serving(gw)


def test_header_injection_and_malformed_http_are_refused(stack, gateway_errors):
    gw, up = stack
    up.reset()
    body = b'{"model":"gpt-5.4","messages":[{"role":"user","content":"x"}]}'
    cases = [
        # CR/LF smuggled into a header value, bare CR, NUL, obs-fold continuation, a header with no name
        b"x-prefixgate-route: a\rx-evil: 1\r\n",
        b"openai-organization: org\x00evil\r\n",
        b"x-prefixgate-route: a\r\n x-evil: folded\r\n",
        b": nameless\r\n",
        b"transfer-encoding: chunked\r\ntransfer-encoding: identity\r\n",
    ]
    for extra in cases:
        status, answer = raw_http(gw.port, b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: "
                                  b"application/json\r\n" + extra + b"content-length: %d\r\n\r\n" % len(body) + body)
        assert_clean_4xx(status, answer)
    # A request line with a CRLF-laden, percent-encoded model: nothing unescaped reaches the upstream.
    r = httpx.post(gw.url + "/v1beta/models/gemini-3.5-flash%0d%0aX-Evil:%201:generateContent",
                   json={"contents": [{"role": "user", "parts": [{"text": "x"}]}]})
    assert r.status_code < 500
    assert all("\r" not in rec.path and "\n" not in rec.path and "x-evil" not in rec.headers for rec in up.received)
    # Latin-1 bytes in a forwarded header: forwarded or refused, never a crash.
    status, answer = raw_http(gw.port, b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nopenai-organization: "
                              b"\xff\xfe\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
    assert status == 200 or (400 <= status < 500 and not any(m.encode() in answer for m in INTERNALS)), (status, answer)
    # A megabyte of header.
    status, answer = raw_http(gw.port, b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nx-big: " + b"a" * 1_000_000
                              + b"\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
    assert status in (0, 200, 400, 413, 431), status
    still_serving(gw)
