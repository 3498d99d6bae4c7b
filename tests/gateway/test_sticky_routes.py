"""A load-balanced route through the gateway to two mock-providers instances (two Anthropic deployments), with
the real anthropic SDK and one clock, which the test moves, for the gateway's pins and both mocks' caches: a
session stays on one target through gaps shorter than the TTL, moves on a hard error (not on the caller's
own 4xx) and after its TTL, and each flip's re-write cost is on its ledger record, in /metrics and on the
dashboard's route row."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

import anthropic
import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from prefixgate.gateway.app import create_app
from prefixgate.ledger import read_records
from prefixgate.policies import Policy, PolicyError, builtin_upstreams
from prefixgate.simulation.mock.faults import FaultRule, parse_fault
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.dashboard.test_dashboard_browser import assert_reads_as, browser, loads  # noqa: F401 (fixture)
from tests.gateway.support_gateway import settings_for
from tests.support_services import ServerThread, wait_until

MODEL = "claude-sonnet-5-5"
SYSTEM = "You are the ACME warranty assistant. Answer from the policy below.\n" + "Policy clause: coverage lasts two years. " * 300
# Sonnet 5.5's published prices (platform.claude.com pricing, 2026-10): 5-minute cache write $2.50 per million
# tokens, cache hit $0.10 per million (from 2026-10-07). A flip writes the prefix again instead of reading it.
WRITE_5M, READ = Decimal("2.50"), Decimal("0.10")


class Clock:
    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


# Two tenants' caller keys (the policy holds their sha256).
KEYS = {"acme": "pg-acme-caller-key-7f3a9c1e5b", "globex": "pg-globex-caller-key-2d8e4f6a0c"}


def policy(settings, east: str, west: str, balance: str) -> Policy:
    return Policy.from_dict({
        "upstreams": {"east": {"kind": "anthropic", "url": east}, "west": {"kind": "anthropic", "url": west}},
        "routes": [{"name": "claude", "models": [MODEL], "balance": balance,
                    "targets": [{"upstream": "east"}, {"upstream": "west"}]}],
        "keys": [{"name": name, "key_env": f"KEY_{name.upper()}", "tenant": name} for name in KEYS],
    }, builtin_upstreams(settings))


@contextmanager
def two_deployments(monkeypatch) -> Iterator[tuple[Clock, dict[str, MockContext], ServerThread, ServerThread]]:
    """Two mock Anthropic deployments on one clock, and the keys the gateway and its callers use."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-gateway-key-000222")
    for name, key in KEYS.items():
        monkeypatch.setenv(f"KEY_{name.upper()}", key)
    clock = Clock()
    contexts = {"east": MockContext(clock=clock), "west": MockContext(clock=clock)}
    with ServerThread(mock_app(contexts["east"])) as east, ServerThread(mock_app(contexts["west"])) as west:
        yield clock, contexts, east, west


@pytest.fixture(params=["cost", "round_robin"])
def stack(request, tmp_path, monkeypatch):
    with two_deployments(monkeypatch) as (clock, contexts, east, west):
        settings = settings_for(east.url, tmp_path)
        app = create_app(settings, policy=policy(settings, east.url, west.url, request.param))
        with ServerThread(app) as gw:
            app.state.proxy.sticky.clock = clock
            yield gw, settings, clock, contexts


def refuses_twice(context: MockContext) -> None:
    """The deployment answers its next two requests 503 (both attempts the retry policy allows)."""
    context.faults.rules.append(FaultRule(parse_fault("status=503"), times=2))


def failed_over(gw, clock, contexts: dict[str, MockContext], session: list[dict]) -> tuple[str, str]:
    """A session's first turn pins a deployment, which then refuses twice: the second turn, a minute later,
    goes elsewhere. The deployments of the first and the second turn."""
    _, first = ask(gw, "Is my toaster covered?", session)
    refuses_twice(contexts[first])
    clock.now += 60
    _, moved = ask(gw, "And my kettle?", session)
    return first, moved


