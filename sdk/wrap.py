"""`prefixgate.wrap(client)`: the same client, planning its prompts and pricing its answers in-process.

The result is a real client of the same class (a copy sharing the original's connection pool), so
methods, return types, exceptions, retries and `with_raw_response` / `with_streaming_response` are the
SDK's own; type checkers see the wrapped client's type through the overloads below.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, overload

from prefixgate.cache_planner import CallerCheckpoints, PlannerState
from prefixgate.sdk.azure import is_azure
from prefixgate.sdk.config import WrapConfig
from prefixgate.sdk.usage_ledger import DEFAULT_LEDGER, Ledger

if TYPE_CHECKING:
    from anthropic import Anthropic, AsyncAnthropic
    from google.genai import Client as GenaiClient
    from openai import AsyncOpenAI, OpenAI

SUPPORTED = "openai.OpenAI, openai.AsyncOpenAI, anthropic.Anthropic, anthropic.AsyncAnthropic, google.genai.Client"


@overload
def wrap(client: OpenAI, *, route: str | None = ..., rewrite: bool = ..., ledger: Ledger | None = ...,
         tenant: str | None = ..., state: PlannerState | None = ...,
         caller_checkpoints: CallerCheckpoints = ..., deployments: Mapping[str, str] | None = ...) -> OpenAI: ...
@overload
def wrap(client: AsyncOpenAI, *, route: str | None = ..., rewrite: bool = ..., ledger: Ledger | None = ...,
         tenant: str | None = ..., state: PlannerState | None = ...,
         caller_checkpoints: CallerCheckpoints = ..., deployments: Mapping[str, str] | None = ...) -> AsyncOpenAI: ...
@overload
def wrap(client: Anthropic, *, route: str | None = ..., rewrite: bool = ..., ledger: Ledger | None = ...,
         tenant: str | None = ..., state: PlannerState | None = ...,
         caller_checkpoints: CallerCheckpoints = ...) -> Anthropic: ...
@overload
def wrap(client: AsyncAnthropic, *, route: str | None = ..., rewrite: bool = ..., ledger: Ledger | None = ...,
         tenant: str | None = ..., state: PlannerState | None = ...,
         caller_checkpoints: CallerCheckpoints = ...) -> AsyncAnthropic: ...
@overload
def wrap(client: GenaiClient, *, route: str | None = ..., rewrite: bool = ..., ledger: Ledger | None = ...,
         tenant: str | None = ..., state: PlannerState | None = ...,
         caller_checkpoints: CallerCheckpoints = ...) -> GenaiClient: ...


def wrap(client: Any, *, route: str | None = None, rewrite: bool = True, ledger: Ledger | None = None,
         tenant: str | None = None, state: PlannerState | None = None, caller_checkpoints: CallerCheckpoints = "keep",
         deployments: Mapping[str, str] | None = None) -> Any:
    """A copy of `client` whose generate calls are planned before they leave and priced when they end.

    route:   the planner's route name (what it learns stability under); default: a fingerprint of
             each prompt's shape, so requests from one template share a route.
    rewrite: move volatile text after the stable prefix (True) or only place checkpoints (False).
    ledger:  where records go; default `prefixgate.sdk.ledger`.
    tenant:  recorded on every record and trace line (the cache scope in `prefixgate replay`).
    state:   planner state to share between wrapped clients (e.g. `PlannerState(store=RedisStore(url))`);
             default: this wrapped client's own.
    caller_checkpoints: what the planner does with `cache_control` / breakpoints your own code placed:
             "keep" them as sent (default), "add" its own where they pay, or "optimize" (replace them
             where its cost model expects savings). See docs/planner.md.
    deployments: Azure OpenAI only: deployment name -> the model it runs (`{"chat-prod": "gpt-5.4"}`), what its calls
             are planned for, and priced as where the answer names no model (one that does is priced as that model).
    """
    openai = sys.modules.get("openai")
    config = WrapConfig.build(route=route, rewrite=rewrite, ledger=ledger, tenant=tenant, state=state,
                              default_ledger=DEFAULT_LEDGER, caller_checkpoints=caller_checkpoints,
                              azure=openai is not None and is_azure(client, openai), deployments=deployments)
    if openai is not None and isinstance(client, (openai.OpenAI, openai.AsyncOpenAI)):
        from prefixgate.sdk.openai_wrapper import wrap_openai

        return wrap_openai(client, config)
    anthropic = sys.modules.get("anthropic")
    if anthropic is not None and isinstance(client, (anthropic.Anthropic, anthropic.AsyncAnthropic)):
        from prefixgate.sdk.anthropic_wrapper import wrap_anthropic

        return wrap_anthropic(client, config)
    genai = sys.modules.get("google.genai")
    if genai is not None and isinstance(client, genai.Client):
        from prefixgate.sdk.genai_wrapper import wrap_genai

        return wrap_genai(client, config)
    if genai is not None and isinstance(client, genai.client.AsyncClient):
        raise TypeError("wrap the google.genai.Client itself and use `.aio` on the result")
    raise TypeError(f"prefixgate.wrap() takes one of {SUPPORTED}; got {type(client).__module__}.{type(client).__name__}")
