"""Keep-alive live: the anthropic SDK through `prefixgate serve` against `prefixgate mock-providers`, each its own
process, with idle gaps of minutes passed by a clock both processes read (`clock_offset_file`): the gateway
schedules its refreshes by it and the mock expires Anthropic's 5-minute cache entries by it.

Prices are Anthropic's published ones for Claude Sonnet 5.5 (the shared sheet provider-caching.md, section 1.5,
from the model's overview and pricing pages): input $2/MTok, 5-minute cache write $2.50/MTok, cache read $0.10/MTok
(0.05x, from 2026-10-07). A refresh is the same prefix
with `max_tokens: 0` (pre-warm): it reads the cached prefix and produces nothing, so it costs the prefix's
tokens at $0.10/MTok.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import yaml
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait
from starlette.responses import JSONResponse

from prefixgate.clock import OffsetClock
from prefixgate.config import Settings
from prefixgate.gateway.app import create_app
from prefixgate.ledger import read_records
from prefixgate.policies import Policy, builtin_upstreams
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as create_mock
from prefixgate.simulation.simulator import Simulator
from tests.gateway.dashboard.test_dashboard_browser import assert_reads_as, browser  # noqa: F401 (a fixture)
from tests.support_calendar import midday_zone
from tests.support_services import ServerThread, wait_until
from tests.support_stack import running_stack

READ = Decimal("0.10")          # USD per million tokens: Sonnet 5.5 cache read
WRITE_5M = Decimal("2.50")      # USD per million tokens: Sonnet 5.5 5-minute cache write
WRITE_1H = Decimal("4")         # USD per million tokens: Sonnet 5.5 1-hour cache write
INPUT = Decimal("2")            # USD per million tokens: Sonnet 5.5 input
OUTPUT = Decimal("10")          # USD per million tokens: Sonnet 5.5 output
MODEL = "claude-sonnet-5-5"
# GPT-6.2 Sol's published prices, USD per million tokens (https://developers.openai.com/api/docs/models/gpt-6.2-sol).
GPT_INPUT, GPT_OUTPUT, GPT_READ, GPT_WRITE_30M = Decimal("2.00"), Decimal("10.00"), Decimal("0.10"), Decimal("2.50")
ADMIN = "keepalive-admin-token-0123456789"
REPLY_S = 60                    # how long a session's user takes to reply, between its idle gaps

KEYS = {name: f"ka-{name}-key-0123456789abcdef" for name in ("agent", "evict", "plain", "capped", "oneoff", "late", "budgeted", "chat", "edited",
                                                                      "static", "slow", "lobby", "translated_chat", "translated_responses", "gpt")}


def policy(tmp: Path) -> Path:
    def route(name: str, keepalive: object) -> dict:
        return {"name": name, "models": [f"{name}-sonnet"], "targets": [{"upstream": "anthropic", "model": MODEL}],
                "keepalive": keepalive}

    # These routes' refreshes are re-reads of the prefix; "chat" may also upgrade through the answer (the default).
    on = {"mode": "on", "route_usd": 5, "key_usd": 1, "period": "day", "upgrade": False}
    doc = {
        "routes": [route("agent", on), route("evict", on), route("plain", "off"), route("oneoff", on), route("late", on),
                   route("chat", {"mode": "on", "route_usd": 5, "key_usd": 1, "period": "day"}),
                   route("edited", {"mode": "on", "route_usd": 5, "key_usd": 1, "period": "day"}),
                   # Room for one refresh of a returning session's prefix (~7,900 tokens read: ~$0.0008) and not two.
                   route("capped", {"mode": "on", "route_usd": 1, "key_usd": 0.001, "period": "day", "upgrade": False})],
        "keys": [{"name": name, "key_env": f"KA_KEY_{name.upper()}", "tenant": name, "routes": [name]} for name in KEYS],
        "timezone": midday_zone(),      # caps and budgets count per day: one hours from its end, however late the run
    }
    doc["routes"] += [route("budgeted", on), route("static", on), route("slow", "off"),
                      route("lobby", {"mode": "on", "route_usd": 5, "key_usd": 1, "period": "day"}),
                      route("translated_chat", {"mode": "on", "route_usd": 5, "key_usd": 1, "period": "day"}),
                      route("translated_responses", {"mode": "on", "route_usd": 5, "key_usd": 1, "period": "day"}),
                      {"name": "gpt", "models": ["gpt-route"], "targets": [{"upstream": "openai", "model": "gpt-6.2-sol"}],
                       "keepalive": on}]
    # Two requests that write the prefix (~$0.01 each) spend it: nothing is left for a refresh.
    next(k for k in doc["keys"] if k["name"] == "budgeted")["budget"] = {"usd": 0.019, "period": "day"}
    path = tmp / "policy.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def system(tag: str) -> str:
    """Too short to cache on its own (Sonnet's minimum is 1024 tokens): the session's prefix is its conversation,
    kept by one 5-minute entry, what keep-alive is about. (A keep-alive route writes a cacheable system prompt for
    an hour from its first request: `test_a_keepalive_route_writes_its_system_prompt_for_an_hour`.)"""
    return f"You are reviewer {tag}."


def contract(tag: str) -> str:
    """The document a session's first turn brings, long enough to cache and different per session."""
    return f"Contract for {tag}. " + " ".join(f"Rule {i}: check clause {i} of the contract carefully." for i in range(300))


class Stack:
    def __init__(self, gw: str, mock: str, clock: Path, ledger: Path) -> None:
        self.gw, self.mock, self.clock, self.ledger = gw, mock, clock, ledger
        self.offset = 0.0
        self.app: Any = None        # the gateway's app, where it runs in this process (`open_gateway`)

    def client(self, name: str) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.gw, api_key=KEYS[name], max_retries=0)

    def advance(self, seconds: float) -> None:
        """Move both processes' clocks forward (what an idle gap of `seconds` does to them)."""
        self.offset += seconds
        self.clock.write_text(str(self.offset))

    def refreshes(self, route: str) -> list[dict]:
        return [r for r in read_records(str(self.ledger)) if r["kind"] == "keepalive" and r["route"] == route]

    def requests(self, route: str) -> list[dict]:
        return [r for r in read_records(str(self.ledger)) if r["kind"] == "" and r["route"] == route]

    def wait_refreshes(self, route: str, n: int, timeout: float = 15.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.refreshes(route)
            if len(found) >= n:
                return found
            time.sleep(0.1)
        raise AssertionError(f"{route}: {len(self.refreshes(route))} refresh(es) after {timeout}s, wanted {n}")

    def settle(self) -> None:
        """Until the gateway's worker has acted on the clock as it stands: a gateway in this process, until its worker
        ended two ticks (the second began after the clock moved); a child process's, 1.5 s of its 1 s ticks, which
        only a check that nothing happened may follow (what the worker does is waited for: `wait_stop`)."""
        if self.app is None:
            time.sleep(1.5)
            return
        ticks = ticks_of(self.app.state.proxy.keepalive)
        ended = ticks[0]
        wait_until(lambda: ticks[0] >= ended + 2, 15, "two keep-alive ticks")

    def wait_stop(self, route: str, reason: str) -> None:
        """Until /metrics counts a session of `route` stopped for `reason` (the worker decides that on a tick of its
        own, whenever the loaded machine runs it)."""
        wait_until(lambda: metric(self.metrics(), "prefixgate_keepalive_stops_total", route=route, reason=reason) == 1,
                   15, f"a {route} session stopped for {reason}")

    def metrics(self) -> str:
        return httpx.get(self.gw + "/metrics").text


def ticks_of(worker: Any) -> list[int]:
    """How many ticks `worker` (a gateway's KeepAlive in this process) has ended, counted from the first call."""
    if not hasattr(worker, "ended_ticks"):
        worker.ended_ticks, tick = [0], worker.tick

        async def counted() -> int:
            try:
                return await tick()
            finally:
                worker.ended_ticks[0] += 1
        worker.tick = counted
    return worker.ended_ticks


def series(text: str, name: str, **labels: str) -> list[float]:
    """The values of every series of `name` whose labels include `labels`."""
    out = []
    for m in re.finditer(rf"^{name}\{{([^}}]*)\}} (\S+)$", text, re.M):
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if all(have.get(k) == v for k, v in labels.items()):
            out.append(float(m.group(2)))
    return out


def metric(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))     # Prometheus orders labels by name
    m = re.search(rf"^{name}\{{{re.escape(want)}\}} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Stack:
    tmp = tmp_path_factory.mktemp("keepalive")
    clock, ledger = tmp / "clock", tmp / "ledger.sqlite"
    clock.write_text("0")
    mp = pytest.MonkeyPatch()
    # Both children read the same clock file (the mock from its settings too).
    mp.setenv("PREFIXGATE_CLOCK_OFFSET_FILE", str(clock))
    env = {"PREFIXGATE_POLICY_FILE": str(policy(tmp)), "PREFIXGATE_LEDGER_PATH": str(ledger),
           "PREFIXGATE_ADMIN_TOKEN": ADMIN, "ANTHROPIC_API_KEY": "sk-ant-gateway-own-key-000", "OPENAI_API_KEY": "sk-gateway-own-openai-000",
           **{f"KA_KEY_{n.upper()}": k for n, k in KEYS.items()}}
    try:
        with running_stack(tmp, env) as (gw, mock):
            yield Stack(gw, mock, clock, ledger)
    finally:
        mp.undo()


def turn(client: anthropic.Anthropic, route: str, tag: str, history: list[dict], text: str,
         stream: bool = False) -> anthropic.types.Message:
    """One user turn of a conversation (`history` grows with the turn and its answer), streamed or not. The first
    turn brings the session's contract."""
    history.append({"role": "user", "content": text if history else f"{contract(tag)}\n\n{text}"})
    asked = {"model": f"{route}-sonnet", "max_tokens": 50, "system": system(tag), "messages": history}
    if stream:
        with client.messages.stream(**asked) as events:
            msg = events.get_final_message()
    else:
        msg = client.messages.create(**asked)
    history.append({"role": "assistant", "content": msg.content[0].text})
    return msg


def returning_session(stack: Stack, route: str, tag: str = "") -> tuple[anthropic.Anthropic, list[dict], int]:
    """A session of `route` whose user replied once, a minute after its first answer, with the next section of the
    contract: until a session has come back, nothing repeats on the route and keep-alive sends nothing. The planner
    (it learns gaps on the clock the tests move) marks that long reply's end for 5 minutes: an hour's premium on it
    is not worth it on a route kept alive. Returns the client, the history and the prefix's tokens: the entry the
    reply's request left, through its last mark."""
    client, history, tag = stack.client(route), [], tag or f"{route}-1"
    before = len(stack.refreshes(route))
    turn(client, route, tag, history, "Review section 1.")
    stack.advance(REPLY_S)
    back = turn(client, route, tag, history, section_2(tag))
    assert back.usage.cache_read_input_tokens > 3000 and len(stack.refreshes(route)) == before
    assert back.usage.cache_creation.ephemeral_5m_input_tokens > 3000 and not back.usage.cache_creation.ephemeral_1h_input_tokens
    return client, history, entry(back)


def section_2(tag: str) -> str:
    """A user's reply that brings the contract's next section: long enough that its end is marked for 5 minutes."""
    return f"And section 2? {contract(tag + ', section 2')}"


def entry(answered: anthropic.types.Message) -> int:
    """The tokens of the cache entry a request left through its last mark: what it read plus what it wrote."""
    return answered.usage.cache_read_input_tokens + answered.usage.cache_creation_input_tokens


def test_a_keepalive_route_writes_its_system_prompt_for_an_hour(stack: Stack) -> None:
    """A hit never lengthens an entry: the route's first write of its system prompt is the TTL it keeps while
    requests hit it, so a keep-alive route writes it for an hour from the first request."""
    client = stack.client("static")
    client.messages.create(model="static-sonnet", max_tokens=50, system=contract("static system prompt"),
                           messages=[{"role": "user", "content": "Review section 1."}])
    [first] = stack.requests("static")
    assert first["cache_writes"].get("1h", 0) > 3000 and "first write on a keep-alive route" in " ".join(first["explanation"])


def test_the_planner_learns_gaps_on_the_gateway_clock(stack: Stack) -> None:
    """The planner times a route's gaps by the clock keep-alive uses (the one tests move): a user who has twice come
    back after 20 minutes gets the next long turn marked for an hour; a planner on another clock would have seen
    them back at once and marked it for 5 minutes."""
    client, history = stack.client("slow"), []
    turn(client, "slow", "slow-1", history, "Review section 1.")
    for _ in range(2):
        stack.advance(20 * 60)
        turn(client, "slow", "slow-1", history, "And the next one?")
    stack.advance(20 * 60)
    after = turn(client, "slow", "slow-1", history, section_2("slow-1"))
    assert after.usage.cache_creation.ephemeral_1h_input_tokens > 3000


def test_a_quiet_routes_system_prompt_is_kept_for_the_next_session(stack: Stack) -> None:
    """The static prefix's entry on its own serves the sessions that start: on a route whose one-question sessions
    start every 20-30 minutes, the system prompt (written for an hour) is refreshed before it expires once the route
    goes quiet, and the next session, 100 minutes after the last, reads it. Its refresh is billed like any; the
    session that reads it is credited with the write it did not pay (at the 1-hour write price)."""
    client = stack.client("lobby")
    prompt = contract("lobby system prompt")
    asked = []
    for gap, question in ((0, "Is clause 3 fair?"), (20 * 60, "Who signs it?"), (30 * 60, "When does it end?")):
        stack.advance(gap)
        asked.append(client.messages.create(model="lobby-sonnet", max_tokens=50, system=prompt,
                                            messages=[{"role": "user", "content": question}]))
    system = asked[-1].usage.cache_read_input_tokens          # the later sessions read the system prompt
    assert system > 3000 and asked[0].usage.cache_creation.ephemeral_1h_input_tokens >= system
    assert stack.refreshes("lobby") == []                     # each session came within the hour
    stack.advance(3600 - 25)     # the route has been quiet for an hour: 25 s before the entry expires
    [refresh] = stack.wait_refreshes("lobby", 1)
    assert refresh["cache_read"] == system and sum(refresh["cache_writes"].values()) == 0 and refresh["output"] == 0
    assert "refresh of the static prefix" in refresh["explanation"][0]
    assert Decimal(refresh["cost_usd"]) == (system * READ + refresh["uncached_input"] * INPUT) / 1_000_000
    stack.advance(40 * 60)       # past the hour the last session's write bought, within the refresh's
    after = client.messages.create(model="lobby-sonnet", max_tokens=50, system=prompt,
                                   messages=[{"role": "user", "content": "Can it be renewed?"}])
    assert after.usage.cache_read_input_tokens == system
    assert Decimal(stack.requests("lobby")[-1]["keepalive_saved_usd"]) == system * (WRITE_1H - READ) / 1_000_000


def test_without_keepalive_the_request_after_the_gap_writes_again(stack: Stack) -> None:
    client, history, prefix = returning_session(stack, "plain")      # a session that comes back, on a route with it off
    stack.advance(280)          # when a refresh would be due, were keep-alive on
    stack.settle()
    stack.advance(170)          # idle past the 5-minute TTL
    after = turn(client, "plain", "plain-1", history, "And section 3?")
    assert after.usage.cache_read_input_tokens == 0                 # expired: the whole prefix is written again
    assert after.usage.cache_creation_input_tokens > prefix
    assert stack.refreshes("plain") == []


def test_keepalive_keeps_a_returning_session_warm_and_bills_its_refresh(stack: Stack) -> None:
    client, history, prefix = returning_session(stack, "agent")
    # /metrics shows what keep-alive holds: the conversation with its refresh scheduled (by the worker, on its next
    # tick), and its body's bytes.
    wait_until(lambda: series(stack.metrics(), "prefixgate_keepalive_sessions", route="agent", level="conversation",
                              state="due") == [1.0], 15, "the agent session's refresh scheduled")
    text = stack.metrics()
    assert series(text, "prefixgate_keepalive_sessions", route="agent", level="conversation") == [1.0]
    assert series(text, "prefixgate_keepalive_sessions", route="agent", level="conversation", state="due") == [1.0]
    assert float(re.search(r"^prefixgate_keepalive_body_bytes (\S+)$", text, re.M).group(1)) > 0
    stack.advance(280)          # the refresh is due 30 s before the 5-minute entry expires
    [refresh] = stack.wait_refreshes("agent", 1)
    assert refresh["cache_read"] == prefix and refresh["output"] == 0 and sum(refresh["cache_writes"].values()) == 0
    assert Decimal(refresh["cost_usd"]) == prefix * READ / 1_000_000
    assert refresh["key"] == "agent" and refresh["tenant"] == "agent" and refresh["status"] == 200
    # Without caching no refresh would be sent: it saves nothing itself (not the 95% a read of the prefix "saves").
    assert refresh["cost_without_cache_usd"] == "0" and Decimal(refresh["savings_usd"]) == -Decimal(refresh["cost_usd"])
    stack.advance(170)          # 450 s after the request: past its own TTL, within the refresh's
    after = turn(client, "agent", "agent-1", history, "And section 3?")
    assert after.usage.cache_read_input_tokens == prefix             # read, not written again
    [credited] = [r for r in stack.requests("agent") if r["keepalive_saved_usd"]]
    assert Decimal(credited["keepalive_saved_usd"]) == prefix * (WRITE_5M - READ) / 1_000_000

    assert metric(stack.metrics(), "prefixgate_keepalive_refreshes_total", route="agent") == 1
    totals = httpx.get(stack.gw + "/api/breakdown", params={"by": "route", "range": "1h"},
                       headers={"authorization": f"Bearer {ADMIN}"}).json()
    row = next(r for r in totals["rows"] if r["name"] == "agent")
    assert row["keepalive"] == {"refreshes": 1, "bought_usd": str(prefix * READ / 1_000_000),
                                "saved_usd": str(prefix * (WRITE_5M - READ) / 1_000_000)}
    rows = [r for r in read_records(str(stack.ledger)) if r["route"] == "agent"]
    assert Decimal(row["savings_usd"]) == sum(Decimal(r["savings_usd"]) for r in rows)
    # /metrics counts the refresh's spend and tokens with the route's (as the dashboard does), not its latency.
    text = stack.metrics()
    assert sum(series(text, "prefixgate_cost_usd_total", route="agent")) == pytest.approx(
        float(sum(Decimal(r["cost_usd"]) for r in rows)), rel=1e-9)
    assert sum(series(text, "prefixgate_tokens_total", route="agent", kind="cache_read")) == sum(r["cache_read"] for r in rows)
    assert sum(series(text, "prefixgate_latency_seconds_count", route="agent")) == len(stack.requests("agent")) == 3


def test_a_chat_whose_user_walks_away_is_upgraded_through_its_answer(stack: Stack) -> None:
    """A hit never lengthens an entry (re-reading the prefix buys 5 more minutes); the answer the user got is new
    to the cache, so writing it after the prefix with a 1h mark keeps the whole conversation for an hour."""
    client, history, prefix = returning_session(stack, "chat")
    stack.advance(280)          # 30 s before the 5-minute entry expires, the user has not come back
    [upgrade] = stack.wait_refreshes("chat", 1)
    answer = upgrade["cache_writes"].get("1h", 0)
    assert upgrade["cache_read"] == prefix and set(upgrade["cache_writes"]) == {"1h"} and 0 < answer <= 50
    assert upgrade["output"] == 0 and upgrade["status"] == 200 and "upgrade to 1h" in upgrade["explanation"][0]
    assert Decimal(upgrade["cost_usd"]) == (prefix * READ + answer * WRITE_1H + upgrade["uncached_input"] * INPUT) / 1_000_000
    stack.advance(20 * 60)      # away 25 minutes: past any 5-minute entry, within the hour
    # The user comes back with a long new section: the planner marks its end for 5 minutes (an hour's premium on
    # that much is not worth it on a route kept alive) ...
    after = turn(client, "chat", "chat-1", history, f"And this one? {contract('chat-1, section 3')}")
    assert after.usage.cache_read_input_tokens == prefix + answer     # the prefix and the answer, read
    assert after.usage.cache_creation.ephemeral_5m_input_tokens > 3000
    # ... and holds the answer's hour-long entry, marked again so that it outlives the turns after it.
    assert any(line.startswith("checkpoint: held") for line in stack.requests("chat")[-1]["explanation"])
    assert float(re.search(r"^prefixgate_keepalive_held_entries (\S+)$", stack.metrics(), re.M).group(1)) >= 1
    [credited] = [r for r in stack.requests("chat") if r["keepalive_saved_usd"]]
    assert Decimal(credited["keepalive_saved_usd"]) == (prefix + answer) * (WRITE_5M - READ) / 1_000_000
    stack.settle()
    assert len(stack.refreshes("chat")) == 1


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_openai_client_on_a_claude_route_is_upgraded_and_held_too(stack: Stack, api: str) -> None:
    """The caller speaks Chat Completions or Responses, the upstream Messages: the upgrade is built from the Claude
    answer as sent upstream, and the caller's next turn (the answer back in the caller's format, translated again)
    must still read it, and hold it."""
    route, tag = f"translated_{api}", f"translated-{api}-1"
    client = openai.OpenAI(base_url=stack.gw + "/v1", api_key=KEYS[route], max_retries=0)
    history: list[dict] = []

    def ask(text: str) -> tuple[int, int]:
        """One turn: the tokens it read from the cache and wrote to it."""
        history.append({"role": "user", "content": text})
        if api == "chat":
            answer = client.chat.completions.create(model=f"{route}-sonnet", max_tokens=50,
                                                    messages=[{"role": "system", "content": system(tag)}, *history])
            history.append({"role": "assistant", "content": answer.choices[0].message.content})
            details = answer.usage.prompt_tokens_details
        else:
            reply = client.responses.create(model=f"{route}-sonnet", max_output_tokens=50, instructions=system(tag),
                                            input=history)
            history.append({"role": "assistant", "content": reply.output_text})
            details = reply.usage.input_tokens_details
        return details.cached_tokens, details.cache_write_tokens

    ask(f"{contract(tag)}\n\nReview section 1.")
    stack.advance(REPLY_S)
    prefix = sum(ask(section_2(tag)))
    stack.advance(280)
    [upgrade] = stack.wait_refreshes(route, 1)
    answer = upgrade["cache_writes"].get("1h", 0)
    assert upgrade["cache_read"] == prefix and set(upgrade["cache_writes"]) == {"1h"} and 0 < answer <= 50
    stack.advance(20 * 60)
    read, _ = ask(f"And this one? {contract(tag + ', section 3')}")
    assert read == prefix + answer
    assert any(line.startswith("checkpoint: held") for line in stack.requests(route)[-1]["explanation"])
    assert metric(stack.metrics(), "prefixgate_keepalive_stops_total", route=route, reason="upgrade unread") == 0


def test_a_gpt_route_reads_each_turn_and_is_kept_through_its_30_minute_breakpoints(stack: Stack) -> None:
    """GPT-6.2 Sol writes cache at breakpoints that live 30 minutes (paid: 1.25x input). Its refresh is the
    conversation through its last breakpoint with one output token (Chat Completions has no pre-warm)."""
    client = openai.OpenAI(base_url=stack.gw + "/v1", api_key=KEYS["gpt"], max_retries=0)
    history = [{"role": "system", "content": system("gpt-1")}]

    def ask(text: str) -> openai.types.completion_usage.PromptTokensDetails:
        history.append({"role": "user", "content": text})
        answer = client.chat.completions.create(model="gpt-route", max_completion_tokens=50, messages=history)
        history.append({"role": "assistant", "content": answer.choices[0].message.content})
        return answer.usage.prompt_tokens_details

    first = ask(f"{contract('gpt-1')}\n\nReview section 1.")
    stack.advance(REPLY_S)
    back = ask(section_2("gpt-1"))
    assert back.cached_tokens == first.cache_write_tokens > 3000       # the reply reads the first turn
    prefix = back.cached_tokens + back.cache_write_tokens
    stack.advance(1775)         # 30 s before the 30-minute entry expires
    [refresh] = stack.wait_refreshes("gpt", 1)
    assert refresh["cache_read"] == prefix and refresh["cache_writes"] == {} and refresh["output"] <= 1
    assert Decimal(refresh["cost_usd"]) == (prefix * GPT_READ + refresh["uncached_input"] * GPT_INPUT
                                            + refresh["output"] * GPT_OUTPUT) / 1_000_000
    stack.advance(600)          # 40 minutes after the reply: past its own 30 minutes, within the refresh's
    assert ask("And section 3?").cached_tokens == prefix
    [credited] = [r for r in stack.requests("gpt") if r["keepalive_saved_usd"]]
    assert Decimal(credited["keepalive_saved_usd"]) == prefix * (GPT_WRITE_30M - GPT_READ) / 1_000_000


def test_a_caller_that_sends_the_answer_back_otherwise_gets_no_more_upgrades(stack: Stack) -> None:
    client, history, prefix = returning_session(stack, "edited", "edited-1")
    stack.advance(280)
    [upgrade] = stack.wait_refreshes("edited", 1)
    assert set(upgrade["cache_writes"]) == {"1h"}
    history[-1]["content"] += " (edited by the client)"       # not the answer the upgrade wrote
    stack.advance(600)
    after = turn(client, "edited", "edited-1", history, "And section 3?")
    assert after.usage.cache_read_input_tokens < prefix + upgrade["cache_writes"]["1h"]
    assert metric(stack.metrics(), "prefixgate_keepalive_stops_total", route="edited", reason="upgrade unread") == 1
    assert metric(stack.metrics(), "prefixgate_keepalive_tenants_without", route="edited", what="upgrade") == 1
    # The route's next session is kept by re-reading its prefix, not upgraded.
    _, _, second = returning_session(stack, "edited", "edited-2")
    stack.advance(280)
    refresh = stack.wait_refreshes("edited", 2)[-1]
    assert refresh["cache_read"] == second and refresh["cache_writes"] == {}


def test_the_dashboard_shows_bought_vs_saved_per_route(stack: Stack, browser) -> None:  # noqa: F811 (the fixture)
    refresh = stack.refreshes("agent")[0]
    [credited] = [r for r in stack.requests("agent") if r["keepalive_saved_usd"]]
    browser.get(stack.gw + "/dashboard")
    browser.find_element(By.NAME, "token").send_keys(ADMIN + Keys.ENTER)
    row = WebDriverWait(browser, 20).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, '#keepalive-body tr[data-route="agent"]'))[0]
    cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
    assert cells[:2] == ["agent", "1"]
    assert_reads_as(cells[2], Decimal(refresh["cost_usd"]))
    assert_reads_as(cells[3], Decimal(credited["keepalive_saved_usd"]))
    assert_reads_as(cells[4], Decimal(credited["keepalive_saved_usd"]) - Decimal(refresh["cost_usd"]))
    assert not browser.find_elements(By.CSS_SELECTOR, '#keepalive-body tr[data-route="plain"]')


