"""A caller's own explicit-cache create (`cachedContents.create`) whose answer never came: Google may have made the
cache all the same (here, after the gateway gave up), and bills its writing and its storage. It used to be left
there, owned by no tenant (the caller who made it could not get, list or delete it), booked nowhere, its hold
released. The gateway now finds it among the project's caches, makes it the caller's, and books it as the create.
Driven with google-genai against mock-providers."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from decimal import Decimal

import httpx
import pytest
from google import genai
from google.genai import errors, types
from google.oauth2.credentials import Credentials

from prefixgate.gateway.app import create_app
from prefixgate.gateway.cache_create_doubt import Rivals
from prefixgate.ledger import read_records
from prefixgate.policies import Policy, builtin_upstreams
from prefixgate.policies.limits import nanodollars, spend_counter
from prefixgate.simulation.mock.faults import FaultPlan
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import settings_for
from tests.gateway.support_vertex import GEMINI, LOCATION
from tests.gateway.test_explicit_cache_in_doubt_vertex import CALLER, vertex_stack
from tests.support_services import ServerThread, wait_until

GATEWAY_KEY = "AIzaGatewayKey000000000000000"
ACME, RIVAL = "pg-acme-caller-key-77c1e0d2b9", "pg-rival-caller-key-0d2b977c1e"
MODEL = "gemini-3.5-flash"
CONTRACT = "".join(f"Clause {i}: the warranty covers parts and labour for two years from delivery. " for i in range(400))
# gemini-3.5-flash: $1.50 per MTok written (its input rate), $1.00 per MTok-hour stored (provider-caching.md).
INPUT, STORAGE_PER_HOUR = Decimal("1.50"), Decimal("1.00")


@contextmanager
def stack(monkeypatch, tmp_path, faults: list[dict], timeout_s: float = 0.5):
    """The gateway (a create waits `timeout_s` for its answer: the route's timeout) before mock-providers with
    `faults`."""
    monkeypatch.setenv("GEMINI_API_KEY", GATEWAY_KEY)
    monkeypatch.setenv("KEY_ACME", ACME)
    monkeypatch.setenv("KEY_RIVAL", RIVAL)
    with ServerThread(mock_app(MockContext(faults=FaultPlan.from_config({"faults": faults})))) as mock:
        app, ledger = replica(mock.url, tmp_path, timeout_s)
        with ServerThread(app) as gw:
            app.state.proxy.caches.tick_s = 0.4
            upstream = genai.Client(api_key=GATEWAY_KEY, http_options=types.HttpOptions(base_url=mock.url,
                                                                                        api_version="v1beta"))
            yield gw.url, app.state.proxy, upstream, ledger


def replica(mock_url: str, where, timeout_s: float = 0.5, **settings):
    """One gateway (its app, searching every 0.4 s once started, and its ledger) before mock-providers at `mock_url`,
    its files under `where`."""
    settings = settings_for(mock_url, where, **settings)
    policy = Policy.from_dict({
        "routes": [{"name": "gemini", "models": ["gemini-*"], "retry": {"attempts": 1, "timeout_s": timeout_s},
                    "targets": [{"upstream": "gemini"}]}],
        "keys": [{"name": "acme", "key_env": "KEY_ACME", "tenant": "acme", "budget": {"usd": 5, "period": "total"}},
                 {"name": "rival", "key_env": "KEY_RIVAL", "tenant": "rival"}],
    }, builtin_upstreams(settings))
    return create_app(settings, policy=policy), settings.ledger_path


def client(url: str, key: str) -> genai.Client:
    return genai.Client(api_key=key, http_options=types.HttpOptions(base_url=url, api_version="v1beta"))


def create(url: str, status: int = 504) -> None:
    acme = client(url, ACME)
    with pytest.raises(errors.APIError) as lost:
        acme.caches.create(model=MODEL, config=types.CreateCachedContentConfig(contents=[CONTRACT], ttl="3600s"))
    assert lost.value.code == status, lost.value


# Two creates both time out; Google makes the second (the rival's) and not the first (acme's).
SECOND_MADE = [{"fault": "latency=1.5;status=500", "provider": "gemini", "path": "/v1beta/cachedContents", "times": 1},
               {"fault": "latency=1.5", "provider": "gemini", "path": "/v1beta/cachedContents", "times": 1}]


def both_time_out(acme: genai.Client, rival: genai.Client, **asked: str) -> None:
    """acme's create (with the lifetime `asked`) and then, while it waits, the rival's of the same contents for an hour."""
    first = threading.Thread(target=lambda: pytest.raises(errors.APIError, acme.caches.create, model=MODEL,
                                                          config=types.CreateCachedContentConfig(contents=[CONTRACT], **asked)))
    first.start()
    time.sleep(0.2)     # acme's create reaches the mock first
    with pytest.raises(errors.APIError):
        rival.caches.create(model=MODEL, config=types.CreateCachedContentConfig(contents=[CONTRACT], ttl="3600s"))
    first.join()


def booked(ledger: str) -> dict:
    wait_until(lambda: any(r["key"] == "acme" for r in read_records(ledger)), 15, "the create's record")
    [row] = [r for r in read_records(ledger) if r["key"] == "acme"]
    return row


def spent(proxy) -> int:
    counter, _, _ = spend_counter(proxy.policy.keys[0], time.time())
    wait_until(lambda: counter not in proxy.limits.reserved, 5, "the hold settled")
    return proxy.limits.store._values[counter][0]      # one replica's own counters


@pytest.mark.parametrize(("fault", "status"), [
    ("latency=1.5", 504),   # the create takes 1.5 s, the route waits 0.5 s: the mock makes the cache after
    ("cut_answer=1", 502),  # made, and its answer cut off halfway: the gateway cannot read what it was
])
def test_a_create_whose_answer_was_lost_is_found_owned_and_booked(monkeypatch, tmp_path, fault, status):
    lost = [{"fault": fault, "provider": "gemini", "path": "/v1beta/cachedContents", "times": 1}]
    with stack(monkeypatch, tmp_path, lost) as (url, proxy, upstream, ledger):
        create(url, status)
        row = booked(ledger)
        [made] = list(upstream.caches.list())      # the one Google made, as the gateway's project lists it
        acme, rival = client(url, ACME), client(url, RIVAL)
        # The caller's own: listed, read and deleted by it; another tenant is told it does not exist.
        assert [c.name for c in acme.caches.list()] == [made.name]
        assert acme.caches.get(name=made.name).usage_metadata.total_token_count == made.usage_metadata.total_token_count
        for call in (lambda: rival.caches.get(name=made.name), lambda: rival.caches.delete(name=made.name)):
            with pytest.raises(errors.ClientError) as hidden:
                call()
            assert hidden.value.code == 404
        assert list(rival.caches.list()) == []
        charged = spent(proxy)
        acme.caches.delete(name=made.name)
        assert list(upstream.caches.list()) == []
    # Booked as the create: its tokens written at the input rate, and stored from its createTime to its expiry.
    tokens = made.usage_metadata.total_token_count
    assert row["cache_writes"]["explicit"] == tokens > 4000
    hours = Decimal(str(made.expire_time.timestamp() - made.create_time.timestamp())) / 3600
    assert Decimal(row["cost_usd"]) == pytest.approx(tokens * (INPUT + STORAGE_PER_HOUR * hours) / 10**6, rel=Decimal("1e-6"))
    assert charged == nanodollars(Decimal(row["cost_usd"]))
    assert "answer never came" in " ".join(row["explanation"])


def test_a_create_in_doubt_that_cannot_be_told_apart_is_booked_at_its_worst_case(monkeypatch, tmp_path):
    # Every list fails: the cache Google made cannot be found, so what the create held is booked, and says why.
    faults = [{"fault": "latency=1.5", "provider": "gemini", "path": "/v1beta/cachedContents", "times": 1},
              {"fault": "status=500", "provider": "gemini", "path": "/v1beta/cachedContents"}]
    with stack(monkeypatch, tmp_path, faults) as (url, proxy, upstream, ledger):
        create(url)
        row = booked(ledger)
        charged = spent(proxy)
    assert "in doubt" in " ".join(row["explanation"])
    # Its worst case: the body's tokens (a 4-byte estimate) written and stored for the hour asked, at least the
    # cache's own tokens at those rates.
    worst = Decimal(row["cost_usd"])
    assert worst >= row["cache_writes"]["explicit"] * (INPUT + STORAGE_PER_HOUR) / 10**6 > 0
    assert charged == nanodollars(worst)


def test_a_caller_hanging_up_mid_create_still_gets_its_cache(monkeypatch, tmp_path):
    # The gateway waits for the answer it was sent for; the caller hangs up before it comes. The create is not
    # cancelled: its answer is booked and owned as any other, and the caller finds its cache in its list.
    slow = [{"fault": "latency=1.5", "provider": "gemini", "path": "/v1beta/cachedContents", "times": 1}]
    with stack(monkeypatch, tmp_path, slow, timeout_s=30) as (url, proxy, upstream, ledger):
        body = {"model": f"models/{MODEL}", "ttl": "3600s", "contents": [{"role": "user", "parts": [{"text": CONTRACT}]}]}
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{url}/v1beta/cachedContents", headers={"x-goog-api-key": ACME}, json=body, timeout=0.3)
        row = booked(ledger)
        [made] = list(upstream.caches.list())
        acme = client(url, ACME)
        assert [c.name for c in acme.caches.list()] == [made.name]
    assert row["cache_writes"]["explicit"] == made.usage_metadata.total_token_count


def test_two_caches_that_fit_are_a_doubt_not_a_guess(monkeypatch, tmp_path):
    # A cache made at Google directly (no tenant's), of the same model and lifetime, while the caller's create is in
    # doubt: either could be the caller's. Neither is handed to it; what the create held is booked, as in doubt.
    slow = [{"fault": "latency=1.5", "provider": "gemini", "path": "/v1beta/cachedContents", "times": 1}]
    with stack(monkeypatch, tmp_path, slow) as (url, proxy, upstream, ledger):
        create(url)
        upstream.caches.create(model=MODEL, config=types.CreateCachedContentConfig(contents=[CONTRACT], ttl="3600s"))
        row = booked(ledger)
        charged = spent(proxy)
        acme = client(url, ACME)
        assert list(acme.caches.list()) == []
        assert len(list(upstream.caches.list())) == 2
    assert "in doubt" in " ".join(row["explanation"]) and "2 caches" in " ".join(row["explanation"])
    assert charged == nanodollars(Decimal(row["cost_usd"])) > 0


def test_two_tenants_creates_in_doubt_at_once_never_take_each_others_cache(monkeypatch, tmp_path):
    # Both creates time out; Google makes the second (the rival's) and not the first (acme's). The one cache fits
    # what both asked: handed to acme it would give acme the rival's contents. Neither gets it; both are in doubt.
    with stack(monkeypatch, tmp_path, SECOND_MADE) as (url, proxy, upstream, ledger):
        acme, rival = client(url, ACME), client(url, RIVAL)
        both_time_out(acme, rival, ttl="3600s")
        wait_until(lambda: len(read_records(ledger)) == 2, 15, "both creates' records")
        assert len(list(upstream.caches.list())) == 1
        assert list(acme.caches.list()) == [] and list(rival.caches.list()) == []
    assert all("in doubt" in " ".join(r["explanation"]) for r in read_records(ledger))


def test_a_vertex_create_that_timed_out_is_found_in_its_location_and_owned(monkeypatch, tmp_path):
    # Vertex lists a project's caches per location, under full resource names; the create named the caller's project.
    with vertex_stack(monkeypatch, tmp_path, "1.5") as (gateway, vertex):
        acme = genai.Client(vertexai=True, project="acme-project", location=LOCATION, credentials=Credentials(CALLER),
                            http_options=types.HttpOptions(base_url=gateway))
        with pytest.raises(errors.APIError) as timed_out:
            acme.caches.create(model=GEMINI, config=types.CreateCachedContentConfig(contents=[CONTRACT], ttl="3600s"))
        assert timed_out.value.code == 504
        row = booked(vertex.ledger)
        [made] = vertex.billed()
        [mine] = list(acme.caches.list())
    assert mine.name.rsplit("/", 1)[-1] == made["name"].rsplit("/", 1)[-1]
    assert row["cache_writes"]["explicit"] == made["tokens"] > 4000 and row["target"] == "vertex"


def test_a_create_still_searched_for_when_the_gateway_stops_is_booked_at_its_worst_case(monkeypatch, tmp_path):
    # The gateway stops while its search waits: the hold would go with it and nothing would book the cache later.
    slow = [{"fault": "latency=1.5", "provider": "gemini", "path": "/v1beta/cachedContents", "times": 1}]
    with stack(monkeypatch, tmp_path, slow) as (url, proxy, upstream, ledger):
        counter, _, _ = spend_counter(proxy.policy.keys[0], time.time())
        create(url)
        held = proxy.limits.reserved[counter]
    [row] = [r for r in read_records(ledger) if r["key"] == "acme"]
    assert "in doubt" in " ".join(row["explanation"]) and "gateway stopped" in " ".join(row["explanation"])
    assert nanodollars(Decimal(row["cost_usd"])) == held > 0


@pytest.mark.parametrize("asked", [{}, {"ttl": "3630s"}])
def test_a_rival_create_spelling_the_same_lifetime_otherwise_is_no_less_a_rival(monkeypatch, tmp_path, asked):
    # acme names no lifetime (Google's default hour), or 30 s more; the rival asks "3600s". Google makes the
    # rival's cache alone, and it fits what both asked: handed to acme, acme would read the rival's contents.
    with stack(monkeypatch, tmp_path, SECOND_MADE) as (url, proxy, upstream, ledger):
        acme, rival = client(url, ACME), client(url, RIVAL)
        both_time_out(acme, rival, **asked)
        wait_until(lambda: len(read_records(ledger)) == 2, 15, "both creates' records")
        assert len(list(upstream.caches.list())) == 1
        assert list(acme.caches.list()) == [] and list(rival.caches.list()) == []
    assert all("in doubt" in " ".join(r["explanation"]) for r in read_records(ledger))


def test_the_caches_found_are_forgotten_once_owned():
    # One name per cache found for a create in doubt: kept an hour (owned by then), not for the replica's life.
    now = [1_000_000.0]
    rivals = Rivals(lambda: now[0])
    for i in range(3):
        rivals.claim(f"cachedContents/{i}")
        now[0] += 1800
    assert list(rivals.claimed) == ["cachedContents/1", "cachedContents/2"]


def test_two_replicas_creates_in_doubt_at_once_never_take_each_others_cache(monkeypatch, tmp_path, redis_url):
    # As two tenants' on one replica: acme's through one replica, the rival's through another, both time out, and
    # Google makes the rival's alone. acme's replica would have found one cache no one owned, and no rival of its own.
    monkeypatch.setenv("GEMINI_API_KEY", GATEWAY_KEY)
    monkeypatch.setenv("KEY_ACME", ACME)
    monkeypatch.setenv("KEY_RIVAL", RIVAL)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with ServerThread(mock_app(MockContext(faults=FaultPlan.from_config({"faults": SECOND_MADE})))) as mock:
        (one, ledger_a), (other, ledger_b) = (replica(mock.url, tmp_path / n, redis_url=redis_url) for n in "ab")
        with ServerThread(one) as a, ServerThread(other) as b:
            one.state.proxy.caches.tick_s = other.state.proxy.caches.tick_s = 0.4
            acme, rival = client(a.url, ACME), client(b.url, RIVAL)
            both_time_out(acme, rival, ttl="3600s")
            wait_until(lambda: len(read_records(ledger_a)) + len(read_records(ledger_b)) == 2, 15, "both records")
            assert list(acme.caches.list()) == [] and list(rival.caches.list()) == []
    assert all("in doubt" in " ".join(r["explanation"]) for r in [*read_records(ledger_a), *read_records(ledger_b)])


def test_on_an_open_gateway_a_create_in_doubt_never_books_another_callers_answered_cache(monkeypatch, tmp_path):
    # One caller's create times out and Google makes nothing; another's, of the same model, displayName and hour, sent
    # meanwhile, is answered and booked. An open gateway records no owners: the answered cache looked like no one's,
    # fitted what the first asked, and its search booked it a second time.
    monkeypatch.setenv("GEMINI_API_KEY", GATEWAY_KEY)
    first_lost = [{"fault": "latency=1.5;status=500", "provider": "gemini", "path": "/v1beta/cachedContents", "times": 1}]
    faults = FaultPlan.from_config({"faults": first_lost})
    with ServerThread(mock_app(MockContext(faults=faults))) as mock:
        settings = settings_for(mock.url, tmp_path)
        policy = Policy.from_dict({"routes": [{"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}],
                                               "retry": {"attempts": 1, "timeout_s": 0.5}}]}, builtin_upstreams(settings))
        app = create_app(settings, policy=policy)
        with ServerThread(app) as gw:
            caches = app.state.proxy.caches
            caches.tick_s = 0.4
            one, other = client(gw.url, "caller-one"), client(gw.url, "caller-two")
            lost = threading.Thread(target=lambda: pytest.raises(errors.APIError, one.caches.create, model=MODEL,
                                                                 config=types.CreateCachedContentConfig(contents=[CONTRACT], ttl="3600s")))
            lost.start()
            wait_until(lambda: faults.rules[0]._fired, 10, "the first create at the mock, which loses its answer")
            other.caches.create(model=MODEL, config=types.CreateCachedContentConfig(contents=[CONTRACT], ttl="3600s"))
            lost.join()
            wait_until(lambda: not caches._finding, 15, "the lost create's search")
    [answered] = read_records(settings.ledger_path)
    assert "answer never came" not in " ".join(answered["explanation"]), answered["explanation"]
