"""KV cache events over ZMQ in vLLM's wire format (vllm/distributed/kv_events.py), so the routers built for
vLLM fleets (Dynamo, llm-d, SGLang's router, prefixgate's gateway) can route on what this engine holds.

Each message is three frames, [topic, seq as 8 bytes big-endian, msgpack([ts, events, dp_rank])], each event
a map whose "type" is BlockStored, BlockRemoved or AllBlocksCleared. A ROUTER on the replay endpoint answers
an 8-byte start seq with every buffered message from it on, then [b"", -1 as 8 signed bytes, b""].

The engine thread only enqueues; a publisher thread owns the sockets. A full queue drops the batch and counts
it, but its seq is spent: subscribers see the gap (which replay cannot fill) rather than a silent hole.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("prefixgate.local_backend")

REPLAY_END = (-1).to_bytes(8, "big", signed=True)
_STOP = object()


@dataclass(frozen=True, slots=True)
class KVEventsConfig:
    endpoint: str
    replay_endpoint: str | None = None
    topic: str = ""
    hwm: int = 100_000  # the PUB socket's send high-water mark: beyond it ZMQ drops for slow subscribers
    max_queue_size: int = 100_000  # batches waiting for the publisher thread; beyond it the engine drops
    buffer_steps: int = 10_000  # batches kept for replay
    data_parallel_rank: int = 0

    def __post_init__(self) -> None:
        for name in ("hwm", "max_queue_size", "buffer_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"kv_events {name} must be >= 1")
        for endpoint in (self.endpoint, self.replay_endpoint):
            if endpoint is not None and "://" not in endpoint:
                raise ValueError(f"kv_events endpoint {endpoint!r} is not a ZMQ address such as tcp://127.0.0.1:5557")


def _binds(endpoint: str) -> bool:
    # vLLM's rule: a wildcard host, ipc:// or inproc:// means this side binds; otherwise it connects.
    return "*" in endpoint or "::" in endpoint or endpoint.startswith(("ipc://", "inproc://"))


class KVEventPublisher:
    def __init__(self, config: KVEventsConfig) -> None:
        import zmq  # the `local` extra; imported only when events are on

        self.config = config
        self._seq = itertools.count()
        self._queue: queue.Queue[Any] = queue.Queue(config.max_queue_size)
        self.published = 0  # batches handed to the PUB socket
        self.dropped = 0  # batches the queue had no room for
        self._ctx = zmq.Context()
        self._pub = self._ctx.socket(zmq.PUB)
        self._pub.set_hwm(config.hwm)
        self._replay = None
        # The sockets are made here so a bad endpoint fails the start, then only the publisher thread uses them.
        (self._pub.bind if _binds(config.endpoint) else self._pub.connect)(config.endpoint)
        if config.replay_endpoint is not None:
            self._replay = self._ctx.socket(zmq.ROUTER)
            self._replay.set_hwm(2 * (config.buffer_steps + 1))
            self._replay.bind(config.replay_endpoint)
        self._buffer: deque[tuple[bytes, bytes]] = deque(maxlen=config.buffer_steps)
        self._thread = threading.Thread(target=self._run, name="prefixgate-kv-events", daemon=True)
        self._thread.start()

    def publish(self, events: list[dict[str, Any]]) -> None:
        """Queue one batch (engine thread); never blocks."""
        seq = next(self._seq)
        try:
            self._queue.put_nowait((seq, time.time(), events))
        except queue.Full:
            self.dropped += 1

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    def close(self) -> None:
        self._queue.put(_STOP)
        self._thread.join(timeout=10)
        self._ctx.destroy(linger=1000)  # a moment for sent batches to leave

    def _run(self) -> None:
        import msgpack
        import zmq

        topic = self.config.topic.encode()
        poller = zmq.Poller()
        if self._replay is not None:
            poller.register(self._replay, zmq.POLLIN)
        while True:
            try:
                item = self._queue.get(timeout=0.02)
            except queue.Empty:
                item = None
            if item is _STOP:
                return
            if item is not None:
                seq, ts, events = item
                payload = msgpack.packb([ts, events, self.config.data_parallel_rank])
                frames = [topic, seq.to_bytes(8, "big"), payload]
                try:
                    self._pub.send_multipart(frames, flags=zmq.NOBLOCK)
                    self.published += 1
                except zmq.Again:  # PUB drops at its HWM rather than raising; kept for connect-mode sockets
                    pass
                self._buffer.append((frames[1], payload))
            if self._replay is not None and poller.poll(0):
                self._answer_replay(topic)

    def _answer_replay(self, topic: bytes) -> None:
        identity, *rest = self._replay.recv_multipart()
        start = int.from_bytes(rest[-1], "big") if rest and len(rest[-1]) == 8 else None
        if start is None:
            log.warning("kv events replay: a request without an 8-byte start seq was ignored")
            return
        for seq, payload in list(self._buffer):
            if int.from_bytes(seq, "big") >= start:
                self._replay.send_multipart([identity, b"", topic, seq, payload])
        self._replay.send_multipart([identity, b"", b"", REPLAY_END, b""])
