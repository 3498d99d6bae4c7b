"""An upload whose sender stalls mid-body is let go with a 408 in the caller's shape (never a 500, never a
half file at the provider): the gateway streams the body upstream as it arrives, so the wait for the next piece
is bounded by `client_timeout_s` as a buffered body's is."""

from __future__ import annotations

import json
import socket

import openai

from prefixgate.policies import hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread

KEY = "pg-stall-0123456789ab"


def test_an_upload_that_stalls_mid_body_is_a_408(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-gateway-own-0000")
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path, client_timeout_s=1)
        policy = policy_for(settings, {"routes": [{"name": "o", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}],
                                       "keys": [{"name": "k", "key_sha256": hash_key(KEY), "tenant": "t"}]})
        with running_gateway(settings, policy=policy) as gw, socket.create_connection(("127.0.0.1", gw.port)) as s:
            # 1000 bytes promised, 5 sent, then nothing.
            s.sendall(f"POST /v1/files HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer {KEY}\r\n"
                      "content-type: multipart/form-data; boundary=b\r\ncontent-length: 1000\r\n\r\n--b\r\n".encode())
            s.settimeout(30)
            answer = b""
            while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                piece = s.recv(4096)
                if not piece:
                    break
                answer += piece
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408")
            assert json.loads(body)["error"]["type"] == "timeout_error"
            assert openai.OpenAI(base_url=f"{gw.url}/v1", api_key=KEY, max_retries=0).files.list().data == []
