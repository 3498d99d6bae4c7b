"""`prefixgate.client(provider, base_url=...)`: a real SDK client pointed at a running gateway."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal, overload
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from anthropic import Anthropic, AsyncAnthropic
    from google.genai import Client as GenaiClient
    from openai import AsyncOpenAI, OpenAI

PROVIDERS = ("openai", "anthropic", "gemini")
KEY_ENV = {"openai": ("OPENAI_API_KEY",), "anthropic": ("ANTHROPIC_API_KEY",),
           "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
ROUTE_HEADER = "x-prefixgate-route"
TENANT_HEADER = "x-prefixgate-tenant"


@overload
def client(provider: Literal["openai"], *, base_url: str, api_key: str | None = ..., route: str | None = ...,
           tenant: str | None = ..., async_client: Literal[False] = ..., **options: Any) -> OpenAI: ...
@overload
def client(provider: Literal["openai"], *, base_url: str, api_key: str | None = ..., route: str | None = ...,
           tenant: str | None = ..., async_client: Literal[True], **options: Any) -> AsyncOpenAI: ...
@overload
def client(provider: Literal["anthropic"], *, base_url: str, api_key: str | None = ..., route: str | None = ...,
           tenant: str | None = ..., async_client: Literal[False] = ..., **options: Any) -> Anthropic: ...
@overload
def client(provider: Literal["anthropic"], *, base_url: str, api_key: str | None = ..., route: str | None = ...,
           tenant: str | None = ..., async_client: Literal[True], **options: Any) -> AsyncAnthropic: ...
@overload
def client(provider: Literal["gemini"], *, base_url: str, api_key: str | None = ..., route: str | None = ...,
           tenant: str | None = ..., async_client: bool = ..., **options: Any) -> GenaiClient: ...


def client(provider: str, *, base_url: str, api_key: str | None = None, route: str | None = None,
           tenant: str | None = None, async_client: bool = False, **options: Any) -> Any:
    """An OpenAI, Anthropic or google-genai client for the gateway at `base_url` (its root URL).

    api_key: the gateway key (or, on an open gateway, your provider key, which it forwards); default
             $PREFIXGATE_API_KEY, then the provider's own variable. `route` and `tenant` go out as
             `x-prefixgate-route` / `x-prefixgate-tenant` on every request. Other keyword arguments go to
             the SDK's constructor. google-genai has one client for both: use `.aio` for async.
    """
    if provider not in PROVIDERS:
        raise ValueError(f"prefixgate.client() provider must be one of {', '.join(PROVIDERS)}, got {provider!r}")
    root = _root(base_url)
    key = api_key or os.environ.get("PREFIXGATE_API_KEY") or next(
        (os.environ[v] for v in KEY_ENV[provider] if os.environ.get(v)), None)
    if not key:
        raise ValueError(f"prefixgate.client({provider!r}) needs an API key: pass api_key= (the gateway's key) or set "
                         f"PREFIXGATE_API_KEY or {' / '.join(KEY_ENV[provider])}")
    headers = {}
    for name, value, header in (("route", route, ROUTE_HEADER), ("tenant", tenant, TENANT_HEADER)):
        if value is not None:
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"prefixgate.client({name}=...) must be a non-empty string, got {value!r}")
            headers[header] = value
    if provider == "openai":
        import openai

        cls = openai.AsyncOpenAI if async_client else openai.OpenAI
        return cls(api_key=key, base_url=f"{root}/v1", default_headers=headers, **options)
    if provider == "anthropic":
        import anthropic

        cls = anthropic.AsyncAnthropic if async_client else anthropic.Anthropic
        return cls(api_key=key, base_url=root, default_headers=headers, **options)
    from google import genai
    from google.genai import types

    http_options = options.pop("http_options", None) or types.HttpOptions()
    if isinstance(http_options, dict):
        http_options = types.HttpOptions(**http_options)
    http_options = http_options.model_copy(update={"base_url": root, "headers": {**(http_options.headers or {}), **headers}})
    return genai.Client(api_key=key, http_options=http_options, **options)


def _root(base_url: str) -> str:
    if not isinstance(base_url, str):
        raise TypeError(f"prefixgate.client(base_url=...) must be a string, got {type(base_url).__name__}")
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"prefixgate.client(base_url=...) must be the gateway's http(s) URL, got {base_url!r}")
    root = base_url.strip().rstrip("/")
    # The gateway's root: the SDKs add their own /v1 (OpenAI's base URL includes it).
    return root.removesuffix("/v1")
