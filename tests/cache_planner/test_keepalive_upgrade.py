"""Keep-alive's upgrade: while a chat's user is away past the 5-minute TTL, a pre-warm writes the reply they got
after the conversation with a 1-hour mark, so their next turn reads the whole prefix instead of writing it again.

Expected values come from Anthropic's documented rules (provider-caching.md): a hit restarts an entry's TTL but
never lengthens it; a write is billed only past the longest hit; a 1h write is 2x input, a read 0.05x on Sonnet
5.5 ($2 input, $4 1h write, $0.10 read per MTok); a request must not put a shorter mark before a longer one.
"""

from __future__ import annotations

import json

from prefixgate.cache_planner.keepalive import refresh_body, reply_content, upgrade_body
from prefixgate.cache_planner.trace import plan_trace
from prefixgate.providers.trace import TraceRecord, parse_record, record_json
from prefixgate.simulation.replay import passthrough, replay
from prefixgate.simulation.simulator import Simulator

MODEL = "claude-sonnet-5-5"
SYSTEM = "You are a patient tutor. " + " ".join(f"Rule {i}: explain each step before the next." for i in range(150))
FIVE, HOUR = {"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}
REPLY = "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen. " * 12


def planned(marks: int = 1) -> dict:
    """A planned chat request: system marked 1h, the user's turns marked 5m (the last `marks` of them)."""
    turns = ["Explain photosynthesis. " * 20, "And respiration?", "Compare them.", "Which came first?"][-max(marks, 1):]
    messages: list = []
    for i, text in enumerate(turns):
        if i:
            messages.append({"role": "assistant", "content": "Here it is. " * 30})
        messages.append({"role": "user", "content": [{"type": "text", "text": text, "cache_control": FIVE}]})
    return {"model": MODEL, "max_tokens": 1024, "stream": True,
            "system": [{"type": "text", "text": SYSTEM, "cache_control": HOUR}], "messages": messages}


def message(text: str = REPLY) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}


def test_the_upgrade_writes_the_reply_long_after_the_conversation_and_ends_on_a_filler_turn():
    body = planned()
    up = upgrade_body("anthropic", body, reply_content("anthropic", message()), "1h")
    assert up is not None and up.prewarm and up.body["max_tokens"] == 0 and "stream" not in up.body
    *kept, answer, filler = up.body["messages"]
    assert kept[-1]["content"][-1]["cache_control"] == HOUR   # never a shorter mark before the longer one
    assert answer == {"role": "assistant", "content": [{"type": "text", "text": REPLY, "cache_control": HOUR}]}
    assert filler == {"role": "user", "content": "."}
    assert all("cache_control" not in block for block in up.body["system"])  # the static entry is left alone
    assert body["messages"][-1]["content"][-1]["cache_control"] == FIVE      # the caller's body is untouched


def test_a_hit_never_lengthens_an_entry_but_the_upgrade_carries_the_session_through_a_break():
    sim = Simulator(entry_visible_after_s=0)
    body = planned()
    sim.respond("anthropic", body, now=0)
    returning = {**body, "messages": [*body["messages"], {"role": "assistant", "content": REPLY},
                                      {"role": "user", "content": [{"type": "text", "text": "Thanks, and respiration?",
                                                                    "cache_control": FIVE}]}]}
    # Re-marking the same prefix 1h at 270 s is a hit: the entry still dies 5 minutes later.
    same = json.loads(json.dumps(body).replace('"ephemeral"}', '"ephemeral", "ttl": "1h"}'))
    alone = Simulator(entry_visible_after_s=0)
    alone.respond("anthropic", body, now=0)
    assert alone.respond("anthropic", refresh_body("anthropic", same).body, now=270).usage.cache_writes == {}
    lost = alone.respond("anthropic", returning, now=1800).usage
    conversation = sim.respond("anthropic", refresh_body("anthropic", body).body, now=1).usage.cache_read
    # The upgrade at 270 s reads the conversation and writes only the reply, for an hour.
    up = sim.respond("anthropic", upgrade_body("anthropic", body, reply_content("anthropic", message())).body, now=270).usage
    assert up.cache_read == conversation and set(up.cache_writes) == {"1h"} and up.uncached_input > 0
    # Back after 30 minutes: everything through the reply is read; only the new turn is written.
    back = sim.respond("anthropic", returning, now=1800).usage
    assert back.cache_read == conversation + up.cache_writes["1h"]
    assert lost.cache_read < back.cache_read and sum(lost.cache_writes.values()) > sum(back.cache_writes.values())


def test_what_an_upgrade_cannot_resend():
    assert reply_content("anthropic", message()) == [{"type": "text", "text": REPLY}]
    # A tool call needs its result next; thinking changes what is cached; other providers have no pre-warm.
    assert reply_content("anthropic", {"type": "message", "content": [{"type": "tool_use", "id": "t", "name": "x",
                                                                        "input": {}}]}) is None
    assert reply_content("openai", message()) is None
    assert reply_content("anthropic", {"type": "error", "error": {"type": "overloaded_error"}}) is None
    reply = reply_content("anthropic", message())
    assert upgrade_body("anthropic", {**planned(), "thinking": {"type": "enabled", "budget_tokens": 2048}}, reply) is None
    unmarked = {**planned(), "messages": [{"role": "user", "content": "Hello"}]}
    assert upgrade_body("anthropic", unmarked, reply) is None
    # Marked short of the conversation's end: the reply would not follow what the next turn sends.
    early = planned(marks=2)
    early["messages"][-1]["content"][0].pop("cache_control")
    assert upgrade_body("anthropic", early, reply) is None