def test_early_eviction_stops_refreshing_the_session(stack: Stack) -> None:
    _, _, prefix = returning_session(stack, "evict")
    httpx.post(stack.mock + "/_mock/evict").raise_for_status()    # the provider drops the cache before its TTL
    stack.advance(280)
    [refresh] = stack.wait_refreshes("evict", 1)
    assert refresh["cache_read"] == 0 and sum(refresh["cache_writes"].values()) == prefix
    stack.advance(280)          # the next refresh would have been due here
    stack.settle()
    assert len(stack.refreshes("evict")) == 1
    assert metric(stack.metrics(), "prefixgate_keepalive_stops_total", route="evict", reason="early eviction") == 1
    assert series(stack.metrics(), "prefixgate_keepalive_sessions", route="evict", level="conversation",
                  state="stopped") == [1.0]


def test_the_key_cap_stops_refreshes(stack: Stack) -> None:
    _, _, prefix = returning_session(stack, "capped")
    stack.advance(280)
    [first] = stack.wait_refreshes("capped", 1)
    assert Decimal(first["cost_usd"]) == prefix * READ / 1_000_000
    assert Decimal(first["cost_usd"]) <= Decimal("0.001") < 2 * Decimal(first["cost_usd"])
    stack.advance(270)          # the second refresh is due: it would pass the key's $0.001 a day
    stack.wait_stop("capped", "key cap")
    assert len(stack.refreshes("capped")) == 1


