"""Wrapping `openai.OpenAI` / `AsyncOpenAI` (and subclasses such as `AzureOpenAI`): a `with_options` copy
whose HTTP client plans `chat.completions` calls. Every other endpoint passes through unchanged."""

from __future__ import annotations

from typing import Any

from prefixgate.sdk.config import WrapConfig
from prefixgate.sdk.http_facade import planning_client
from prefixgate.sdk.interceptor import Interceptor


def wrap_openai(client: Any, config: WrapConfig) -> Any:
    return client.with_options(http_client=planning_client(client._client, Interceptor("openai", config)))