def test_at_the_four_mark_limit_the_last_conversation_mark_gives_way():
    body = planned(marks=4)
    up = upgrade_body("anthropic", body, reply_content("anthropic", message())).body
    marks = [(i, b["cache_control"]) for i, m in enumerate(up["messages"]) if isinstance(m["content"], list)
             for b in m["content"] if "cache_control" in b]
    # Turns 0, 2 and 4 keep theirs (1h), the last user turn's (6) gives way to the reply's (7).
    assert marks == [(0, HOUR), (2, HOUR), (4, HOUR), (7, HOUR)]
    Simulator().respond("anthropic", up, now=0)  # accepted: at most 4 marks, none shorter before a longer one


def test_a_refresh_cut_after_a_marked_reply_still_ends_on_a_user_turn():
    body = planned()
    body["messages"] += [{"role": "assistant", "content": [{"type": "text", "text": REPLY, "cache_control": FIVE}]},
                         {"role": "user", "content": "Go on."}]
    assert refresh_body("anthropic", body).body["messages"][-1] == {"role": "user", "content": "."}


def chat(sessions: int = 8, break_after: int = 2) -> list[TraceRecord]:
    """Conversations of five turns a minute apart, each with a 20-minute break after its second turn; every
    record carries the reply the gateway relayed."""
    out = []
    for s in range(sessions):
        t, messages = s * 4000.0, []
        for turn in range(5):
            messages.append({"role": "user", "content": f"Session {s}, question {turn}: " + "why is the sky blue? " * 30})
            reply = f"Answer {s}.{turn}: " + "Rayleigh scattering favours short wavelengths. " * 20
            out.append(TraceRecord(line=0, t=t, provider="anthropic", model=MODEL, route="tutor", tenant="acme",
                                   output_tokens=200, response=message(reply),
                                   body={"model": MODEL, "max_tokens": 1024, "system": SYSTEM, "messages": list(messages)}))
            messages.append({"role": "assistant", "content": reply})
            t += 1200.0 if turn == break_after else 60.0
    return out


def test_plan_keepalive_upgrades_sessions_through_their_breaks_and_pays():
    records = chat()
    lines = list(plan_trace(records, keepalive=True))
    upgrades = [line for line in lines if line.get("keepalive") and "upgrade" in line["plan"][0]]
    assert len(upgrades) >= 4, "once the route has seen sessions come back after breaks, upgrades pay"
    # The session's later requests hold the upgrade's entry (`held`): marked again, it outlives the turns after it.
    assert any(p.startswith("checkpoint: held") for line in lines if not line.get("keepalive") for p in line["plan"])
    assert all("response" not in line for line in lines if line.get("keepalive"))
    kept = replay([parse_record(json.dumps(line)) for line in lines], passthrough)
    plain = replay([parse_record(json.dumps(line)) for line in plan_trace(records)], passthrough)
    without = replay([parse_record(json.dumps(record_json(r))) for r in records], passthrough)
    assert not kept.errors and kept.total.cost.total < plain.total.cost.total < without.total.cost.total
    # Without replies in the trace there is nothing to upgrade with.
    bare = [parse_record(json.dumps({k: v for k, v in record_json(r).items() if k != "response"})) for r in records]
    assert not any("upgrade" in line["plan"][0] for line in plan_trace(bare, keepalive=True) if line.get("keepalive"))


def test_the_trace_format_carries_a_response_and_refuses_one_that_is_not_an_object():
    line = json.dumps({"t": 0, "provider": "anthropic", "model": MODEL, "body": {}, "response": message()})
    assert parse_record(line).response == message()
    bad = json.dumps({"t": 0, "provider": "anthropic", "model": MODEL, "body": {}, "response": "hi"})
    try:
        parse_record(bad)
    except ValueError as e:
        assert "'response' must be" in str(e)
    else:
        raise AssertionError("a response that is not an object was accepted")


def test_refreshes_follow_what_the_cache_holds_not_what_the_latest_mark_asks_for():
    from prefixgate.cache_planner.refresh_plan import RefreshPlanner
    from prefixgate.dialects import anthropic as an

    def sent(t: float, ttl: dict, question: str, planner: RefreshPlanner) -> None:
        body = {"model": MODEL, "max_tokens": 100, "system": [{"type": "text", "text": SYSTEM, "cache_control": ttl}],
                "messages": [{"role": "user", "content": question}]}
        planner.after(TraceRecord(line=0, t=t, provider="anthropic", model=MODEL, body=body), an.parse_request(body), body)

    planner = RefreshPlanner()
    sent(0, FIVE, "First.", planner)
    sent(100, HOUR, "Second.", planner)   # a hit: the entry is still the 5-minute one
    (static,) = planner.entries.values()
    assert (static.ttl, static.expires) == ("5m", 400.0)
    # Refreshing would keep it 5 minutes for good; it is left to lapse so the next request writes it for an hour.
    assert planner.due(float("inf")) == []
    later = RefreshPlanner()
    sent(0, FIVE, "First.", later)
    sent(500, HOUR, "Second.", later)     # after it lapsed: written anew with the 1h mark
    (static,) = later.entries.values()
    assert (static.ttl, static.expires) == ("1h", 4100.0)


