"""Routing on KV cache events: two real `prefixgate backend --kv-events` replicas behind the gateway; a prompt
goes to the replica that holds its prefix (seen in that replica's own cached_tokens), and follows evictions."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from types import SimpleNamespace

import httpx
import msgpack
import pytest
from prometheus_client import CollectorRegistry

from prefixgate.gateway.app import create_app
from prefixgate.gateway.in_flight import InFlight
from prefixgate.gateway.kv_index import KVIndex
from prefixgate.ledger import read_records
from prefixgate.local_backend.kv_events import KVEventPublisher, KVEventsConfig
from prefixgate.policies import Policy
from tests.gateway.support_gateway import policy_for, settings_for
from tests.local_backend.support_backend import running_backend
from tests.support_services import ServerThread, free_port, wait_until

pytestmark = pytest.mark.slow
MODEL = "smollm2-135m"


def _backend_args(tmp, name: str) -> tuple[list[str], dict]:
    events, replay = f"ipc://{tmp}/{name}.events", f"tcp://127.0.0.1:{free_port()}"  # ipc:// binds (vLLM's rule)
    args = ["--num-kv-blocks", "40", "--max-num-seqs", "2", "--kv-events", events, "--kv-events-replay", replay]
    return args, {"kv_events": {"endpoint": events, "replay": replay, "tokenizer": MODEL}}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Iterator[tuple[str, dict[str, str], object, str]]:
    tmp = tmp_path_factory.mktemp("kv")
    with ExitStack() as stack:
        direct, upstreams = {}, {}
        for name in ("r1", "r2"):
            args, spec = _backend_args(tmp, name)
            direct[name] = stack.enter_context(running_backend(*args, log=tmp / f"{name}.log"))
            upstreams[name] = {"kind": "openai_compatible", "url": direct[name] + "/v1", **spec}
        settings = settings_for("http://127.0.0.1:9", tmp, tenant_cache_isolation=False)
        policy = policy_for(settings, {
            "upstreams": upstreams,
            "routes": [{"name": "fleet", "models": [MODEL], "targets": [{"replicas": ["r1", "r2"]}],
                        "planner": "off"}]})
        with ServerThread(create_app(settings, policy=policy)) as gw:
            yield gw.url, direct, gw, settings.ledger_path


def _ask(url: str, system: str, question: str) -> int:
    """Cached prompt tokens the serving replica reports (its own count, not the gateway's)."""
    r = httpx.post(url + "/v1/chat/completions", timeout=120, json={
        "model": MODEL, "max_tokens": 1, "temperature": 0,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}]})
    assert r.status_code == 200, r.text
    return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]


def _manual(topic: int) -> str:
    return " ".join(f"Step {i} of procedure {topic}: check valve {i * 7 % 13} and log the reading." for i in range(12))


def _known(gw, replica: str, n: int) -> None:
    index = gw.server.config.app.state.proxy.kv_index
    wait_until(lambda: len(index.replicas[replica].blocks) >= n, 30, f"{replica}'s events reach the gateway")


def test_a_prompt_goes_to_the_replica_holding_its_prefix_and_follows_evictions(fleet) -> None:
    gateway, direct, gw, ledger = fleet
    first, second = _manual(1), _manual(2)
    # Each replica computes one long system prompt on its own (sent to it directly, not via the gateway).
    assert _ask(direct["r1"], first, "Which valve comes first?") == 0
    assert _ask(direct["r2"], second, "Which valve comes first?") == 0
    _known(gw, "r1", 8)
    _known(gw, "r2", 8)
    # Through the gateway, each prompt reaches the replica that holds its prefix: its cache answers.
    assert _ask(gateway, first, "How many steps are there?") >= 128
    assert _ask(gateway, second, "How many steps are there?") >= 128
    notes = [r["explanation"] for r in read_records(ledger)]
    assert sum("by kv events (prefix_hit" in " ".join(n) for n in notes) == 2

    # r1 evicts the first prompt (its small pool fills with others); r2 computes it meanwhile.
    for topic in range(3, 7):
        _ask(direct["r1"], _manual(topic), "Which valve comes first?")
    index = gw.server.config.app.state.proxy.kv_index
    wait_until(lambda: not index.replicas["r1"].blocks & _first_blocks(index, first), 30, "r1's evictions seen")
    assert _ask(direct["r2"], first, "Which valve comes first?") == 0
    _known(gw, "r2", 20)
    assert _ask(gateway, first, "How many steps are there?") >= 128  # now only r2 could have answered from cache
    metrics = httpx.get(gateway + "/metrics").text
    assert 'prefixgate_kv_route_decisions_total{reason="prefix_hit",replica="r2"} 2.0' in metrics