def only(request, balance: str, why: str) -> None:
    if request.node.callspec.params["stack"] != balance:
        pytest.skip(why)


def ask(gw, question: str, session: list[dict], tenant: str = "acme") -> tuple[anthropic.types.Message, str]:
    client = anthropic.Anthropic(base_url=gw.url, api_key=KEYS[tenant], max_retries=0)
    session.append({"role": "user", "content": question})
    raw = client.messages.with_raw_response.create(model=MODEL, max_tokens=64, system=SYSTEM, messages=session)
    reply = raw.parse()
    session.append({"role": "assistant", "content": reply.content[0].text})
    return reply, raw.headers["x-prefixgate-target"]


def records(settings, n: int) -> list[dict]:
    wait_until(lambda: len(read_records(settings.ledger_path)) >= n, 10, f"{n} ledger records")
    return sorted(read_records(settings.ledger_path), key=lambda r: r["ts"])


def test_a_session_stays_on_its_target_through_gaps_shorter_than_the_ttl(stack):
    gw, settings, clock, _ = stack
    session: list[dict] = []
    _, first = ask(gw, "Is my toaster covered?", session)
    targets = [first]
    for _ in range(4):
        clock.now += 240            # four minutes: inside Claude's 5-minute TTL, refreshed by each read
        reply, target = ask(gw, "And my kettle?", session)
        targets.append(target)
        assert reply.usage.cache_read_input_tokens > 2000
    assert targets == [first] * 5
    assert not any(r["flip"] for r in records(settings, 5))


def test_round_robin_spreads_new_sessions_and_each_stays(stack, request):
    only(request, "round_robin", "round_robin spreads sessions in turn; cost ranks them by price and hit rate")
    gw, _, clock, _ = stack
    one: list[dict] = []
    two: list[dict] = []
    _, first = ask(gw, "Is my toaster covered?", one)
    _, second = ask(gw, "Is my fridge covered?", two)
    assert {first, second} == {"east", "west"}
    for _ in range(3):
        clock.now += 120
        assert ask(gw, "And my kettle?", one)[1] == first
        assert ask(gw, "And my kettle?", two)[1] == second


def test_one_tenants_pin_does_not_steer_anothers(stack, request):
    only(request, "round_robin", "where a new session starts is fixed under round_robin (its first turn), a hash under cost")
    gw, settings, clock, contexts = stack
    acme: list[dict] = []
    first, moved = failed_over(gw, clock, contexts, acme)
    assert moved != first      # acme's session is pinned elsewhere now
    # Globex sends the very same conversation: it starts where a new session of its own starts, not on acme's pin.
    globex: list[dict] = []
    _, target = ask(gw, "Is my toaster covered?", globex, tenant="globex")
    assert target == first


def test_on_an_open_gateway_one_callers_pin_does_not_steer_anothers(tmp_path, monkeypatch):
    """No caller keys and no gateway key: each caller's own Anthropic key goes upstream, so its cache is in its own
    account and another caller's pin says nothing of where it is warm."""
    with two_deployments(monkeypatch) as (clock, contexts, east, west):
        monkeypatch.delenv("ANTHROPIC_API_KEY")
        settings = settings_for(east.url, tmp_path)
        app = create_app(settings, policy=Policy.from_dict({
            "upstreams": {"east": {"kind": "anthropic", "url": east.url}, "west": {"kind": "anthropic", "url": west.url}},
            "routes": [{"name": "claude", "models": [MODEL], "balance": "round_robin",
                        "targets": [{"upstream": "east"}, {"upstream": "west"}]}]}, builtin_upstreams(settings)))
        with ServerThread(app) as gw:
            app.state.proxy.sticky.clock = clock
            # Their own provider keys, sent as the caller keys `ask` sends.
            monkeypatch.setitem(KEYS, "acme", "sk-ant-caller-a-0123456789")
            monkeypatch.setitem(KEYS, "globex", "sk-ant-caller-b-0123456789")
            first, moved = failed_over(gw, clock, contexts, [])
            assert moved != first      # caller a's session is pinned elsewhere now
            # Caller b sends the very same conversation: it starts where a new session of its own starts.
            _, target = ask(gw, "Is my toaster covered?", [], tenant="globex")
            assert target == first