def test_a_route_where_nothing_repeats_gets_no_refresh(stack: Stack) -> None:
    client = stack.client("oneoff")
    for i in range(3):
        turn(client, "oneoff", f"oneoff-{i}", [], "Review section 1.")     # one-off prompts, never continued
        stack.settle()          # the session's refresh is weighed
        stack.advance(280)      # when it would be due
        stack.settle()
    assert stack.refreshes("oneoff") == []


def test_no_refresh_once_the_cache_has_expired(stack: Stack) -> None:
    """A refresh that comes too late would write the whole prefix again: it is not sent."""
    returning_session(stack, "late")
    stack.advance(400)          # past the entry's 5 minutes before the worker saw the refresh due
    stack.wait_stop("late", "expired")
    assert stack.refreshes("late") == []


def test_a_refresh_is_refused_once_the_keys_budget_is_spent(stack: Stack) -> None:
    returning_session(stack, "budgeted")
    spent = sum(Decimal(r["cost_usd"]) for r in stack.requests("budgeted"))
    assert spent >= Decimal("0.019")
    stack.advance(280)
    stack.wait_stop("budgeted", "budget")
    assert stack.refreshes("budgeted") == []


def test_on_an_open_gateway_each_callers_refresh_goes_with_its_own_key(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """No policy keys and no gateway key: each caller's own provider key goes upstream, its refreshes too. The
    mock keeps one cache per API key, so a refresh sent with anyone else's key would read nothing. Caller b streams
    (a refresh never does). The mock and the gateway run in this process, each under its own uvicorn server (the
    keyed stack above runs them as separate processes)."""
    with open_gateway(tmp_path, monkeypatch) as open_stack:
        callers = {key: (anthropic.Anthropic(base_url=open_stack.gw, api_key=key, max_retries=0), [])
                   for key in ("sk-ant-caller-a-0123456789", "sk-ant-caller-b-0123456789")}
        streams = dict(zip(callers, (False, True), strict=True))
        for key, (client, history) in callers.items():
            turn(client, "open", key, history, "Review section 1.", streams[key])
        open_stack.advance(REPLY_S)
        prefixes = [entry(turn(client, "open", key, history, section_2(key), streams[key]))
                    for key, (client, history) in callers.items()]
        open_stack.advance(280)
        refreshes = open_stack.wait_refreshes("open", 2)
        assert sorted(r["cache_read"] for r in refreshes) == sorted(prefixes)
        # Each is an upgrade through its caller's answer, whole (a) or streamed (b): nothing is written again
        # but the answer, for an hour.
        # (An answer of at most 50 output tokens is a few more as input: its text is counted again, with its turn.)
        assert all(set(r["cache_writes"]) == {"1h"} and 0 < r["cache_writes"]["1h"] <= 64 for r in refreshes)


def test_on_an_open_gateway_callers_with_the_same_conversation_keep_sessions_of_their_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two callers of one app send the very same conversation, each with its own provider key (and so its own
    cache, in its own account). One caller's request must not continue the other's session: that would stop the
    other's refreshes, and credit one caller with what the other's refreshes kept."""
    with open_gateway(tmp_path, monkeypatch) as open_stack:
        callers = [(anthropic.Anthropic(base_url=open_stack.gw, api_key=key, max_retries=0), [])
                   for key in ("sk-ant-caller-a-0123456789", "sk-ant-caller-b-0123456789")]
        for client, history in callers:
            turn(client, "open", "same app", history, "Review section 1.")
        open_stack.advance(REPLY_S)
        prefixes = [entry(turn(client, "open", "same app", history, section_2("same app"))) for client, history in callers]
        assert callers[0][1] == callers[1][1]                   # the very same conversation
        open_stack.advance(280)
        refreshes = open_stack.wait_refreshes("open", 2)
        assert [r["cache_read"] for r in refreshes] == prefixes  # each kept with its own key, in its own cache
        open_stack.settle()
        assert len(open_stack.refreshes("open")) == 2


@contextmanager
def open_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 upstream: Callable[[Any], Any] = lambda app: app) -> Iterator[Stack]:
    """An open gateway (no keys: each caller's own provider key goes upstream) with route "open", keep-alive on,
    before the mock (behind `upstream`, an ASGI wrapper), both in this process under their own uvicorn servers."""
    clock, ledger = tmp_path / "clock", tmp_path / "ledger.sqlite"
    clock.write_text("0")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    mock_app = create_mock(MockContext(simulator=Simulator(entry_visible_after_s=0.0), clock=OffsetClock(str(clock))))
    with ServerThread(upstream(mock_app)) as mock:
        settings = Settings(anthropic_base_url=mock.url, ledger_path=str(ledger), clock_offset_file=str(clock))
        route = Policy.from_dict({"routes": [{
            "name": "open", "models": ["open-sonnet"], "targets": [{"upstream": "anthropic", "model": MODEL}],
            "keepalive": {"mode": "on", "route_usd": 1, "key_usd": 1}}]}, builtin_upstreams(settings))
        app = create_app(settings, policy=route)
        with ServerThread(app) as gw:
            stack = Stack(gw.url, mock.url, clock, ledger)
            stack.app = app
            yield stack


def test_a_restart_forgives_no_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without Redis the caps' counters live in memory: a restarted gateway starts them from the ledger, so the
    refresh a first gateway bought still counts against the key's cap in the second."""
    clock, ledger = tmp_path / "clock", tmp_path / "ledger.sqlite"
    clock.write_text("0")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-gateway-own-key-000")
    monkeypatch.setenv("KA_KEY_CAPPED", KEYS["capped"])
    mock_app = create_mock(MockContext(simulator=Simulator(entry_visible_after_s=0.0), clock=OffsetClock(str(clock))))
    with ServerThread(mock_app) as mock:
        settings = Settings(anthropic_base_url=mock.url, ledger_path=str(ledger), clock_offset_file=str(clock))
        capped = Policy.from_dict({
            "routes": [{"name": "capped", "models": ["capped-sonnet"], "targets": [{"upstream": "anthropic", "model": MODEL}],
                        "keepalive": {"mode": "on", "route_usd": 1, "key_usd": 0.001, "period": "day", "upgrade": False}}],
            "keys": [{"name": "capped", "key_env": "KA_KEY_CAPPED", "tenant": "capped"}], "timezone": midday_zone()},
            builtin_upstreams(settings))
        for life in (1, 2):
            with ServerThread(create_app(settings, policy=capped)) as gw:
                stack = Stack(gw.url, mock.url, clock, ledger)
                stack.offset = float(clock.read_text())
                returning_session(stack, "capped", f"capped-life-{life}")
                stack.advance(280)
                if life == 1:
                    stack.wait_refreshes("capped", 1)
                else:
                    stack.wait_stop("capped", "key cap")
                    assert len(stack.refreshes("capped")) == 1     # the second would pass $0.001 a day


def test_a_conversations_re_read_restarts_its_static_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refresh of a conversation re-sends its system prompt's mark too: that hit restarts the static prefix's
    entry, so the static prefix's own keep-alive counts from it and does not re-read it on the side. (The upgrade is
    refused here, so the conversation is kept by re-reading.)"""
    with open_gateway(tmp_path, monkeypatch, refusing_upgrades) as open_stack:
        client, history = anthropic.Anthropic(base_url=open_stack.gw, api_key="sk-ant-caller-0123456789", max_retries=0), []
        asked = {"model": "open-sonnet", "max_tokens": 50, "system": contract("open system prompt")}
        for text in ("Review section 1.", section_2("static-touch")):
            history.append({"role": "user", "content": text})
            answer = client.messages.create(**asked, messages=history)
            history.append({"role": "assistant", "content": answer.content[0].text})
            open_stack.advance(REPLY_S)
        open_stack.advance(280 - REPLY_S)
        refused, kept = open_stack.wait_refreshes("open", 2)
        assert kept["status"] == 200 and kept["cache_writes"] == {}
        [static] = open_stack.app.state.proxy.keepalive.statics.values()
        assert static.touched - static.last_request >= 270       # restarted by the re-read, not by a request
        assert all("static prefix" not in r["explanation"][0] for r in open_stack.refreshes("open"))


def test_each_callers_own_key_keeps_its_own_copy_of_the_system_prompt(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """On an open gateway each caller's own provider key has its own cache (the mock, like the providers, keeps one
    per key): the same system prompt is two entries, and a quiet route keeps each with its own key's refresh."""
    with open_gateway(tmp_path, monkeypatch) as open_stack:
        prompt = contract("shared system prompt")
        clients = [anthropic.Anthropic(base_url=open_stack.gw, api_key=f"sk-ant-caller-{c}-0123456789", max_retries=0)
                   for c in "ab"]
        for gap, question in ((0, "Is clause 3 fair?"), (20 * 60, "Who signs it?"), (30 * 60, "When does it end?")):
            open_stack.advance(gap)
            read = [client.messages.create(model="open-sonnet", max_tokens=50, system=prompt,
                                           messages=[{"role": "user", "content": question}]).usage.cache_read_input_tokens
                    for client in clients]
        open_stack.advance(3600 - 25)
        refreshes = open_stack.wait_refreshes("open", 2)
        assert len(refreshes) == 2 and all("refresh of the static prefix" in r["explanation"][0] for r in refreshes)
        assert [r["cache_read"] for r in refreshes] == read == [read[0]] * 2 and read[0] > 3000


