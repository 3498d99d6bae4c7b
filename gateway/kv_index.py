"""What each self-hosted replica holds, from its KV cache events (vLLM's ZMQ schema: `prefixgate backend
--kv-events`, vLLM's `--kv-events-config`), and the route it implies (`policies.affinity.pick_by_prefix`).

One thread reads every replica's SUB socket into a set of block hashes per replica. The index is kept a
subset of the truth: a sequence gap is replayed from the replica's replay socket, and where that cannot fill
it (no replay endpoint, batches dropped or aged out) the replica's set is emptied and rebuilt from the events
that follow; a publisher restart (seq going back) empties it too. A replica that is sent prompts with blocks
it does not hold owes an event (the engine announces blocks when it schedules the prompt, before its first
token). It is treated as silent, holding nothing, until its next event (routed like any replica with no known
prefix) once it owes one and either has answered everything sent to it `ANSWERED_GRACE_S` ago, or has been
owing for `SILENT_AFTER_S` while still busy. A busy replica's queue only delays its events; an idle one's
cannot.

The prompt is hashed as the replica hashes it: the same tokenizer and chat template, vLLM's sha256_cbor
chain with the tenant's cache salt on block 0 (prefixgate.local_backend.block_pool).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from prefixgate.gateway.in_flight import InFlight
from prefixgate.policies.affinity import pick_by_prefix
from prefixgate.policies.schema import KVEventSource, Upstream

log = logging.getLogger("prefixgate.gateway")

# A busy replica publishes a prompt's BlockStored only once it schedules it, which can take many seconds behind
# a queue (the first benchmark run, with 5 s from sending, took overloaded replicas for silent ones). Once the
# answers are in, the events are late only by their delivery.
SILENT_AFTER_S = 60.0
ANSWERED_GRACE_S = 5.0
REPLAY_TIMEOUT_MS = 2000
REPLAY_END = (-1).to_bytes(8, "big", signed=True)


@dataclass
class Replica:
    name: str
    source: KVEventSource
    blocks: set[int] = field(default_factory=set)
    block_size: int | None = None
    last_seq: int | None = None
    # When a prompt with blocks this replica lacked was first sent to it since its last event (None: none was).
    owes_since: float | None = None
    # When, owing, it last had nothing in flight from this gateway: all it was sent had been answered.
    idle_since: float | None = None

    def silent(self, now: float) -> bool:
        if self.owes_since is None:
            return False
        if self.idle_since is not None:
            return now - self.idle_since > ANSWERED_GRACE_S
        return now - self.owes_since > SILENT_AFTER_S


class KVIndex:
    def __init__(self, upstreams: Mapping[str, Upstream], registry: CollectorRegistry, in_flight: InFlight) -> None:
        import zmq

        from prefixgate.local_backend.model_loader import resolve_folder

        self.replicas = {name: Replica(name, u.kv_events) for name, u in upstreams.items() if u.kv_events}
        self._lock = threading.Lock()
        self._in_flight = in_flight
        in_flight.on_release(self._answered)
        in_flight.on_hold(self._sent)
        self._tokenizers: dict[str, Any] = {}
        for replica in self.replicas.values():
            if replica.source.tokenizer not in self._tokenizers:
                from transformers import AutoTokenizer
                folder = resolve_folder(replica.source.tokenizer)
                self._tokenizers[replica.source.tokenizer] = AutoTokenizer.from_pretrained(  # nosec B615
                    folder, local_files_only=True)
        self.decisions = Counter("prefixgate_kv_route_decisions", "Replica choices on KV events, by reason",
                                 ("replica", "reason"), registry=registry)
        self.batches = Counter("prefixgate_kv_event_batches", "KV event batches from replicas, by outcome "
                               "(applied, replayed, reset: a gap nothing filled)", ("replica", "outcome"),
                               registry=registry)
        self._ctx = zmq.Context()
        self._subs = {}
        for replica in self.replicas.values():
            sub = self._ctx.socket(zmq.SUB)
            sub.subscribe(replica.source.topic.encode())
            sub.connect(replica.source.endpoint)
            self._subs[sub] = replica
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="prefixgate-kv-index", daemon=True)
        self._thread.start()

    def covers(self, names: Sequence[str]) -> bool:
        return len(names) > 1 and all(n in self.replicas for n in names)

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=5)
        self._ctx.destroy(linger=0)

    # -- routing (the event loop) -------------------------------------------------------------------------

    def route(self, names: Sequence[str], payload: dict[str, Any], salt: str | None, prefix_hash: str,
              in_flight: Mapping[str, int], load_factor: float) -> tuple[str, str]:
        """(replica, a ledger note saying why) for a request whose upstream body is `payload`."""
        now = time.monotonic()
        tokens = self._tokens(self.replicas[names[0]].source.tokenizer, payload)
        held: dict[str, int] = {}
        with self._lock:
            silent = [n for n in names if self.replicas[n].silent(now)]
            for name in names:
                replica = self.replicas[name]
                if tokens is None or replica.block_size is None or name in silent:
                    continue
                held[name] = self._held(replica, tokens, salt)
        if tokens is None:
            name, reason = pick_by_prefix({}, prefix_hash, names, in_flight, load_factor)[0], "untokenizable"
        else:
            name, reason = pick_by_prefix(held, prefix_hash, names, in_flight, load_factor)
        with self._lock:
            replica = self.replicas[name]
            size = replica.block_size
            replica.idle_since = None
            if tokens is not None and size and held.get(name, 0) < len(tokens) // size:
                replica.owes_since = replica.owes_since or now
        self.decisions.labels(name, reason).inc()
        note = (f"route: {name} by kv events ({reason}"
                + (f", holds {held[name] * (self.replicas[name].block_size or 0)} prompt tokens" if held.get(name)
                   else "") + (f"; silent: {', '.join(silent)}" if silent else "") + ")")
        return name, note

    def _answered(self, name: str) -> None:
        replica = self.replicas.get(name)
        if replica is not None and self._in_flight[name] == 0:
            with self._lock:
                if replica.owes_since is not None:
                    replica.idle_since = time.monotonic()

    def _sent(self, name: str) -> None:
        # Busy again. `route` cleared this when it chose the replica, but the attempt is counted in only later
        # (after a thread hop, a retry's backoff): an answer to another request in between found nothing in
        # flight and marked the replica idle while this prompt was still on its way to it.
        replica = self.replicas.get(name)
        if replica is not None and replica.idle_since is not None:
            with self._lock:
                replica.idle_since = None

    def _held(self, replica: Replica, tokens: list[int], salt: str | None) -> int:
        from prefixgate.local_backend.block_pool import hash_block, published_hash

        size, parent, n = replica.block_size, None, 0
        for i in range(len(tokens) // size):
            parent = hash_block(parent, tokens[i * size:(i + 1) * size], salt)
            if published_hash(parent) not in replica.blocks:
                break
            n += 1
        return n

    def _tokens(self, tokenizer_name: str, payload: dict[str, Any]) -> list[int] | None:
        tokenizer = self._tokenizers[tokenizer_name]
        try:
            if isinstance(payload.get("messages"), list):
                text = tokenizer.apply_chat_template(payload["messages"], tokenize=False, add_generation_prompt=True)
                return tokenizer.encode(text, add_special_tokens=False)  # the template writes them
            if isinstance(payload.get("prompt"), str):
                return tokenizer.encode(payload["prompt"])
            if isinstance(payload.get("prompt"), list) and all(isinstance(t, int) for t in payload["prompt"]):
                return list(payload["prompt"])
        except Exception:  # a template that rejects these messages: the replica will say so; route blind
            return None
        return None

    # -- events (the index thread) ------------------------------------------------------------------------

    def _run(self) -> None:
        import zmq

        poller = zmq.Poller()
        for sub in self._subs:
            poller.register(sub, zmq.POLLIN)
        while not self._stop:
            for sub, _ in poller.poll(100):
                _, seq, payload = sub.recv_multipart()
                self._receive(self._subs[sub], int.from_bytes(seq, "big"), payload)

    def _receive(self, replica: Replica, seq: int, payload: bytes) -> None:
        last = replica.last_seq
        if last is not None and seq <= last:  # the publisher restarted: its cache started empty too
            self._reset(replica)
            last = None
        if seq != (0 if last is None else last + 1):
            self._fill_gap(replica, 0 if last is None else last + 1, seq)
        self._apply(replica, seq, payload)
        self.batches.labels(replica.name, "applied").inc()

    def _fill_gap(self, replica: Replica, start: int, seq: int) -> None:
        """Replay [start, seq); what cannot be had leaves the index a subset only if emptied first."""
        replayed = self._replay(replica, start) if replica.source.replay else {}
        if not all(s in replayed for s in range(start, seq)):
            if replica.last_seq is not None:  # before its first event the index is empty anyway
                self._reset(replica)
            self.batches.labels(replica.name, "reset").inc()
            # Whatever did come back is still true, if it follows on without a hole.
            start = next((s for s in range(seq - 1, start - 1, -1) if s not in replayed), start - 1) + 1
        for s in range(start, seq):
            self._apply(replica, s, replayed[s])
            self.batches.labels(replica.name, "replayed").inc()

    def _replay(self, replica: Replica, start: int) -> dict[int, bytes]:
        import zmq

        dealer = self._ctx.socket(zmq.DEALER)
        dealer.connect(replica.source.replay)
        out: dict[int, bytes] = {}
        try:
            dealer.send_multipart([b"", start.to_bytes(8, "big")])
            while dealer.poll(REPLAY_TIMEOUT_MS):
                frames = dealer.recv_multipart()
                if frames[-2] == REPLAY_END:
                    break
                out[int.from_bytes(frames[-2], "big")] = frames[-1]
        finally:
            dealer.close(linger=0)
        return out

    def _reset(self, replica: Replica) -> None:
        with self._lock:
            replica.blocks.clear()

    def _apply(self, replica: Replica, seq: int, payload: bytes) -> None:
        import msgpack

        try:
            _, events, *_ = msgpack.unpackb(payload)
        except (ValueError, msgpack.UnpackException) as e:
            log.warning("kv events from %s: batch %d unreadable (%s); index emptied", replica.name, seq, e)
            self._reset(replica)
            replica.last_seq = seq
            return
        with self._lock:
            for event in events:
                kind, fields = _event(event)
                if kind == "BlockStored":
                    replica.blocks.update(fields["block_hashes"])
                    replica.block_size = fields["block_size"]
                elif kind == "BlockRemoved":
                    replica.blocks.difference_update(fields["block_hashes"])
                elif kind == "AllBlocksCleared":
                    replica.blocks.clear()
            replica.last_seq = seq
            replica.owes_since = replica.idle_since = None


# Older vLLM sent events as positional arrays: [type, block_hashes, parent, token_ids, block_size, ...].
_POSITIONAL = {"BlockStored": ("block_hashes", "parent_block_hash", "token_ids", "block_size"),
               "BlockRemoved": ("block_hashes",), "AllBlocksCleared": ()}


def _event(event: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(event, dict):
        return event.get("type", ""), event
    if isinstance(event, list | tuple) and event and event[0] in _POSITIONAL:
        return event[0], dict(zip(_POSITIONAL[event[0]], event[1:], strict=False))
    return "", {}