def test_a_hard_error_moves_the_session_and_the_flip_is_priced(stack):
    gw, settings, clock, contexts = stack
    session: list[dict] = []
    opening, first = ask(gw, "Is my toaster covered?", session)
    warm = opening.usage.cache_creation_input_tokens + opening.usage.cache_read_input_tokens
    other = "west" if first == "east" else "east"
    clock.now += 60
    refuses_twice(contexts[first])            # the pinned deployment: the session fails over
    reply, target = ask(gw, "And my kettle?", session)
    assert target == other
    assert reply.usage.cache_creation_input_tokens > warm > 2000 and reply.usage.cache_read_input_tokens == 0
    # What was warm on the first target is written again (the new turn would have been written anyway).
    flip = records(settings, 2)[-1]
    assert (flip["flip"], flip["flip_from"], flip["flip_tokens"]) == ("failover", first, warm)
    assert Decimal(flip["flip_cost_usd"]) == warm * (WRITE_5M - READ) / 1_000_000
    # It stays where it moved: the next turn reads there, with no flip.
    clock.now += 60
    reply, target = ask(gw, "And my blender?", session)
    assert target == other and reply.usage.cache_read_input_tokens > 2000
    assert records(settings, 3)[-1]["flip"] == ""
    metrics = httpx.get(gw.url + "/metrics").text
    assert 'prefixgate_route_flips_total{reason="failover",route="claude"} 1.0' in metrics
    wait_until(lambda: _route_row(gw)["flips"]["count"] == 1, 10, "the dashboard's flip")
    assert Decimal(_route_row(gw)["flips"]["cost_usd"]) == Decimal(flip["flip_cost_usd"])


def test_the_callers_own_4xx_does_not_move_the_session(stack):
    gw, settings, clock, contexts = stack
    session: list[dict] = []
    _, first = ask(gw, "Is my toaster covered?", session)
    contexts[first].faults.rules.append(FaultRule(parse_fault("status=400"), times=1))
    with pytest.raises(anthropic.BadRequestError):
        ask(gw, "And my kettle?", session)
    session.pop()
    clock.now += 60
    _, target = ask(gw, "And my kettle?", session)
    assert target == first


def test_after_its_ttl_the_session_may_move_and_a_move_is_a_flip_by_expiry(stack):
    gw, settings, clock, contexts = stack
    session: list[dict] = []
    _, first = ask(gw, "Is my toaster covered?", session)
    other = "west" if first == "east" else "east"
    clock.now += 400                # past the 5-minute TTL: cold everywhere
    # The first target is busy: the new choice is the other one, and the ledger says why it moved.
    contexts[first].faults.rules.append(FaultRule(parse_fault("status=429"), times=2))
    reply, target = ask(gw, "And my kettle?", session)
    assert target == other
    rec = records(settings, 2)[-1]
    assert rec["flip"] == "expired" and 2000 < rec["flip_tokens"] < reply.usage.cache_creation_input_tokens


def _route_row(gw) -> dict:
    data = httpx.get(gw.url + "/api/breakdown", params={"by": "route", "range": "1h"}).json()
    return next(r for r in data["rows"] if r["name"] == "claude")