def test_a_streamed_answer_is_kept_only_when_it_is_plain_text():
    from prefixgate.dialects.anthropic import ReplyBlocks

    def streamed(*blocks: tuple[str, list[dict]]) -> list | None:
        reply = ReplyBlocks()
        reply.feed({"type": "message_start", "message": {"content": []}})
        for index, (kind, deltas) in enumerate(blocks):
            reply.feed({"type": "content_block_start", "index": index, "content_block": {"type": kind, "text": ""}})
            for delta in deltas:
                reply.feed({"type": "content_block_delta", "index": index, "delta": delta})
            reply.feed({"type": "content_block_stop", "index": index})
        reply.feed({"type": "message_stop"})
        return reply.content()

    text = [{"type": "text_delta", "text": "Blue light "}, {"type": "text_delta", "text": "scatters most."}]
    assert streamed(("text", text)) == [{"type": "text", "text": "Blue light scatters most."}]
    assert streamed(("text", text), ("text", text[:1])) == [{"type": "text", "text": "Blue light scatters most."},
                                                            {"type": "text", "text": "Blue light "}]
    assert streamed(("thinking", [{"type": "thinking_delta", "thinking": "hmm"}]), ("text", text)) is None
    assert streamed(("text", [*text, {"type": "citations_delta", "citation": {"cited_text": "x"}}])) is None
    assert streamed(("tool_use", [{"type": "input_json_delta", "partial_json": "{}"}])) is None


class _Law:
    """A session's next-turn law: back within 5 minutes with 0.6, within the hour with 0.9, else never."""

    def p_within(self, seconds: float) -> float:
        return 0.6 if seconds <= 300 else 0.9


def test_the_write_ttl_prices_an_upgrade_as_reading_the_static_prefix_too():
    # An upgrade re-sends and reads the whole prompt, the static prefix's 6,000 tokens included, though only the
    # conversation's 2,000 are at stake. By hand, on Sonnet 5.5 (read 0.05x, 5m write 1.25x, 1h write 2x): marking
    # the turn's 200 new tokens 1h costs 200 x 0.75 = 150 more now; marking them 5m costs, with p = 0.3 of a
    # return between 5 minutes and the hour, one upgrade: 0.05 x 8,000 read + 200 x (2 + 0.05 - 1.25) on the reply
    # = 560, so 0.3 x 560 = 168 more. 1h is cheaper. Priced on the conversation alone (0.05 x 2,000 + 160 = 260,
    # 0.3 x 260 = 78), 5m would look cheaper.
    from prefixgate.cache_planner.economics import choose_growing_ttl
    from prefixgate.providers.pricing import resolve_model

    price = resolve_model("anthropic", MODEL).price.price
    assert [float(p) for p in (price.input, price.cache_read, price.write_price("1h"))] == [2, 0.1, 4]  # per MTok, published
    ttls = ("5m", "1h")
    assert choose_growing_ttl(_Law(), price, ttls, 1800, 200, keepalive=True, upgrade=True, base=6000).ttl == "1h"
    assert choose_growing_ttl(_Law(), price, ttls, 1800, 200, keepalive=True, upgrade=True, base=0).ttl == "5m"


def test_a_keepalive_route_writes_its_static_prefix_long_from_the_first_request():
    # A hit restarts an entry's TTL but never lengthens it, so the static prefix keeps its first write's TTL for as
    # long as requests hit it. On a route whose operator turned keep-alive on, the first write takes the longest
    # TTL; without keep-alive the reuse prior (a new route as likely to repeat as not) keeps it at 5 minutes.
    from prefixgate.cache_planner.plan import plan
    from prefixgate.cache_planner.stability import PlannerState
    from prefixgate.cache_planner.target import Target
    from prefixgate.dialects import request_dialect

    body = {"model": MODEL, "max_tokens": 256, "system": SYSTEM, "messages": [{"role": "user", "content": "Hi."}]}

    def static_ttl(keepalive: bool) -> str | None:
        conv = request_dialect("anthropic", body).parse_request(body, model=MODEL)
        planned = plan(conv, Target("anthropic", MODEL), PlannerState(), route="tutor", now=0.0, keepalive=keepalive)
        system = next(seg for seg in planned.conversation.segments if seg.role == "system")
        mark = system.blocks[-1].checkpoint
        return None if mark is None else mark.ttl or "5m"

    assert static_ttl(keepalive=True) == "1h"
    assert static_ttl(keepalive=False) == "5m"
