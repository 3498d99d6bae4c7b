"""Wrapping `anthropic.Anthropic` / `AsyncAnthropic`: a `with_options` copy whose HTTP client plans
`messages.create` and `messages.stream` (beta included); `count_tokens` and the rest pass through."""

from __future__ import annotations

from typing import Any

from prefixgate.sdk.config import WrapConfig
from prefixgate.sdk.http_facade import planning_client
from prefixgate.sdk.interceptor import Interceptor


def wrap_anthropic(client: Any, config: WrapConfig) -> Any:
    return client.with_options(http_client=planning_client(client._client, Interceptor("anthropic", config)))