def _chat(url: str, messages: list[dict]) -> int:
    r = httpx.post(url + "/v1/chat/completions", timeout=120,
                   json={"model": MODEL, "max_tokens": 1, "temperature": 0, "messages": messages})
    assert r.status_code == 200, r.text
    return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_a_conversation_follows_its_own_history_not_the_shared_system_prompt(fleet) -> None:
    gateway, direct, gw, ledger = fleet
    index = gw.server.config.app.state.proxy.kv_index
    system = [{"role": "system", "content": _manual(8)}]
    # Both replicas hold the shared system prompt (the second ask reads it back): rendezvous, keyed on the
    # prompt's first block, would send every conversation under it to the same replica.
    for url in direct.values():
        _chat(url, system + [{"role": "user", "content": "Ready?"}])
    # Each replica alone has served the first turns of its own conversation.
    turns = {name: system + [{"role": "user", "content": f"Customer {name} reports valve {i} stuck open."},
                             {"role": "assistant", "content": f"Close valve {i + 3}, then log gauge {i * 11}."},
                             {"role": "user", "content": "Done. Next?"}] for i, name in enumerate(direct)}
    history = {}
    for name, url in direct.items():
        _chat(url, turns[name])
        tokens = index._tokens(MODEL, {"messages": turns[name]})
        history[name] = len(tokens) // 16 * 16    # its full blocks; the other replica shares ~12 of its 16
        wait_until(lambda n=name, t=tokens: index._held(index.replicas[n], t, None) == len(t) // 16, 30,
                   f"{name}'s history reaches the gateway")
    before = len(read_records(ledger))
    for name in direct:
        # The next turn, through the gateway, reads its history from its own replica's cache.
        cached = _chat(gateway, turns[name] + [{"role": "assistant", "content": "Reset the pump."},
                                               {"role": "user", "content": "Reset. Now what?"}])
        assert cached >= history[name], (name, cached, history)
    wait_until(lambda: len(read_records(ledger)) >= before + 2, 10, "two ledger records")
    routes = [n for r in read_records(ledger)[before:] for n in r["explanation"] if n.startswith("route:")]
    assert sorted(n.split()[1] for n in routes) == ["r1", "r2"], routes


def _first_blocks(index: KVIndex, system: str) -> set[int]:
    from prefixgate.local_backend.block_pool import hash_block, published_hash
    tokens = index._tokens(MODEL, {"messages": [{"role": "system", "content": system}]})
    parent, out = None, set()
    for i in range(4):
        parent = hash_block(parent, tokens[i * 16:(i + 1) * 16])
        out.add(published_hash(parent))
    return out


# -- gaps, without the model: a real publisher's replay socket, batches fed to the index by sequence number --

@contextmanager
def _index(tmp_path, replay: bool) -> Iterator[tuple[KVIndex, KVEventPublisher]]:
    endpoint, replay_at = f"ipc://{tmp_path}/ev", f"tcp://127.0.0.1:{free_port()}"
    publisher = KVEventPublisher(KVEventsConfig(endpoint, replay_at))
    policy = Policy.from_dict({"upstreams": {"r": {"kind": "openai_compatible", "url": "http://127.0.0.1:9/v1",
                                                   "kv_events": {"endpoint": endpoint, "tokenizer": MODEL,
                                                                 **({"replay": replay_at} if replay else {})}}},
                               "routes": [{"name": "x", "models": ["*"], "targets": [{"upstream": "r"}]}]}, {})
    index = KVIndex(policy.upstreams, CollectorRegistry(), InFlight())
    index._stop = True  # batches are fed by hand below
    index._thread.join()
    try:
        yield index, publisher
    finally:
        publisher.close()
        index._ctx.destroy(linger=0)


