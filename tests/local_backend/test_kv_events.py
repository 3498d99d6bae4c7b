"""KV cache events: `prefixgate backend --kv-events` read by an independent subscriber (plain pyzmq + msgpack,
vLLM's schema), block hashes checked against vLLM's own test vectors (wire-2026-11.md, section 4)."""

from __future__ import annotations

import hashlib
import socket
import time
from collections.abc import Iterator
from typing import Any

import cbor2
import httpx
import msgpack
import pytest
import zmq

from prefixgate.local_backend.block_pool import NONE_HASH, BlockPool, hash_block, published_hash
from prefixgate.local_backend.kv_events import KVEventPublisher, KVEventsConfig
from tests.local_backend.support_backend import running_backend

BLOCK = 16


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_block_hashes_match_vllm_sha256_cbor_test_vectors() -> None:
    # vLLM 0.33.0 hashing.py, sha256_cbor, default seed, tokens 1..16 then 17..32 (typed from the reference).
    assert NONE_HASH.hex().startswith("9bd96a48") and NONE_HASH.hex().endswith("81eef0")
    block1 = hash_block(None, list(range(1, 17)))
    block2 = hash_block(block1, list(range(17, 33)))
    assert block1.hex().startswith("cd7c51bc") and block1.hex().endswith("7fd01682")
    assert block2.hex().startswith("2533ea50") and block2.hex().endswith("d87bf3bf")
    assert published_hash(block1) == 8866452693264111234
    assert published_hash(block2) == 807986237951177663


def test_clearing_the_cache_is_one_all_blocks_cleared_event() -> None:
    pool = BlockPool(8)
    pool.events = []
    block = pool.allocate(1)[0]
    assert pool.cache(block, hash_block(None, [1] * 4), [1] * 4)
    pool.reset_prefix_cache()
    assert pool.take_events() == [{"type": "AllBlocksCleared"}]


def test_a_full_queue_drops_batches_and_leaves_a_visible_gap() -> None:
    port = _port()
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.subscribe(b"")
    sub.bind(f"tcp://127.0.0.1:{port}")
    publisher = KVEventPublisher(KVEventsConfig(f"tcp://127.0.0.1:{port}", max_queue_size=1))
    try:
        sub.poll(300)  # a SUB sends its subscription only once its own thread touches the socket
        sent = 2000
        for _ in range(sent):
            publisher.publish([{"type": "AllBlocksCleared"}])
        while publisher.queued:
            time.sleep(0.01)
        publisher.publish([{"type": "AllBlocksCleared"}])  # room again: this one goes, after the gap
        sent += 1
        publisher.close()
        seqs = []
        while sub.poll(500):
            seqs.append(int.from_bytes(sub.recv_multipart()[1], "big"))
    finally:
        ctx.destroy(linger=0)
    assert publisher.dropped > 0
    assert publisher.published + publisher.dropped == sent
    assert len(seqs) == publisher.published
    # The dropped batches' seqs are missing, so a subscriber knows it lost something.
    assert seqs == sorted(seqs) and seqs[-1] - seqs[0] + 1 > len(seqs)


