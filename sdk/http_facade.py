"""The HTTP client a wrapped SDK client talks through: the application's own httpx client, with the
interceptor in front of `send`.

It subclasses the inner client's httpx family (the SDKs check `isinstance`) but never runs the base
constructor: every attribute (timeouts, headers, auth, event hooks, proxies, the connection pool) falls
through to the inner client, so the wrapped client keeps every setting of the client it wraps and shares
its pool, as `client.with_options()` does.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from prefixgate.sdk.http_family import family_of

if TYPE_CHECKING:
    from prefixgate.sdk.interceptor import Interceptor

_OWN = ("_prefixgate_inner", "_prefixgate_interceptor")


def planning_client(inner: Any, interceptor: Interceptor) -> Any:
    """A facade over the httpx(2) `Client` or `AsyncClient` `inner`."""
    if is_planning_client(inner):
        raise ValueError("this client is already wrapped by prefixgate; wrap the original client instead")
    family = family_of(inner)
    cls = _async_class(family.AsyncClient) if isinstance(inner, family.AsyncClient) else _sync_class(family.Client)
    facade = object.__new__(cls)
    object.__setattr__(facade, "_prefixgate_inner", inner)
    object.__setattr__(facade, "_prefixgate_interceptor", interceptor)
    return facade


def is_planning_client(obj: Any) -> bool:
    return "_prefixgate_inner" in getattr(obj, "__dict__", {})


class _Delegate:
    def __getattr__(self, name: str) -> Any:
        if name in _OWN:
            raise AttributeError(name)
        return getattr(self._prefixgate_inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._prefixgate_inner, name, value)

    def build_request(self, *args: Any, **kwargs: Any) -> Any:
        return self._prefixgate_inner.build_request(*args, **kwargs)

    @property
    def is_closed(self) -> bool:
        return self._prefixgate_inner.is_closed

    def __repr__(self) -> str:
        return f"<prefixgate planning client over {self._prefixgate_inner!r}>"


@cache
def _sync_class(base: type) -> type:
    class PlanningClient(_Delegate, base):  # type: ignore[misc, valid-type]
        def send(self, request: Any, **kwargs: Any) -> Any:
            return self._prefixgate_interceptor.send(self._prefixgate_inner, request, **kwargs)

        def close(self) -> None:
            self._prefixgate_inner.close()

        def __enter__(self) -> Any:
            self._prefixgate_inner.__enter__()
            return self

        def __exit__(self, *exc: Any) -> None:
            self._prefixgate_inner.__exit__(*exc)

    return PlanningClient


@cache
def _async_class(base: type) -> type:
    class AsyncPlanningClient(_Delegate, base):  # type: ignore[misc, valid-type]
        async def send(self, request: Any, **kwargs: Any) -> Any:
            return await self._prefixgate_interceptor.asend(self._prefixgate_inner, request, **kwargs)

        async def aclose(self) -> None:
            await self._prefixgate_inner.aclose()

        async def __aenter__(self) -> Any:
            await self._prefixgate_inner.__aenter__()
            return self

        async def __aexit__(self, *exc: Any) -> None:
            await self._prefixgate_inner.__aexit__(*exc)

    return AsyncPlanningClient