@pytest.mark.parametrize(("change", "message"), [
    ({"balance": "fastest"}, "balance: must be one of cost, round_robin"),
    ({"targets": [{"upstream": "east"}]}, "at least two targets"),
    ({"targets": [{"replicas": ["east", "west"]}, {"upstream": "east"}]}, "each name one upstream"),
    ({"targets": [{"upstream": "east"}, {"upstream": "east"}]}, "names each upstream once"),
    ({"targets": [{"upstream": "east"}, {"upstream": "gpt"}]}, "one model in one format"),
    ({"targets": [{"upstream": "east", "model": MODEL}, {"upstream": "west"}]}, "the model it serves, or none"),
    ({"targets": [{"upstream": "east", "model": MODEL}, {"upstream": "west", "model": "claude-opus-5-5"}]},
     "serve one model"),
])
def test_a_balanced_route_is_checked_at_load(tmp_path, change, message):
    settings = settings_for("http://127.0.0.1:9", tmp_path)
    route = {"name": "claude", "models": [MODEL], "balance": "cost",
             "targets": [{"upstream": "east"}, {"upstream": "west"}], **change}
    with pytest.raises(PolicyError, match=message) as e:
        Policy.from_dict({"upstreams": {"east": {"kind": "anthropic", "url": "http://127.0.0.1:9"},
                                        "west": {"kind": "anthropic", "url": "http://127.0.0.1:9"},
                                        "gpt": {"kind": "openai", "url": "http://127.0.0.1:9"}},
                          "routes": [route]}, builtin_upstreams(settings))
    assert str(e.value).startswith("routes.0")


def test_replicas_sharing_redis_agree_where_a_session_is_pinned(tmp_path, monkeypatch, redis_url):
    with two_deployments(monkeypatch) as (clock, contexts, east, west):
        replicas = []
        for n in (1, 2):
            settings = settings_for(east.url, tmp_path / f"replica{n}", redis_url=redis_url)
            (tmp_path / f"replica{n}").mkdir()
            replicas.append(create_app(settings, policy=policy(settings, east.url, west.url, "round_robin")))
        with ServerThread(replicas[0]) as one, ServerThread(replicas[1]) as two:
            for app in replicas:
                app.state.proxy.sticky.clock = clock
            session: list[dict] = []
            first, moved = failed_over(one, clock, contexts, session)
            assert moved != first
            clock.now += 60
            # The other replica has never seen this session: it follows the pin replica one wrote to Redis.
            reply, target = ask(two, "And my blender?", session)
            assert target == moved and reply.usage.cache_read_input_tokens > 2000


def test_the_dashboard_page_names_a_routes_flips_and_their_cost(stack, request, browser):  # noqa: F811
    only(request, "cost", "one balance is enough for the page")
    gw, settings, clock, contexts = stack
    session: list[dict] = []
    failed_over(gw, clock, contexts, session)
    cost = Decimal(records(settings, 2)[-1]["flip_cost_usd"])
    browser.get(gw.url + "/dashboard")
    WebDriverWait(browser, 20).until(lambda d: loads(d) >= 1)
    check = browser.find_element(By.CSS_SELECTOR, '#breakdown-body tr[data-name="claude"] td.check')
    assert "1 flip(s)" in check.text and "re-written" in check.text
    (shown,) = [w.rstrip(",.;") for w in check.text.split() if w.startswith("$")]
    assert_reads_as(shown, cost)


def test_with_redis_unreachable_a_replica_keeps_its_own_pins(tmp_path, monkeypatch):
    with two_deployments(monkeypatch) as (clock, _, east, west):
        # Nothing listens on port 1: every Redis call is refused at once.
        settings = settings_for(east.url, tmp_path, redis_url="redis://127.0.0.1:1/0")
        app = create_app(settings, policy=policy(settings, east.url, west.url, "round_robin"))
        with ServerThread(app) as gw:
            app.state.proxy.sticky.clock = clock
            session: list[dict] = []
            targets = []
            for question in ("Is my toaster covered?", "And my kettle?", "And my blender?"):
                clock.now += 60
                targets.append(ask(gw, question, session)[1])
    assert targets == [targets[0]] * 3