def _vllm_chain(tokens: list[int]) -> list[int]:
    """vLLM's sha256_cbor chain written out here, independent of block_pool.hash_block."""
    def h(value: Any) -> bytes:
        return hashlib.sha256(cbor2.dumps(value, canonical=True)).digest()
    parent, out = h("vllm-none-hash"), []
    for i in range(len(tokens) // BLOCK):
        parent = h((parent, tuple(tokens[i * BLOCK:(i + 1) * BLOCK]), None))
        out.append(int.from_bytes(parent[-8:], "big"))
    return out


class Subscriber:
    """What a router runs: a SUB socket (bound here; the backend's tcp://host:port endpoint connects, as
    vLLM's does) and a DEALER socket for the replay endpoint."""

    def __init__(self) -> None:
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.subscribe(b"")
        self.endpoint = f"tcp://127.0.0.1:{_port()}"
        self.sub.bind(self.endpoint)
        self.replay_endpoint = f"tcp://127.0.0.1:{_port()}"
        self.batches: list[tuple[int, list[Any]]] = []  # (seq, events)
        self.raw: dict[int, bytes] = {}

    def drain(self, until: Any, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not until():
            assert time.monotonic() < deadline, f"events never arrived: {self.batches}"
            if self.sub.poll(200):
                topic, seq, payload = self.sub.recv_multipart()
                ts, events, dp_rank = msgpack.unpackb(payload)
                assert topic == b"" and isinstance(ts, float) and dp_rank == 0
                self.batches.append((int.from_bytes(seq, "big"), events))
                self.raw[int.from_bytes(seq, "big")] = payload

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [e for _, events in self.batches for e in events if e["type"] == kind]

    def replay(self, start: int) -> list[tuple[int, bytes]]:
        # A DEALER, not a REQ: the answer is many messages. It adds the empty frame a REQ would.
        req = self.ctx.socket(zmq.DEALER)
        req.connect(self.replay_endpoint)
        req.send_multipart([b"", start.to_bytes(8, "big")])
        out = []
        while True:
            assert req.poll(10_000), "no replay answer"
            _, topic, seq, payload = req.recv_multipart()
            if seq == (-1).to_bytes(8, "big", signed=True):
                return out
            out.append((int.from_bytes(seq, "big"), payload))


@pytest.fixture(scope="module")
def backend(smollm2) -> Iterator[tuple[str, Subscriber]]:  # smollm2: the GGUF is converted before the start
    sub = Subscriber()
    # 12 blocks (11 usable) of 16 tokens: three 64-token prompts overflow it, so the first one's are evicted.
    with running_backend("--num-kv-blocks", "12", "--max-num-seqs", "1", "--kv-events", sub.endpoint,
                         "--kv-events-replay", sub.replay_endpoint) as url:
        sub.sub.poll(500)  # a SUB sends its subscription only once its own thread touches the socket
        yield url, sub
    sub.ctx.destroy(linger=0)


def _complete(url: str, tokens: list[int]) -> None:
    r = httpx.post(url + "/v1/completions", json={"model": "smollm2-135m", "prompt": tokens, "max_tokens": 1,
                                                  "temperature": 0}, timeout=120)
    assert r.status_code == 200, r.text


def test_backend_publishes_stored_removed_and_replays(backend: tuple[str, Subscriber]) -> None:
    url, sub = backend
    first = [100 + i for i in range(64)]
    _complete(url, first)
    stored = lambda: [h for e in sub.events("BlockStored") for h in e["block_hashes"]]  # noqa: E731
    sub.drain(lambda: len(stored()) >= 4)
    event = sub.events("BlockStored")[0]
    assert set(event) >= {"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium",
                          "lora_name"}
    assert event["parent_block_hash"] is None and event["block_size"] == BLOCK and event["medium"] == "GPU"
    assert stored() == _vllm_chain(first)
    assert [t for e in sub.events("BlockStored") for t in e["token_ids"]] == first

    # Two more 64-token prompts need 8 of the 11 blocks: the oldest cached blocks (the first prompt's) go.
    for base in (1000, 2000):
        _complete(url, [base + i for i in range(64)])
    sub.drain(lambda: sub.events("BlockRemoved"))
    removed = {h for e in sub.events("BlockRemoved") for h in e["block_hashes"]}
    assert removed and removed <= set(_vllm_chain(first))
    assert all(e["medium"] == "GPU" for e in sub.events("BlockRemoved"))
    sub.drain(lambda: len(stored()) >= 12)
    assert stored()[4:] == _vllm_chain([1000 + i for i in range(64)]) + _vllm_chain([2000 + i for i in range(64)])

    seqs = [seq for seq, _ in sub.batches]
    assert seqs == list(range(len(seqs)))  # from 0, +1 per batch, none missed
    # A subscriber that missed everything after the first batch asks for it again: the same bytes come back.
    assert sub.replay(1) == [(seq, sub.raw[seq]) for seq in seqs[1:]]

    metrics = httpx.get(url + "/metrics").text
    assert f'prefixgate_backend_kv_events_published_batches_total{{model_name="smollm2-135m"}} {len(seqs)}.0' in metrics
    assert 'prefixgate_backend_kv_events_dropped_batches_total{model_name="smollm2-135m"} 0.0' in metrics
