"""Holding an hour-long conversation entry (`cache_planner.held`): a session's later requests mark it again.

Expected values come from Anthropic's documented rules (provider-caching.md): a breakpoint finds an entry at its
own position or within the 20 blocks before it; a hit restarts the entry's TTL and writes nothing; an entry lives
its TTL from its last hit."""

from __future__ import annotations

from prefixgate.cache_planner.held import HeldEntries
from prefixgate.cache_planner.plan import plan
from prefixgate.cache_planner.stability import PlannerState
from prefixgate.cache_planner.target import Target
from prefixgate.dialects import request_dialect
from prefixgate.simulation.simulator import Simulator

MODEL = "claude-sonnet-5-5"
SYSTEM = "You are a patient tutor. " + " ".join(f"Rule {i}: explain each step before the next." for i in range(150))
HOUR, FIVE = {"type": "ephemeral", "ttl": "1h"}, {"type": "ephemeral"}
ANSWER = "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen. " * 12


def conversation(turns: int, hold: bool) -> dict:
    """A chat whose second message is the answer an upgrade wrote for an hour; `turns` later exchanges follow,
    the last user turn marked 5m, and (`hold`) the answer marked 1h again."""
    answer: dict = {"type": "text", "text": ANSWER, **({"cache_control": HOUR} if hold else {})}
    messages: list = [{"role": "user", "content": "Explain photosynthesis. " * 20},
                      {"role": "assistant", "content": [answer]}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Question {i}: and then what happens to the sugar?"})
        messages.append({"role": "assistant", "content": f"Answer {i}: it is stored as starch, mostly. " * 4})
    messages.append({"role": "user", "content": [{"type": "text", "text": "Thanks. One more?", "cache_control": FIVE}]})
    return {"model": MODEL, "max_tokens": 256, "system": [{"type": "text", "text": SYSTEM, "cache_control": HOUR}],
            "messages": messages}


def test_an_hour_long_entry_marked_by_later_turns_outlives_them():
    # The answer's 1h entry is written at 0. Twenty turns follow 3 minutes apart (60 minutes: past its hour from
    # the write) and push it past the 20-block lookback; then the user is away 20 minutes.
    def after_the_break(hold: bool) -> int:
        sim = Simulator(entry_visible_after_s=0)
        first = conversation(0, hold=True)
        through_answer = sim.respond("anthropic", first, now=0).usage.cache_writes["1h"]  # system through the answer
        for turn in range(1, 21):
            sim.respond("anthropic", conversation(turn, hold), now=turn * 180)
        back = sim.respond("anthropic", conversation(21, hold), now=20 * 180 + 1200).usage
        return back.cache_read - through_answer

    assert after_the_break(hold=True) == 0      # read through the answer: only the turns after it are written
    assert after_the_break(hold=False) < 0      # the answer's entry lapsed: only the system prompt is read


def test_the_latest_live_entry_is_held():
    held = HeldEntries()
    held.note("a", "1h", expires=100.0)
    held.note("c", "1h", expires=50.0)
    keys = ["s", "a", "b", "c", "end"]
    assert held.latest(keys, 1, 4, now=10.0) == (3, "1h")
    assert held.latest(keys, 1, 4, now=60.0) == (1, "1h")       # "c" has lapsed
    assert held.latest(keys, 1, 3, now=10.0) == (1, "1h")       # only before the conversation's end
    assert held.latest(keys, 1, 4, now=100.0) is None
    assert HeldEntries.from_list(held.to_list()) == held
    held.note("d", "1h", expires=3700.0)                        # noted at 100: "c" and "a" had lapsed by then
    assert list(held.entries) == ["d"]


def _planned(body: dict, state: PlannerState, now: float):
    conv = request_dialect("anthropic", body).parse_request(body, model=MODEL)
    return plan(conv, Target("anthropic", MODEL), state, route="tutor", now=now, keepalive=True, upgrade=True)


def test_the_planner_marks_the_sessions_held_entry_again():
    state = PlannerState()
    body = conversation(3, hold=False)
    for block in body["messages"][-1]["content"]:
        block.pop("cache_control")
    body["system"] = SYSTEM
    conv = request_dialect("anthropic", body).parse_request(body, model=MODEL)
    flat = conv.blocks()
    answer = next(i for i, b in enumerate(flat) if b.text == ANSWER)
    state.route("tutor").held.note(conv.prefix_keys()[answer], "1h", expires=4000.0)
    planned = _planned(body, state, now=600.0)
    marks = {i: b.checkpoint.ttl for i, b in enumerate(planned.conversation.blocks()) if b.checkpoint is not None}
    assert marks.get(answer) == "1h" and any("checkpoint: held" in line for line in planned.explanation)
    # Once it has lapsed, it is not marked (a mark there would write the prefix through it again).
    later = _planned(body, state, now=9000.0)
    assert all(b.checkpoint is None for i, b in enumerate(later.conversation.blocks()) if i == answer)


def test_an_entry_written_again_under_its_key_is_refreshed_at_its_own_expiry():
    # A held entry is written again under the same key by each turn that marks it. Its refresh is due 30 s before
    # its own expiry (1000 + 3600 - 30), never at the replaced entry's (0 + 3600 - 30).
    from prefixgate.cache_planner.refresh_plan import Entry, RefreshPlanner

    planner, asked = RefreshPlanner(), []
    planner._decide = lambda entry, at: asked.append(at)   # type: ignore[method-assign]
    for now in (0.0, 1000.0):
        entry = planner.entries["k"] = Entry("k", "conversation", 0, None, {}, 4000, "1h", now, now)  # type: ignore[arg-type]
        planner._touch(entry, now, 3600.0)
    planner.due(4000.0)
    assert asked == []
    planner.due(float("inf"))
    assert asked == [4570.0]


def test_a_held_entry_is_refreshed_only_if_the_longer_entry_holding_it_is_not():
    # A session's end entry holds its held entry (its requests mark both), and both expire at 4000. A refresh of
    # the end reads the held entry too: the held one is decided after it, and only if the end was let go.
    from prefixgate.cache_planner.refresh_plan import Entry, RefreshPlanner

    def run(end_pays: bool) -> list[str]:
        planner, asked = RefreshPlanner(), []
        held = planner.entries["held"] = Entry("held", "conversation", 3, None, {}, 3000, "1h", 400.0, 400.0)  # type: ignore[arg-type]
        end = planner.entries["end"] = Entry("end", "conversation", 9, None, {}, 4000, "1h", 400.0, 400.0,  # type: ignore[arg-type]
                                             holds=("held",))
        for entry in (held, end):
            planner._touch(entry, 400.0, 3600.0)

        def decide(entry: Entry, at: float) -> dict | None:
            asked.append(f"{entry.key}@{at:.0f}")
            if entry is end and end_pays and at < 4000:
                for kept in (end, held):             # what the real refresh does: it reads both
                    planner._touch(kept, at, 3600.0)
                return {"t": at}
            return None

        planner._decide = decide  # type: ignore[method-assign]
        planner.due(float("inf"))
        return asked

    # The end's refresh at 3970 read the held entry: it is not asked then, only when both are due again.
    assert run(end_pays=True) == ["end@3970", "end@7540", "held@7540"]
    assert run(end_pays=False) == ["end@3970", "held@3970"]
