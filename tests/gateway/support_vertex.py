"""What the Vertex gateway tests share: the models, a dated prompt, golden costs at Vertex's prices worked by
hand, a service-account key file whose token endpoint is the mock's, a gateway over the mock's Vertex or over a
stub answering a test's own Google errors, and a tenant's google-genai client in Vertex mode."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread

PROJECT, LOCATION = "gw-project", "us-east5"
STATIC_TOKEN = "mock-vertex-token"      # what the mock's Vertex takes as the gateway's access token
CLAUDE = "claude-haiku-4-5@20251001"     # as Vertex names a dated model (newer models have no @date)
GEMINI = "gemini-3.5-flash"
MTOK = Decimal(1_000_000)
# $ per MTok on Vertex. Claude Haiku 4.5 lists at $1 input, $5 output, cache read $0.10, 5-minute write $1.25,
# 1-hour write $2 (https://platform.claude.com/docs/en/about-claude/pricing); a regional endpoint costs 10% more
# from Sonnet 4.5 on (https://docs.claude.com/en/api/claude-on-vertex-ai). Gemini 3.5 Flash at the Gemini API's list
# price (https://ai.google.dev/gemini-api/docs/pricing, shared/reference/provider-caching.md 3.4); storage
# $1.00/MTok-hour (providers.toml's source line).
CLAUDE_PRICE = {"input": Decimal("1.10"), "read": Decimal("0.11"), "write_5m": Decimal("1.375"),
                "write_1h": Decimal("2.20"), "output": Decimal("5.50")}
GEMINI_PRICE = {"input": Decimal("1.50"), "read": Decimal("0.15"), "output": Decimal("9.00"),
                "storage_per_hour": Decimal("1.00")}
EXPLICIT_TTL_H = Decimal(1)
RULES = "\n".join(f"Rule {i}: answer warehouse questions from the shipping manual, section {i}." for i in range(450))
# A fresh prefix per test run (the mock's caches start cold for it), in words: an id would itself be volatile.
SESSION = "Desk motto: " + " ".join(random.Random().sample(["amber", "birch", "cedar", "delta", "ember", "fjord",
                                                             "grove", "heron", "inlet", "juniper"], 6)) + "."


def use_mock_vertex(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway's Vertex upstream in PROJECT and LOCATION with the mock's token, whatever this machine's
    environment names (a credentials file, another Vertex URL)."""
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", PROJECT)
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", LOCATION)
    monkeypatch.setenv("PREFIXGATE_VERTEX_ACCESS_TOKEN", STATIC_TOKEN)
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "PREFIXGATE_VERTEX_BASE_URL", "PREFIXGATE_MOCK_VERTEX_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@contextmanager
def gateway_over_mock_vertex(monkeypatch: pytest.MonkeyPatch, folder: Path,
                             policy: Callable[[str], dict]) -> Iterator[str]:
    """The URL of a gateway whose Vertex upstreams are the in-process mock's, under `policy(mock URL)`."""
    use_mock_vertex(monkeypatch)
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, folder, vertex_base_url=mock.url)
        with running_gateway(settings, policy=policy_for(settings, policy(mock.url))) as gw:
            yield gw.url


@contextmanager
def gateway_over_stub_vertex(monkeypatch: pytest.MonkeyPatch, folder: Path,
                             answer: Callable[[Request], Awaitable[Response]],
                             policy: dict | None = None) -> Iterator[str]:
    """The URL of a gateway whose Vertex upstream is a stub that answers every publisher-model call with
    `answer` (an error worded as Google words it), under `policy` (None: the zero-config routes)."""
    use_mock_vertex(monkeypatch)
    path = "/{version}/projects/{project}/locations/{location}/publishers/google/models/{action}"
    with ServerThread(Starlette(routes=[Route(path, answer, methods=["POST"])])) as vertex:
        settings = settings_for(vertex.url, folder, vertex_base_url=vertex.url)
        with running_gateway(settings, policy=policy_for(settings, policy) if policy else None) as gw:
            yield gw.url


def genai_vertex_caller(gateway_url: str) -> genai.Client:
    """google-genai in Vertex mode as a tenant uses the gateway: its own project, a gateway key for a token."""
    return genai.Client(vertexai=True, project="caller-project", location=LOCATION, credentials=Credentials("gateway-key"),
                        http_options=types.HttpOptions(base_url=gateway_url))


def dated_system(at: float, *, dated: bool = True) -> str:
    """The system prompt real apps send: the current time first, then ~6k tokens of fixed rules."""
    stamp = f"Current time: {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(at))} UTC.\n" if dated else ""
    return f"{stamp}{RULES}\n{SESSION}"


def claude_golden(usage: dict) -> Decimal:
    """Cost of one Claude answer by hand: each token class at its Vertex price."""
    writes = usage.get("cache_creation") or {}
    w1h = int(writes.get("ephemeral_1h_input_tokens") or 0)
    w5m = int(usage.get("cache_creation_input_tokens") or 0) - w1h
    return (int(usage["input_tokens"]) * CLAUDE_PRICE["input"] + int(usage.get("cache_read_input_tokens") or 0)
            * CLAUDE_PRICE["read"] + w5m * CLAUDE_PRICE["write_5m"] + w1h * CLAUDE_PRICE["write_1h"]
            + int(usage["output_tokens"]) * CLAUDE_PRICE["output"]) / MTOK


def gemini_golden(meta: dict, *, created: int = 0) -> Decimal:
    """Cost of one Gemini answer by hand (promptTokenCount includes the cached tokens), plus a context cache
    the request created: its tokens at the input rate and its storage for its TTL."""
    prompt, cached = int(meta["prompt_token_count"]), int(meta.get("cached_content_token_count") or 0)
    output = int(meta.get("candidates_token_count") or 0) + int(meta.get("thoughts_token_count") or 0)
    tokens = ((prompt - cached) * GEMINI_PRICE["input"] + cached * GEMINI_PRICE["read"] + output * GEMINI_PRICE["output"]
              + created * GEMINI_PRICE["input"] + created * EXPLICIT_TTL_H * GEMINI_PRICE["storage_per_hour"])
    return tokens / MTOK


def service_account_file(folder: Path, token_uri: str) -> Path:
    """A service-account key file as Google issues one, with a fresh RSA key, for the token endpoint `token_uri`."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    path = folder / "service-account.json"
    path.write_text(json.dumps({
        "type": "service_account", "project_id": PROJECT, "private_key_id": "key-1", "private_key": key,
        "client_email": f"gateway@{PROJECT}.iam.gserviceaccount.com", "client_id": "1", "token_uri": token_uri}))
    return path
