"""Big bodies are worked off the event loop, so one huge request does not stall every other caller.

Parsing, planning and encoding are synchronous and take time in proportion to a body's messages: some
seconds for 200,000 of them, during which a request on the event loop would hold every other request, and
`/health`, waiting. A body of `off_loop_bytes` or more has that work done on a worker thread instead.

Threads, not processes: the work needs the gateway's state (the planner's learned routes, the resent-body
memo), which a process could not share, and its results are large object graphs that would cost as much to
ship back as to build. Python's GIL is still held by the worker while it runs Python code, but the
interpreter hands it to a waiting thread every switch interval (1 ms while a big body is worked, `_Window`),
so the event loop gets a turn every few ms; `bench/fairness.py` measures what `/health` then waits. The
parsing scans one message at a time (`dialects/resent.py`), never one C call over the whole body. What is
left: the loop's own work on the body (reading its bytes, writing them upstream), a few C passes over all
blocks, and, on a machine with more runnable threads than cores, the OS pausing the worker while it holds
the GIL. Small bodies stay on the loop: a thread hop would cost them more than their whole parse.

Freeing is work too: a finished 200,000-message request drops millions of objects at once. Its response
(`LetGoAfter`) hands what it held to a worker once sent, which frees it a slice at a time (`_dismantle`).

The planner's shared state takes its own locks (`cache_planner/stability.py`), the body memos theirs, so a
worker and the loop may plan at once. At most `WORKERS` bodies are worked at a time; more wait their turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import sys
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from prefixgate.slices import free_in_slices

T = TypeVar("T")

# Two workers: with the GIL, more would not go faster, and each big body waiting holds its memory anyway.
WORKERS = 2
_POOL = ThreadPoolExecutor(WORKERS, thread_name_prefix="prefixgate-big-body")


async def work(size: int, threshold: int, fn: Callable[..., T], *args: object,
               parts: Callable[[T], tuple[object, list]] | None = None) -> T:
    """`fn(*args)`, on a worker thread when `size` (the body's bytes) is `threshold` or more, else here.
    The worker runs in a copy of this task's context (the request's contextvars, e.g. its memo scope).

    `parts(result)`: (an object, a long list it alone holds) whose items, once the object is gone, the
    workers let go of in slices (`_let_go`)."""
    if size < threshold:
        return fn(*args)
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(_POOL, _in_window, context, fn, args, parts)


def _in_window(context: contextvars.Context, fn: Callable[..., T], args: tuple,
               parts: Callable[[T], tuple[object, list]] | None) -> T:
    with _WINDOW:
        result = context.run(fn, *args)
        if parts is not None:
            owner, items = parts(result)
            weakref.finalize(owner, _POOL.submit, _let_go, list(items)).atexit = False
        return result


def planned(prep: Any) -> tuple[object, list]:
    """`parts` of a prepared request (`Proxy.prepare`): its plan's draft, with one segment per message.
    The plan's summary (headers, ledger) walks every block once and keeps the count: walked here, not on the
    loop."""
    _ = prep.plan.summary
    conv = prep.plan.conversation
    return conv, conv.segments


def _let_go(items: list) -> None:
    """Free `items` a slice at a time. Freeing a request's 200,000 planned messages at once is one C call
    (each list's items, then theirs) that holds the GIL ~150 ms; wherever the last reference drops, the event
    loop waits it out. With the workers holding a reference to each item, the owner's own list frees in
    ~1 ms on the loop, and the items' memory goes here, where the GIL changes hands between slices."""
    with _WINDOW:
        free_in_slices(items)


SLICE = 512


class LetGoAfter(Response):
    """A big request's response: sent as `inner` is, after which what `inner` held (through its background
    task, the request's call, plan and record) is freed by a worker (`let_go_later`), not by the loop."""

    def __init__(self, inner: Response) -> None:   # Response's own fields are never read: `inner` answers
        self.inner: Response | None = inner
        self.status_code, self.background = inner.status_code, None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        inner = self.inner
        if inner is None:
            raise RuntimeError("a LetGoAfter response is sent once: what it held is already let go")
        self.inner = None
        try:
            await inner(scope, receive, send)
            if self.background is not None:     # one a framework added after the endpoint returned
                await self.background()
        finally:
            let_go_later(inner)
            del inner


def let_go_later(root: object) -> None:
    """Hand `root`, a finished request's object graph that the caller is about to drop, to a worker that
    frees it a slice at a time (`_dismantle`). The caller must hold no other reference once this returns."""
    loop = asyncio.get_running_loop()
    try:
        _POOL.submit(_dismantle, [root], loop)
    except RuntimeError:    # the interpreter is shutting down: the pool takes no more work, so it is freed here
        pass


def _dismantle(held: list, loop: asyncio.AbstractEventLoop) -> None:
    """Free the graph under `held[0]` a slice at a time, so that no single free cascades through all of it.

    A finished big request still holds millions of objects (its parsed and planned conversation, the parsed
    JSON, the prefix keys' hash states, token counts), all reachable from the response the loop is done with.
    Dropped at once, the whole graph would be freed in one C call as its last reference went: ~80 ms on a
    200,000-message body, during which nothing else is answered.

    The bulk of such a graph sits in a few long containers (the segments, the messages, the keys). The worker
    walks the graph down to them, breadth first, listing what the graph alone holds (an object whose every
    reference comes from objects already listed), and takes a list of each long container's items instead of
    walking them: millions of objects are then never visited one by one. A value also held from outside (the
    memos, the gateway's state) is neither walked nor freed. It then frees the listed objects front to back,
    parents first: a freed parent leaves its children held by the list, and a long container leaves its items
    held by their copy. Last, each copy is dropped a slice at a time, each slice's size adjusted so that it
    frees in about a millisecond (`prefixgate.slices`); the GIL changes hands between slices.

    An object with a finaliser (`__del__`: an asyncio future, a socket, an upstream response) is not freed on
    a worker, where its finaliser might touch the event loop: it goes back to the loop, which drops it there."""
    with _WINDOW:
        back: list = []
        bulk: list[list] = []           # the items of each long container
        partly: dict[int, list] = {}    # id -> [object, references to it from listed objects]: held from several
        i = 0
        while i < len(held):
            parent = held[i]
            i += 1
            if type(parent) in _CONTAINERS and len(parent) >= SLICE:
                items = list(parent.values() if isinstance(parent, dict) else parent)
                if any(hasattr(kind, "__del__") for kind in set(map(type, items))):
                    back.extend(item for item in items if hasattr(type(item), "__del__"))
                bulk.append(items)
                continue
            for child in gc.get_referents(parent):
                if type(child) in _LEAVES:
                    continue    # freed with its parent, cheaply: a leaf frees nothing else
                # Less the temporaries (the referents list, this loop's `child`, getrefcount's argument).
                refs = sys.getrefcount(child) - 3
                if refs > 1:
                    if refs > _MANY:
                        continue    # held all over (a type, a module's constant): not one request's
                    seen = partly.get(id(child))
                    if seen is None:
                        partly[id(child)] = [child, 1]
                        continue
                    seen[1] += 1
                    if refs - 1 != seen[1]:     # less the entry's own reference
                        continue
                    del partly[id(child)]
                (back if hasattr(type(child), "__del__") else held).append(child)
            if i % SLICE == 0:
                time.sleep(0)
        parent = items = child = seen = None    # held past the walk, they would be freed here, whatever they are
        partly.clear()          # what is left is held from outside as well: not ours to free
        free_in_slices(held)
        for items in bulk:
            free_in_slices(items)
        # Only now: while their parents lived, `back` did not hold the last reference to what it holds.
        if back:
            with contextlib.suppress(RuntimeError):     # the loop has closed: nothing is left on it to touch
                loop.call_soon_threadsafe(back.clear)


_MANY = 64      # an object referred to from more places than this is shared, not part of one request's graph
_LEAVES = frozenset({str, bytes, int, float})
_CONTAINERS = frozenset({list, tuple, dict, set, frozenset})


class _Window:
    """While any big body is worked: the GIL changes hands every `SWITCH_S`, and no garbage collection runs.

    A collection holds the GIL for as long as it walks the objects of its generations: a big body's millions
    of new objects made young and middle collections take 30-150 ms and a full one 1.7 s, on whatever thread
    ran it. Paused while big bodies are worked, it resumes after the last; what they left alive (the bodies'
    parsed values kept by the memos) is frozen out of later collections first (`gc.freeze`), or the next
    young collection would walk all of it at once. What frozen objects later drop is still freed by
    reference counting; only a reference cycle among them would stay. While big bodies come back to back the
    collector stays paused, and cyclic garbage waits for the first moment none is being worked.

    The switch interval: a thread waiting for the GIL (the event loop) asks for it after the interval, and each
    time the loop blocks on a socket it gives it up and must ask again; /health takes a handful of such turns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0
        self._interval = sys.getswitchinterval()
        self._collecting = True

    def __enter__(self) -> None:
        with self._lock:
            if self._open == 0:
                self._interval, self._collecting = sys.getswitchinterval(), gc.isenabled()
                sys.setswitchinterval(min(self._interval, SWITCH_S))
                gc.disable()
            self._open += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._open -= 1
            if self._open == 0:
                gc.freeze()
                if self._collecting:
                    gc.enable()
                sys.setswitchinterval(self._interval)

    @property
    def open(self) -> bool:
        return self._open > 0


SWITCH_S = 0.001
_WINDOW = _Window()


def busy() -> bool:
    """Whether a big body is being worked or freed right now."""
    return _WINDOW.open
