"""The engine for asyncio callers (the HTTP server, the gateway in-process): one thread steps it, each request
reads its outputs from its own queue.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from prefixgate.errors import RequestError
from prefixgate.local_backend.config import EngineConfig
from prefixgate.local_backend.engine import IterationStats, LLMEngine, Prompt, queue_full
from prefixgate.local_backend.outputs import RequestOutput
from prefixgate.local_backend.sampling_params import SamplingParams
from prefixgate.local_backend.sequence import Sequence

log = logging.getLogger("prefixgate.local_backend")

StepObserver = Callable[[IterationStats, LLMEngine], None]


class RequestStream:
    """The outputs of one request as they come: cumulative RequestOutputs, the last one finished."""

    def __init__(self, owner: AsyncEngine, seq: Sequence, loop: asyncio.AbstractEventLoop) -> None:
        self.request_id = seq.request_id
        self.seq = seq
        self._owner = owner
        self._loop = loop
        self._queue: asyncio.Queue[RequestOutput | BaseException] = asyncio.Queue()
        self.finished = False

    def put(self, item: RequestOutput | BaseException) -> None:  # engine thread
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the caller's loop is gone; nobody is listening
            pass

    def __aiter__(self) -> AsyncIterator[RequestOutput]:
        return self._iterate()

    def close(self) -> None:
        """Abort the request unless it finished: for a consumer that may never have started iterating (a
        never-started generator's aclose runs none of its code, so `_iterate`'s cleanup cannot do this)."""
        if not self.finished:
            self.finished = True
            self._owner.abort(self.request_id)

    async def _iterate(self) -> AsyncIterator[RequestOutput]:
        try:
            while not self.finished:
                item = await self._queue.get()
                if isinstance(item, BaseException):
                    self.finished = True
                    raise item
                self.finished = item.finished
                yield item
        finally:
            if not self.finished:  # the consumer left early (client disconnect): free its blocks now
                self._owner.abort(self.request_id)


class AsyncEngine:
    def __init__(self, engine: LLMEngine, *, observer: StepObserver | None = None) -> None:
        self.engine = engine
        self.observer = observer
        self._commands: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._streams: dict[str, RequestStream] = {}
        self._pending_adds = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None

    @classmethod
    def from_options(cls, model: str = "smollm2-135m", **options: Any) -> AsyncEngine:
        return cls(LLMEngine(EngineConfig.from_kwargs(model=model, **options)))

    @property
    def model_name(self) -> str:
        return self.engine.config.model_name

    def start(self) -> None:
        if self._thread is None:
            self._stop = False
            self._thread = threading.Thread(target=self._run, name="prefixgate-engine", daemon=True)
            self._thread.start()

    def shutdown(self) -> None:
        self._stop = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self.engine.close()

    def add_request(self, prompt: Prompt, params: SamplingParams, *, request_id: str | None = None,
                    cache_salt: str | None = None, priority: int = 0) -> RequestStream:
        """Validate and queue a request; raises RequestError (400, or 429 when the queue is full) at once."""
        self.start()
        seq = self.engine.make_sequence(prompt, params, request_id=request_id, cache_salt=cache_salt,
                                        priority=priority)
        with self._lock:
            if len(self.engine.scheduler.waiting) + self._pending_adds >= self.engine.config.max_waiting:
                raise queue_full()
            self._pending_adds += 1
        stream = RequestStream(self, seq, asyncio.get_running_loop())
        self._send("add", stream)
        return stream

    async def generate(self, prompt: Prompt, params: SamplingParams, *, request_id: str | None = None,
                       cache_salt: str | None = None) -> AsyncIterator[RequestOutput]:
        async for out in self.add_request(prompt, params, request_id=request_id, cache_salt=cache_salt):
            yield out

    def abort(self, request_id: str) -> None:
        self._send("abort", request_id)

    def _send(self, command: str, arg: Any) -> None:
        self._commands.put((command, arg))
        self._wake.set()

    # -- the engine thread ---------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop:
            self._apply_commands()
            if not self.engine.has_unfinished_requests():
                self._wake.wait()
                self._wake.clear()
                continue
            try:
                outputs = self.engine.step()
            except Exception as e:  # a bug, not bad input: fail what is in flight, keep serving
                log.exception("engine step failed")
                self._fail_all(e)
                continue
            if self.observer is not None:
                self.observer(self.engine.last_stats, self.engine)
            self._deliver(outputs)

    def _apply_commands(self) -> None:
        while True:
            try:
                command, arg = self._commands.get_nowait()
            except queue.Empty:
                return
            if command == "add":
                with self._lock:
                    self._pending_adds -= 1
                try:
                    self.engine.add_sequence(arg.seq)
                except RequestError as e:
                    arg.put(e)
                    continue
                self._streams[arg.request_id] = arg
            elif command == "abort":
                out = self.engine.abort_request(arg)
                if out is not None:
                    if self.observer is not None:
                        self.observer(IterationStats(finished_reasons=["abort"]), self.engine)
                    self._deliver([out])

    def _deliver(self, outputs: list[RequestOutput]) -> None:
        for out in outputs:
            stream = self._streams.pop(out.request_id) if out.finished else self._streams.get(out.request_id)
            if stream is not None:
                stream.put(out)

    def _fail_all(self, error: Exception) -> None:
        err = RequestError(f"the engine failed on this request: {error}", status=500, kind="server")
        for request_id, stream in list(self._streams.items()):
            self.engine.abort_request(request_id)
            stream.put(err)
        self._streams.clear()
