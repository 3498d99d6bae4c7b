"""A real `prefixgate mock-providers` server for the SDK wrapper tests, and prompts that cache."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from prefixgate.simulation.mock.server import MockContext, create_app
from tests.support_services import ServerThread

POLICY = "Policy: refunds are accepted within 30 days of purchase; shipping is free over $50. " * 60
ANTHROPIC_MODEL = "claude-sonnet-5"
OPENAI_MODEL = "gpt-5.4"
GEMINI_MODEL = "gemini-3.5-flash"


def dated_system(day: int) -> str:
    """A long support prompt whose second line changes on every request (a timestamp): it defeats caching
    unless the line moves out. (A bare date would stay put on a route's first request: the planner moves a
    date only once the route has seen it change, as it may be a fixed example in the instructions.)"""
    return f"You are Ava, the ACME support agent.\nCurrent time: 2026-11-{day:02d}T09:00:00Z.\n{POLICY}"


def fresh_key(prefix: str = "sk-test") -> str:
    """An API key of its own: the mock gives every key its own cache workspace."""
    return f"{prefix}-{uuid.uuid4().hex}"


@contextmanager
def running_mock_providers() -> Iterator[str]:
    """Base URL of a running mock-providers server, stopped on exit."""
    with ServerThread(create_app(MockContext()), log_level="critical") as server:
        yield server.url