@contextmanager
def keepalive_replicas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str, route: str,
                       keepalive: dict) -> Iterator[tuple[Stack, Stack]]:
    """Two gateways (A, B: replicas, each with its own ledger) on one real Redis before one mock, with route `route`
    (model `{route}-sonnet`, caller key `KEYS[route]` of tenant `route`) kept alive by `keepalive`."""
    clock = tmp_path / "clock"
    clock.write_text("0")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-gateway-own-key-000")
    monkeypatch.setenv(f"KA_KEY_{route.upper()}", KEYS[route])
    mock_app = create_mock(MockContext(simulator=Simulator(entry_visible_after_s=0.0), clock=OffsetClock(str(clock))))
    with ServerThread(mock_app) as mock:
        def replica(name: str) -> tuple[Any, Path]:
            ledger = tmp_path / f"{name}.sqlite"
            settings = Settings(anthropic_base_url=mock.url, ledger_path=str(ledger), clock_offset_file=str(clock),
                                redis_url=redis_url)
            policy = Policy.from_dict({
                "routes": [{"name": route, "models": [f"{route}-sonnet"], "targets": [{"upstream": "anthropic", "model": MODEL}],
                            "keepalive": keepalive}],
                "keys": [{"name": route, "key_env": f"KA_KEY_{route.upper()}", "tenant": route}],
                "timezone": midday_zone()}, builtin_upstreams(settings))
            return create_app(settings, policy=policy), ledger

        (app_a, ledger_a), (app_b, ledger_b) = replica("a"), replica("b")
        with ServerThread(app_a) as gw_a, ServerThread(app_b) as gw_b:
            a, b = Stack(gw_a.url, mock.url, clock, ledger_a), Stack(gw_b.url, mock.url, clock, ledger_b)
            a.app, b.app = app_a, app_b
            yield a, b