def _stored(*hashes: int) -> list:
    return [{"type": "BlockStored", "block_hashes": list(hashes), "parent_block_hash": None, "token_ids": [],
             "block_size": 16, "lora_id": None, "medium": "GPU", "lora_name": None}]


def _batch(events: list) -> bytes:
    return msgpack.packb([time.time(), events, 0])


def test_a_sequence_gap_is_replayed_from_the_replica(tmp_path) -> None:
    with _index(tmp_path, replay=True) as (index, publisher):
        for h in (11, 12, 13):
            publisher.publish(_stored(h))
        wait_until(lambda: publisher.published == 3, 10, "published")
        replica = index.replicas["r"]
        index._receive(replica, 0, _batch(_stored(11)))
        index._receive(replica, 2, _batch(_stored(13)))  # seq 1 was missed: the replay brings block 12
        assert replica.blocks == {11, 12, 13} and replica.last_seq == 2


def test_a_gap_nothing_fills_empties_the_index_so_it_never_claims_a_lost_block(tmp_path) -> None:
    with _index(tmp_path, replay=False) as (index, _):
        replica = index.replicas["r"]
        index._receive(replica, 0, _batch(_stored(11, 12)))
        # seq 1 (perhaps a BlockRemoved of 11) is gone for good: only what follows the gap is known.
        index._receive(replica, 2, _batch(_stored(13)))
        assert replica.blocks == {13}
        index._receive(replica, 0, _batch(_stored(21)))  # the publisher restarted: its cache did too
        assert replica.blocks == {21}


def test_a_replica_that_answers_without_publishing_is_routed_as_holding_nothing(tmp_path) -> None:
    with _index(tmp_path, replay=False) as (index, _):
        replica, system, in_flight = index.replicas["r"], _manual(1), index._in_flight
        index._receive(replica, 0, _batch(_stored(*_first_blocks(index, system))))
        payload = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "Next?"}]}

        def reason() -> str:
            return index.route(["r"], payload, None, "p", in_flight, 1.25)[1]
        assert "prefix_hit, holds 64 prompt tokens" in reason()
        # That request had blocks r lacked, so r owes a BlockStored. While it is still busy, even long after,
        # its queue may be what delays the event (a busy replica is not silent).
        with in_flight.hold("r"):
            replica.owes_since -= 30
            assert "prefix_hit" in reason()
        # It has answered everything (so it scheduled the prompt), and 10 s later no event has come.
        replica.idle_since -= 10
        assert "(no_holder; silent: r)" in reason()
        index._receive(replica, 1, _batch([{"type": "AllBlocksCleared"}]))
        index._receive(replica, 2, _batch(_stored(*_first_blocks(index, system))))
        assert "prefix_hit" in reason()


def test_a_busy_replica_that_owes_events_for_a_minute_is_silent(tmp_path) -> None:
    with _index(tmp_path, replay=False) as (index, _):
        replica, system, in_flight = index.replicas["r"], _manual(1), index._in_flight
        index._receive(replica, 0, _batch(_stored(*_first_blocks(index, system))))
        payload = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "Next?"}]}
        with in_flight.hold("r"):
            index.route(["r"], payload, None, "p", in_flight, 1.25)
            replica.owes_since -= 61   # a publisher that died under steady traffic
            assert "(no_holder; silent: r)" in index.route(["r"], payload, None, "p", in_flight, 1.25)[1]


