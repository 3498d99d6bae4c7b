"""Response body streams that let a watcher read (and pass on) every chunk the SDK reads.

They replace `response.stream` before the SDK touches the body, so reading, streaming, closing early
and errors behave as before; the watcher learns how the body ended exactly once, whichever comes first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from functools import cache
from types import ModuleType
from typing import Any, Protocol


class Watcher(Protocol):
    def chunk(self, data: bytes) -> bytes: ...
    def flush(self) -> bytes: ...
    def end(self, complete: bool, failure: BaseException | None) -> None: ...


def tapped_stream(family: ModuleType, stream: Any, watcher: Watcher) -> Any:
    is_async = isinstance(stream, family.AsyncByteStream)
    cls = _async_class(family.AsyncByteStream) if is_async else _sync_class(family.SyncByteStream)
    return cls(stream, watcher)


@cache
def _sync_class(base: type) -> type:
    class TappedSyncStream(base):  # type: ignore[misc, valid-type]
        def __init__(self, inner: Any, watcher: Watcher) -> None:
            self._inner = inner
            self._watcher = watcher

        def __iter__(self) -> Iterator[bytes]:
            try:
                for data in self._inner:
                    out = self._watcher.chunk(data)
                    if out:
                        yield out
                rest = self._watcher.flush()
                if rest:
                    yield rest
            except GeneratorExit:          # the reader stopped early
                self._watcher.end(False, None)
                raise
            except BaseException as e:
                self._watcher.end(False, e)
                raise
            self._watcher.end(True, None)

        def close(self) -> None:
            try:
                self._inner.close()
            finally:
                self._watcher.end(False, None)

        @property
        def elapsed(self) -> Any:          # httpx2 reads a response's elapsed time from its stream
            return getattr(self._inner, "elapsed", None)

    return TappedSyncStream


@cache
def _async_class(base: type) -> type:
    class TappedAsyncStream(base):  # type: ignore[misc, valid-type]
        def __init__(self, inner: Any, watcher: Watcher) -> None:
            self._inner = inner
            self._watcher = watcher

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for data in self._inner:
                    out = self._watcher.chunk(data)
                    if out:
                        yield out
                rest = self._watcher.flush()
                if rest:
                    yield rest
            except GeneratorExit:
                self._watcher.end(False, None)
                raise
            except BaseException as e:
                self._watcher.end(False, e)
                raise
            self._watcher.end(True, None)

        async def aclose(self) -> None:
            try:
                await self._inner.aclose()
            finally:
                self._watcher.end(False, None)

        @property
        def elapsed(self) -> Any:
            return getattr(self._inner, "elapsed", None)

    return TappedAsyncStream