def test_gateways_sharing_redis_share_the_caps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str) -> None:
    """Two gateways (replicas, each with its own ledger) on one real Redis count the same key's keep-alive spend:
    the cap with room for one refresh lets the first replica's through and stops the second's. Each refresh is
    added to the counters before it is sent, in one atomic step, so two replicas never both pass a check."""
    with keepalive_replicas(tmp_path, monkeypatch, redis_url, "capped", {
            "mode": "on", "route_usd": 1, "key_usd": 0.001, "period": "day", "upgrade": False}) as (a, b):
        returning_session(a, "capped", "capped-on-a")
        a.advance(280)
        a.wait_refreshes("capped", 1)
        b.offset = a.offset
        returning_session(b, "capped", "capped-on-b")
        b.advance(280)
        b.wait_stop("capped", "key cap")
        assert b.refreshes("capped") == []


def open_returning(open_stack: Stack, tag: str) -> tuple[anthropic.Anthropic, list[dict], int]:
    """`returning_session` on the open gateway's route "open", with a caller's own key."""
    client, history = anthropic.Anthropic(base_url=open_stack.gw, api_key="sk-ant-caller-0123456789", max_retries=0), []
    turn(client, "open", tag, history, "Review section 1.")
    open_stack.advance(REPLY_S)
    return client, history, entry(turn(client, "open", tag, history, section_2(tag)))


