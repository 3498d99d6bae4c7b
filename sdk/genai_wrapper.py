"""Wrapping `google.genai.Client`: a copy whose API client sends through planning HTTP clients.

google-genai has no `with_options`, so the copy is built by hand: the client and its `BaseApiClient`
are copied, the copy's httpx clients become facades over the original's (set in its `http_options`
too, which also makes async calls use httpx rather than aiohttp, so they can be planned), and every
API module (`models`, `caches`, `aio`, ...) is rebuilt on the copied API client. Planned calls:
`generate_content` and `generate_content_stream`, sync and async, and `interactions.create` (whole or
streamed); `caches.*` pass through and are kept for the replay trace.
"""

from __future__ import annotations

import copy
from typing import Any

from prefixgate.sdk.config import WrapConfig
from prefixgate.sdk.http_facade import planning_client
from prefixgate.sdk.interceptor import Interceptor


def wrap_genai(client: Any, config: WrapConfig) -> Any:
    api = client._api_client
    if api._httpx_client is None:
        raise ValueError("this google-genai client sends through google-auth's requests session (Vertex mTLS), "
                         "which prefixgate cannot plan; pass http_options=HttpOptions(httpx_client=...)")
    interceptor = Interceptor("gemini", config)
    sync_client = planning_client(api._httpx_client, interceptor)
    async_client = planning_client(api._async_httpx_client, interceptor) if api._async_httpx_client is not None else None
    wrapped_api = copy.copy(api)
    wrapped_api._http_options = api._http_options.model_copy(
        update={"httpx_client": sync_client, "httpx_async_client": async_client})
    wrapped_api._httpx_client = sync_client
    wrapped_api._async_httpx_client = async_client
    wrapped_api._aiohttp_sessions = {}
    # google-genai's Client closes its httpx client when it is collected, and the facades send through that
    # client: `wrap(genai.Client())` would lose the original at once, and its first call raise "client closed".
    wrapped_api._prefixgate_original = client
    wrapped = copy.copy(client)
    wrapped._api_client = wrapped_api
    for name, value in list(vars(wrapped).items()):
        if value is not None and getattr(value, "_api_client", None) is api:
            setattr(wrapped, name, type(value)(wrapped_api))
    if "_nextgen_client_instance" in vars(wrapped):
        wrapped._nextgen_client_instance = None     # rebuilt lazily, on the wrapped API client
    return wrapped