def test_a_replica_sent_a_prompt_after_an_answer_found_it_idle_is_busy_not_silent(tmp_path, monkeypatch) -> None:
    """A request is routed to r, then counted in flight only after an await (a big body's thread hop back to the
    loop, a retry's backoff). An answer to r's only other request lands in between: nothing is in flight, so r is
    marked idle. Sending the prompt makes r busy again: its BlockStored may wait behind its queue, so 10 s on,
    with that prompt still in flight, r is not silent (it would be routed as holding nothing)."""
    with _index(tmp_path, replay=False) as (index, _):
        replica, system, in_flight = index.replicas["r"], _manual(1), index._in_flight
        index._receive(replica, 0, _batch(_stored(*_first_blocks(index, system))))
        payload = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "Next?"}]}
        earlier = in_flight.hold("r")                       # another caller's request, still being answered
        index.route(["r"], payload, None, "p", in_flight, 1.25)     # this one: r lacks some of its blocks
        earlier.release()                                   # answered while this one was between route and send
        with in_flight.hold("r"):                           # sent
            later = time.monotonic() + 10
            monkeypatch.setattr("prefixgate.gateway.kv_index.time", SimpleNamespace(monotonic=lambda: later))
            assert "silent" not in index.route(["r"], payload, None, "p", in_flight, 1.25)[1]


def test_the_holder_is_skipped_past_the_load_cap() -> None:
    from prefixgate.policies.affinity import pick_by_prefix
    # Cap = ceil(load_factor x (in flight + 1) / replicas): ceil(1.25 x 3 / 2) = 2 lets r1 take one more;
    # ceil(1.25 x 4 / 2) = 3 does not at 3 in flight.
    assert pick_by_prefix({"r1": 4}, "p", ["r1", "r2"], {"r1": 1, "r2": 1}, 1.25) == ("r1", "prefix_hit")
    assert pick_by_prefix({"r1": 4}, "p", ["r1", "r2"], {"r1": 3, "r2": 0}, 1.25) == ("r2", "over_load_cap")
    assert pick_by_prefix({}, "p", ["r1", "r2"], {}, 1.25)[1] == "no_holder"


def test_equal_holders_are_ranked_as_rendezvous_ranks_them() -> None:
    from prefixgate.policies.affinity import pick_by_prefix, ranking
    # Both replicas hold the shared system prompt's 2 blocks: each new prefix goes where rendezvous sends it.
    for prefix in ("doc-a", "doc-b", "doc-c", "doc-d"):
        first = ranking(prefix, ["r1", "r2"])[0]
        assert pick_by_prefix({"r1": 2, "r2": 2}, prefix, ["r1", "r2"], {}, 1.25) == (first, "prefix_hit")
    assert {ranking(p, ["r1", "r2"])[0] for p in ("doc-a", "doc-b", "doc-c", "doc-d")} == {"r1", "r2"}


def test_equal_holders_go_to_the_less_loaded_one_and_a_longer_holder_beats_both() -> None:
    from prefixgate.policies.affinity import pick_by_prefix, ranking
    # Conversations under one system prompt share its hash: rendezvous would start all of them on `first`.
    first, other = ranking("system", ["r1", "r2"])
    assert pick_by_prefix({"r1": 12, "r2": 12}, "system", ["r1", "r2"], {first: 1}, 1.25) == (other, "prefix_hit")
    # A turn whose history is on `first` goes there though `first` is busier (under the cap: ceil(1.25 x 3 / 2)).
    assert pick_by_prefix({first: 16, other: 12}, "system", ["r1", "r2"], {first: 1, other: 0}, 1.25) \
        == (first, "prefix_hit")
    # Past the cap the turn spills to the replica holding less of it, and says so.
    assert pick_by_prefix({first: 16, other: 12}, "system", ["r1", "r2"], {first: 3, other: 0}, 1.25) \
        == (other, "over_load_cap")


def test_kv_events_are_for_self_hosted_upstreams_with_a_tokenizer() -> None:
    from prefixgate.policies import PolicyError

    def policy(kv: dict, **upstream: str) -> None:
        Policy.from_dict({"upstreams": {"r": {"kind": "openai_compatible", "url": "http://127.0.0.1:9/v1",
                                              **upstream, "kv_events": kv}},
                          "routes": [{"name": "x", "models": ["*"], "targets": [{"upstream": "r"}]}]}, {})
    with pytest.raises(PolicyError, match="self-hosted"):
        policy({"endpoint": "tcp://h:5557", "tokenizer": MODEL}, provider="deepseek")
    with pytest.raises(PolicyError, match="tokenizer are required"):
        policy({"endpoint": "tcp://h:5557"})
    with pytest.raises(PolicyError, match="ZMQ address"):
        policy({"endpoint": "h:5557", "tokenizer": MODEL})