def test_a_refused_pre_warm_falls_back_to_the_least_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An upstream that takes no `max_tokens: 0` (a platform or API version without pre-warm): keep-alive asks for
    one token instead, at once for the session at hand and from then on for the route's sessions."""
    with open_gateway(tmp_path, monkeypatch, refusing_prewarms) as open_stack:
        client, history, prefix = open_returning(open_stack, "no-prewarm")
        open_stack.advance(280)
        # The upgrade is a pre-warm too: refused, the session is re-read; that pre-warm is refused, then one token.
        upgrade, prewarm, kept = open_stack.wait_refreshes("open", 3)
        assert [upgrade["status"], prewarm["status"], kept["status"]] == [400, 400, 200]
        assert kept["cache_read"] == prefix and kept["cache_writes"] == {} and kept["output"] == 1
        assert Decimal(kept["cost_usd"]) == (prefix * READ + kept["uncached_input"] * INPUT + OUTPUT) / 1_000_000
        assert metric(open_stack.metrics(), "prefixgate_keepalive_stops_total", route="open", reason="pre-warm refused") == 1
        assert metric(open_stack.metrics(), "prefixgate_keepalive_tenants_without", route="open", what="prewarm") == 1
        open_stack.advance(170)     # past the request's own 5 minutes, within the refresh's
        assert turn(client, "open", "no-prewarm", history, "And section 3?").usage.cache_read_input_tokens == prefix
        # The route's next session asks for one token from its first refresh.
        open_returning(open_stack, "no-prewarm-2")
        open_stack.advance(280)
        assert open_stack.wait_refreshes("open", 4)[-1]["status"] == 200


