"""The client matrix's one stack: `prefixgate mock-providers` and `prefixgate serve` in zero config, as separate
processes, shared by every client test (each test takes a fresh caller key, so a fresh mock workspace and a cold
cache). The callers' keys reach the mock as the providers' keys would reach the providers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support_stack import running_stack

# A 4,000-word system prompt (5,300 tokens): past every provider's minimum cacheable prefix (Gemini 3.5 Flash: 4,096).
SYSTEM = "You are the travel desk of ACME Tours. Answer from the handbook below.\n" + " ".join(
    f"Rule {i}: travellers keep receipts for the booking desk and the refund office." for i in range(330))
WEATHER_PROMPT = "Get the weather in Paris, then tell me."


@pytest.fixture(scope="session")
def gateway(tmp_path_factory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("clients")
    env = {"PREFIXGATE_LEDGER_PATH": str(tmp / "ledger.sqlite"), "OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": "",
           "GEMINI_API_KEY": "", "GOOGLE_API_KEY": ""}
    with running_stack(tmp, env) as (gw_url, _):
        yield gw_url


@pytest.fixture
def key() -> str:
    """A caller key of its own: a fresh workspace at the mock, so each test starts cold."""
    return "sk-clients-" + uuid.uuid4().hex
