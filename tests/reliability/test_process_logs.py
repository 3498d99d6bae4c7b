"""What a real `prefixgate serve` process writes to its log (stdout and stderr, captured to a file):
never a provider key, at any level, and no prompt text by default; the ledger holds no prompt text
by default either. In-process caplog would miss uvicorn's and any print's output; this reads the file."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.gateway.support_gateway import ServerThread
from tests.reliability.support_gateway_process import PROVIDER_KEYS, GatewayProcess
from tests.reliability.support_upstream import Tap, mock_upstream, nonce, request_for

MODELS = {"openai": "gpt-5.4-mini", "anthropic": "claude-sonnet-4-6", "gemini": "gemini-3.5-flash"}
# The mock refuses these with 401 (the error path a key would leak through).
REFUSED = {"openai": "gpt-5.4-nano", "anthropic": "claude-haiku-4-5", "gemini": "gemini-3.8-flash"}
FAULTS = {"faults": [{"fault": "status=401", "model": model} for model in REFUSED.values()]}
CALLER_KEY = "caller-key-not-a-secret"


def traffic(url: str) -> list[str]:
    """Every dialect, streamed and not, plus the error paths; returns the prompt texts sent."""
    prompts = []
    headers = {"authorization": f"Bearer {CALLER_KEY}", "x-api-key": CALLER_KEY, "x-goog-api-key": CALLER_KEY}
    for dialect, model in MODELS.items():
        for stream in (False, True):
            prompt = f"Tell me about the parcel {nonce()}."
            prompts.append(prompt)
            path, body = request_for(dialect, model, prompt, stream)
            assert httpx.post(url + path, json=body, headers=headers, timeout=60).status_code == 200, (dialect, stream)
        # The upstream refuses, and the caller sends garbage.
        path, body = request_for(dialect, REFUSED[dialect], "refused", False)
        # The gateway's own provider key refused: a 502 (not the caller's key's 401).
        assert httpx.post(url + path, json=body, headers=headers, timeout=60).status_code == 502, dialect
        assert httpx.post(url + path, content=b"{not json", headers=headers, timeout=60).status_code == 400
    return prompts


@pytest.mark.slow
@pytest.mark.parametrize("level", ["debug", None])
def test_serve_process_logs_no_key_and_by_default_no_prompt(tmp_path, level):
    settings = {"log_level": level} if level else {}
    with ServerThread(mock_upstream(FAULTS, Tap())) as upstream:
        gw = GatewayProcess(upstream.url, tmp_path / "ledger.sqlite", **settings)
        if level is None:
            del gw.env["PREFIXGATE_LOG_LEVEL"]          # the default level, as a user runs it
        with gw:
            prompts = traffic(gw.url)
    log = gw.log_path.read_text()
    request_lines = [json.loads(line) for line in log.splitlines() if line.startswith("{") and '"msg":"request"' in line]
    # The log was captured: one JSON line per answered request, keys and all.
    assert len(request_lines) >= len(prompts), log[-2000:]
    for name, key in PROVIDER_KEYS.items():
        assert key not in log, name
    ledger = b"".join(p.read_bytes() for p in tmp_path.glob("ledger.sqlite*"))
    assert ledger, "no ledger written"
    for prompt in prompts:
        assert prompt.encode() not in ledger
        if level is None:
            assert prompt not in log