def refusing_prewarms(app):
    """`app` (the mock) behind a provider that takes no pre-warm: `max_tokens` below 1 is a 400."""
    return refusing(app, lambda sent: sent.get("max_tokens") == 0)


def refusing_upgrades(app):
    """`app` (the mock) behind a provider that refuses a pre-warm ending on a filler turn after an answer, as a
    model that takes no such request would (400, invalid_request_error)."""
    def upgrade(sent: dict) -> bool:
        messages = sent.get("messages") or []
        return (sent.get("max_tokens") == 0 and len(messages) > 1 and messages[-1] == {"role": "user", "content": "."}
                and messages[-2]["role"] == "assistant")
    return refusing(app, upgrade)


def refusing(app, refused: Callable[[dict], bool]):
    """`app` (the mock) behind a provider that answers the Messages requests `refused` picks with a 400."""
    async def wrapped(scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/messages":
            await app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        if refused(json.loads(body or b"{}")):
            answer = JSONResponse({"type": "error", "error": {"type": "invalid_request_error",
                                                              "message": "this request shape is not supported"}}, 400)
            await answer(scope, receive, send)
            return

        async def again() -> dict:
            return {"type": "http.request", "body": body, "more_body": False}
        await app(scope, again, send)
    return wrapped


def test_keepalive_weighs_a_session_by_how_long_it_has_gone_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session's gap model is its route's, for the idle times that began after as many turns (in doubling steps,
    as in trace mode): on a route whose conversations come back from a break after their first turn and never
    after their second, a first turn's entry is kept and a second turn's is left to expire."""
    with open_gateway(tmp_path, monkeypatch) as open_stack:
        # The route's history: 1,000 earlier conversations of this caller, each back 8 minutes after its first turn
        # and never after its second (on an open gateway a caller's party is its own provider key, hashed).
        key = "sk-ant-caller-0123456789"
        party = "credential:" + hashlib.sha256(key.encode()).hexdigest()[:16]
        model, start = open_stack.app.state.proxy.keepalive.gaps.model(f"{party}/open", ""), time.time() - 3 * 86400
        for i in range(1000):
            model.observe(f"earlier-{i}", start + i, context="turn1")
            model.observe(f"earlier-{i}", start + i + 480, context="turn2")
        client = anthropic.Anthropic(base_url=open_stack.gw, api_key=key, max_retries=0)
        turn(client, "open", "one-turn", [], "Review section 1.")
        open_stack.advance(280)
        assert len(open_stack.wait_refreshes("open", 1)) == 1           # after one turn: kept through the break
        open_stack.advance(2 * 3600)      # that conversation is over
        history: list[dict] = []
        turn(client, "open", "two-turns", history, "Review section 1.")
        open_stack.advance(REPLY_S)
        turn(client, "open", "two-turns", history, section_2("two-turns"))
        open_stack.advance(280)
        open_stack.settle()
        assert len(open_stack.refreshes("open")) == 1                   # after two: left to expire


def test_a_refused_upgrade_falls_back_to_re_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_gateway(tmp_path, monkeypatch, refusing_upgrades) as open_stack:
        _, _, prefix = open_returning(open_stack, "refused")
        open_stack.advance(280)
        refused, kept = open_stack.wait_refreshes("open", 2)
        assert refused["status"] == 400 and "upgrade to 1h" in refused["explanation"][0]
        assert kept["status"] == 200 and kept["cache_read"] == prefix and kept["cache_writes"] == {}
        assert metric(open_stack.metrics(), "prefixgate_keepalive_stops_total", route="open",
                      reason="upgrade refused") == 1

