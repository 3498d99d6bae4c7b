"""A scripted burst of traffic through a real gateway in front of the mock providers (whose cache
simulator reports cached tokens the way the providers do), for the dashboard's API and browser tests.

Two routes: `docs-qa` sends one long static system prompt (misses once, then hits); `support-bot` runs
the planner in `checkpoints` mode (no rewrites) with the current time inside its system prompt, so every
request writes a new prefix and none reads one: a volatile span in the prefix.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

from prefixgate.config import Settings
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import ServerThread, policy_for, running_gateway, settings_for
from tests.support_services import wait_until

STATIC = "You answer questions about the Acme product manual. Quote the section you rely on. " * 300
HEADERS = {"x-api-key": "sk-ant-dashboard-test-0001", "anthropic-version": "2023-06-01"}
ROUTES = [
    {"name": "support-bot", "models": ["claude-sonnet-4-6"], "planner": "checkpoints", "targets": [{"upstream": "anthropic"}]},
    {"name": "docs-qa", "models": ["claude-sonnet-5"], "targets": [{"upstream": "anthropic"}]},
]


@dataclass
class Running:
    url: str
    settings: Settings


@contextmanager
def dashboard_gateway(tmp_path, **overrides) -> Iterator[Running]:
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path, **overrides)
        with running_gateway(settings, policy=policy_for(settings, {"routes": ROUTES})) as gw:
            yield Running(gw.url, settings)


def send(url: str, model: str, system: str, question: str, stream: bool = False) -> httpx.Response:
    r = httpx.post(url + "/v1/messages", headers=HEADERS, timeout=30, json={
        "model": model, "max_tokens": 16, "system": system, "stream": stream,
        "messages": [{"role": "user", "content": question}]})
    r.raise_for_status()
    return r


def burst(url: str, rounds: int = 5) -> list[httpx.Response]:
    """The scripted traffic; returns the responses, after the ledger has written them."""
    out = []
    for i in range(rounds):
        stamp = f"Current time: 2026-03-0{i + 1}T09:{10 + i}:00Z."
        out.append(send(url, "claude-sonnet-4-6", f"You are Acme's support agent. {stamp}\n{STATIC}", f"ticket question {i}"))
        out.append(send(url, "claude-sonnet-5", STATIC, f"manual question {i}", stream=i % 2 == 1))
    return out


def wait_for_ledger(url: str, count: int, headers: dict | None = None) -> dict:
    """The summary once the ledger writer has flushed `count` records."""
    seen: dict = {}

    def flushed() -> bool:
        seen.update(httpx.get(url + "/api/summary?range=1h", headers=headers or {}).json())
        return seen["totals"]["requests"] >= count
    wait_until(flushed, 30, f"{count} ledger records")
    return seen
