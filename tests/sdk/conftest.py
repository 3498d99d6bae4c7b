"""One `prefixgate mock-providers` per test module: the SDKs' clients point at it (`mock_url`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sdk.support_sdk import running_mock_providers


@pytest.fixture(scope="module")
def mock_url() -> Iterator[str]:
    with running_mock_providers() as url:
        yield url
