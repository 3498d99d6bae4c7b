"""A real mock-providers server on a free port, shared by the SDK tests of this folder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from prefixgate.simulation.mock.server import MockContext, create_app
from tests.support_services import ServerThread


@pytest.fixture(scope="session")
def mock_server() -> Iterator[tuple[str, MockContext]]:
    """(base URL, context) of a running server; tests use distinct API keys to get fresh caches."""
    ctx = MockContext()
    with ServerThread(create_app(ctx), log_level="critical") as server:
        yield server.url, ctx
