"""Slow clients are let go (slowloris), through a real `prefixgate serve`: connections that trickle their request
headers are closed once `client_timeout_s` passes, and a body that stalls gets a 408 in the caller's shape. Without
the deadlines, 300 such connections held for 90 s kept the gateway's sockets."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.support_services import http_ok, start_on_free_port, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gateway(tmp_path_factory) -> Iterator[int]:
    tmp = tmp_path_factory.mktemp("slow")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFIXGATE_")}
    env.update(PREFIXGATE_CLIENT_TIMEOUT_S="1", PREFIXGATE_LEDGER_PATH=str(tmp / "ledger.sqlite"),
               OPENAI_API_KEY="sk-slow-clients-0001", PREFIXGATE_OPENAI_BASE_URL="http://127.0.0.1:9")

    def launch(port: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "prefixgate.cli", "serve", "--port", str(port)], env=env,
                                stdout=(tmp / "gateway.log").open("w"), stderr=subprocess.STDOUT)
    proc, port = start_on_free_port(launch, lambda p: http_ok(f"http://127.0.0.1:{p}/health"), "the gateway")
    try:
        yield port
    finally:
        proc.terminate()
        proc.wait(20)


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(4096) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_connections_that_trickle_their_headers_are_closed(gateway):
    socks = []
    for _ in range(50):
        sock = socket.create_connection(("127.0.0.1", gateway))
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")    # and never the rest
        sock.settimeout(0.2)
        socks.append(sock)
    silent = socket.create_connection(("127.0.0.1", gateway))     # connects, sends nothing at all
    silent.settimeout(0.2)
    socks.append(silent)
    try:
        for sock in socks:
            wait_until(lambda s=sock: closed_by_server(s), 60, "the gateway closing a slow connection")
        assert http_ok(f"http://127.0.0.1:{gateway}/health")     # and it still serves everyone else
    finally:
        for sock in socks:
            sock.close()


def test_a_stalled_body_is_a_408_in_the_callers_shape(gateway):
    with socket.create_connection(("127.0.0.1", gateway)) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                     b"content-length: 400\r\n\r\n{\"model\": \"gpt-5.4\",")
        sock.settimeout(60)
        answer = b""
        deadline = time.monotonic() + 60
        while b"}}" not in answer and time.monotonic() < deadline:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), answer
    assert b'"error":{"message":"request body stalled' in body
