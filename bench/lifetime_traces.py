"""Deterministic traces for the cache-lifetime benchmark (bench/lifetime.py): each generator takes a seed and
the shape of its workload (gap distribution, sessions, prefix sizes), so a method tuned on one set of
parameters can be scored on another it has not seen (`TUNE`, `CHECK`, `HELD_OUT` and `FRESH` below).

- human-paced chat (`human_chat`): a person reads each reply and answers minutes later, sometimes after a
  break past 5 minutes; several conversations a day on one route. Every gap is drawn alike and independently
  (i.i.d.), so nothing an online planner sees predicts a break.
- human-paced chat, paced by person (`paced_chat`): the same conversations with timing as people produce it.
  Its assumptions, each for a reason:
  - each person has a pace of their own, a median reply time drawn log-normal across people (median 90 s,
    sigma 0.6), and a quarter are slow readers whose median lies at 200-420 s, so that their replies straddle
    5 minutes: reading and typing speed differ several-fold between people, and reply latencies are
    log-normal and per-person in measured chat and e-mail logs;
  - one person's replies scatter log-normally around their median (sigma 0.45): the same person answers a short
    reply quickly and a long one slowly, but keeps their rhythm;
  - each person has a break propensity of their own (Beta(1, 4): mean 0.2, some rarely leave, some often):
    interruptions depend on the person and their setting (a focused session vs one beside other work);
  - after a break the chance of another rises (a third of the rest): human activity is bursty, long gaps
    cluster, as inter-event times of a person are heavy-tailed and positively correlated;
  - a tenth of breaks last 1-3 hours (a meeting, lunch), past every TTL offered to a chat request.
  The trace encodes none of this in the requests: only their timing carries it.
- agent working day: a coding agent's tool loop (requests seconds apart) in bursts, with breaks from
  minutes (a review) to hours (a meeting, lunch), one long conversation over the day.
- nothing repeats: long one-off prompts (no shared system prompt, no follow-up).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from planner_traces import prose

from prefixgate.providers.trace import TraceRecord

MODEL = "claude-sonnet-5-5"


def _record(t: float, route: str, body: dict, output: int) -> TraceRecord:
    return TraceRecord(line=0, t=t, provider="anthropic", model=MODEL, body=body, route=route, tenant="acme",
                       output_tokens=output)


def _message(text: str) -> dict:
    """The Anthropic Message that answered with `text`."""
    return {"type": "message", "role": "assistant", "model": MODEL, "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn"}


def _body(system: str, messages: list, tools: list | None = None) -> dict:
    body: dict = {"model": MODEL, "max_tokens": 2048}
    if tools:
        body["tools"] = tools
    body["system"] = system
    body["messages"] = list(messages)
    return body


@dataclass(frozen=True)
class Chat:
    sessions: int = 8
    turns: tuple[int, int] = (6, 14)
    reply_s: tuple[float, float] = (40.0, 240.0)     # reading and typing time, uniform
    break_p: float = 0.25                            # chance a gap is a break instead
    break_s: tuple[float, float] = (360.0, 2400.0)   # a break, log-uniform
    system_paragraphs: int = 16
    reply_sentences: int = 12
    day_s: float = 8 * 3600.0


def human_chat(seed: int, shape: Chat = Chat()) -> list[TraceRecord]:
    """Every gap drawn alike and independently: a reply (uniform) or, with `break_p`, a break (log-uniform)."""
    def gaps(rng: random.Random) -> Iterator[float]:
        while True:
            if rng.random() < shape.break_p:
                lo, hi = shape.break_s
                yield lo * (hi / lo) ** rng.random()
            else:
                yield rng.uniform(*shape.reply_s)

    return _conversations(seed, shape, lambda rng: (gaps(rng), None))[0]


GapLaws = list[tuple[float, float]]   # per record: the true P(next gap <= 5 min), P(next gap <= 1 h)


def _conversations(seed: int, shape: Chat | PacedChat,
                   session: Callable[[random.Random], tuple[Iterator[float], Iterator[tuple[float, float]] | None]]
                   ) -> tuple[list[TraceRecord], GapLaws]:
    """`shape.sessions` conversations on one route; `session(rng)` draws one's gaps (and, for the ceiling, the
    law each gap was drawn from, given the session's past)."""
    rng = random.Random(seed)
    system = "You are a thoughtful assistant.\n" + "\n".join(prose(rng, 5) for _ in range(shape.system_paragraphs))
    rows = []
    for _ in range(shape.sessions):
        t = rng.uniform(0, shape.day_s)
        gaps, laws = session(rng)
        messages: list = []
        for _ in range(rng.randint(*shape.turns)):
            messages.append({"role": "user", "content": prose(rng, rng.randint(1, 4))})
            law = next(laws) if laws is not None else (0.0, 0.0)
            record = _record(t, "chat", _body(system, messages), output=400)
            reply = prose(rng, rng.randint(shape.reply_sentences // 2, shape.reply_sentences * 3 // 2))
            # The trace keeps the reply the gateway relayed (a recorded trace's `response`), as people see it.
            rows.append((replace(record, response=_message(reply)), law))
            messages.append({"role": "assistant", "content": reply})
            t += next(gaps)
    rows.sort(key=lambda row: row[0].t)
    return [r for r, _ in rows], [law for _, law in rows]


@dataclass(frozen=True)
class PacedChat:
    """Human-paced chat whose timing differs by person and clusters in time (`paced_chat`)."""

    sessions: int = 10
    turns: tuple[int, int] = (6, 16)
    pace_s: tuple[float, float] = (90.0, 0.6)        # a person's median reply time: log-normal (median, sigma)
    slow_p: float = 0.25                             # share of slow readers, whose median is instead ...
    slow_s: tuple[float, float] = (200.0, 420.0)     # ... log-uniform here, straddling 5 minutes
    spread: float = 0.45                             # one person's replies around their median: log-normal sigma
    propensity: tuple[float, float] = (1.0, 4.0)     # a person's chance that a gap is a break: Beta(a, b)
    stick: float = 0.35                              # after a break, this share of the rest breaks again
    break_s: tuple[float, float] = (360.0, 2700.0)   # a break, log-uniform
    long_p: float = 0.1                              # a break is instead long (1-3 h: nothing survives it)
    system_paragraphs: int = 16
    reply_sentences: int = 12
    day_s: float = 8 * 3600.0


def _lognormal_cdf(t: float, median: float, sigma: float) -> float:
    return 0.5 * (1 + math.erf(math.log(t / median) / (sigma * math.sqrt(2))))


def paced_chat(seed: int, shape: PacedChat = PacedChat()) -> tuple[list[TraceRecord], GapLaws]:
    """Human-paced chat as people pace it: the records, and per record the law its next gap was drawn from."""
    def session(rng: random.Random) -> tuple[Iterator[float], Iterator[tuple[float, float]]]:
        if rng.random() < shape.slow_p:
            lo, hi = shape.slow_s
            pace = lo * (hi / lo) ** rng.random()
        else:
            pace = rng.lognormvariate(math.log(shape.pace_s[0]), shape.pace_s[1])
        propensity = rng.betavariate(*shape.propensity)
        state = {"p": propensity}

        def laws() -> Iterator[tuple[float, float]]:
            while True:
                p, reply = state["p"], lambda t: _lognormal_cdf(t, pace, shape.spread)
                yield (1 - p) * reply(300.0), (1 - p) * reply(3600.0) + p * (1 - shape.long_p)

        def gaps() -> Iterator[float]:
            while True:
                if rng.random() < state["p"]:
                    state["p"] = propensity + (1 - propensity) * shape.stick
                    lo, hi = (3600.0, 3 * 3600.0) if rng.random() < shape.long_p else shape.break_s
                    yield lo * (hi / lo) ** rng.random()
                else:
                    state["p"] = propensity
                    yield rng.lognormvariate(math.log(pace), shape.spread)

        return gaps(), laws()

    return _conversations(seed, shape, session)


@dataclass(frozen=True)
class AgentDay:
    bursts: int = 14
    steps: tuple[int, int] = (6, 18)                 # tool-loop requests per burst
    step_s: tuple[float, float] = (4.0, 25.0)        # model + tool time between them
    # Breaks between bursts (seconds, log-uniform within each range), chosen with these weights.
    breaks: tuple[tuple[float, float, float], ...] = ((0.45, 60.0, 600.0), (0.35, 600.0, 3000.0),
                                                      (0.2, 3600.0, 3 * 3600.0))
    tools: int = 10
    system_paragraphs: int = 24
    result_sentences: tuple[int, int] = (4, 16)


def agent_day(seed: int, shape: AgentDay = AgentDay()) -> list[TraceRecord]:
    rng = random.Random(seed)
    tools = [{"name": f"tool_{i}", "description": prose(rng, 3),
              "input_schema": {"type": "object", "properties": {"path": {"type": "string", "description": prose(rng, 1)}}}}
             for i in range(shape.tools)]
    system = "You are a careful coding agent.\n" + "\n".join(prose(rng, 5) for _ in range(shape.system_paragraphs))
    messages: list = []
    records = []
    t = 0.0
    for burst in range(shape.bursts):
        messages.append({"role": "user", "content": f"Task {burst}: " + prose(rng, 3)})
        for step in range(rng.randint(*shape.steps)):
            records.append(_record(t, "agent", _body(system, messages, tools), output=150))
            call = f"toolu_{burst}_{step}"
            messages.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": call, "name": rng.choice(tools)["name"], "input": {"path": prose(rng, 1)}}]})
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call, "content": prose(rng, rng.randint(*shape.result_sentences))}]})
            t += rng.uniform(*shape.step_s)
        messages.append({"role": "assistant", "content": "Done: " + prose(rng, 2)})
        weights = [w for w, _, _ in shape.breaks]
        _, lo, hi = rng.choices(shape.breaks, weights)[0]
        t += lo * (hi / lo) ** rng.random()
    return records


@dataclass(frozen=True)
class OneOff:
    prompts: int = 40
    paragraphs: tuple[int, int] = (40, 80)
    gap_s: tuple[float, float] = (30.0, 900.0)


def nothing_repeats(seed: int, shape: OneOff = OneOff()) -> list[TraceRecord]:
    rng = random.Random(seed)
    records = []
    t = 0.0
    for i in range(shape.prompts):
        doc = "\n".join(prose(rng, 6) for _ in range(rng.randint(*shape.paragraphs)))
        # No shared system prompt either: each request's first words differ.
        body = _body(f"Report {i} ({rng.getrandbits(64):016x}): summarise it.", [{"role": "user", "content": doc}])
        records.append(_record(t, "oneoff", body, output=300))
        t += rng.uniform(*shape.gap_s)
    return records


@dataclass(frozen=True)
class ChatCase:
    """One chat trace of a set: its seed and shape (i.i.d. `Chat` or `PacedChat`); called, its records."""

    seed: int
    shape: Chat | PacedChat

    def __call__(self) -> list[TraceRecord]:
        if isinstance(self.shape, Chat):
            return human_chat(self.seed, self.shape)
        return paced_chat(self.seed, self.shape)[0]


# The i.i.d. chat's shapes in each set (bench/lifetime_ceiling.py also scores them over fresh seeds).
IID_SHAPES = {
    "tune": ChatCase(11, Chat()),
    "check": ChatCase(12, Chat(sessions=12, turns=(4, 20), reply_s=(20.0, 290.0), break_p=0.35,
                               break_s=(320.0, 3000.0), system_paragraphs=30, reply_sentences=8)),
    "held-out": ChatCase(13, Chat(sessions=10, turns=(3, 16), reply_s=(30.0, 270.0), break_p=0.2,
                                  break_s=(310.0, 3500.0), system_paragraphs=20, reply_sentences=16)),
    "fresh": ChatCase(14, Chat(sessions=9, turns=(5, 18), reply_s=(25.0, 280.0), break_p=0.3,
                               break_s=(330.0, 3300.0), system_paragraphs=22, reply_sentences=10)),
    "unseen": ChatCase(15, Chat(sessions=11, turns=(4, 15), reply_s=(35.0, 260.0), break_p=0.22,
                                break_s=(340.0, 2800.0), system_paragraphs=18, reply_sentences=13)),
    "unseen-2": ChatCase(16, Chat(sessions=10, turns=(5, 17), reply_s=(30.0, 250.0), break_p=0.27,
                                  break_s=(320.0, 3100.0), system_paragraphs=21, reply_sentences=11)),
    "unseen-3": ChatCase(17, Chat(sessions=12, turns=(4, 16), reply_s=(25.0, 275.0), break_p=0.24,
                                  break_s=(330.0, 3300.0), system_paragraphs=17, reply_sentences=14)),
    "unseen-4": ChatCase(18, Chat(sessions=11, turns=(3, 18), reply_s=(20.0, 265.0), break_p=0.3,
                                  break_s=(315.0, 3400.0), system_paragraphs=25, reply_sentences=9)),
}
PACED_SHAPES = {
    "tune": ChatCase(41, PacedChat()),
    "check": ChatCase(42, PacedChat(sessions=12, turns=(4, 20), pace_s=(70.0, 0.7), slow_p=0.2,
                                    propensity=(1.5, 5.0), stick=0.4, system_paragraphs=24, reply_sentences=9)),
    "fresh": ChatCase(44, PacedChat(sessions=11, turns=(5, 18), pace_s=(110.0, 0.5), slow_p=0.3, slow_s=(180.0, 480.0),
                                    spread=0.5, propensity=(1.2, 4.5), stick=0.3, break_s=(330.0, 3000.0),
                                    long_p=0.08, system_paragraphs=20, reply_sentences=14)),
    "unseen": ChatCase(45, PacedChat(sessions=9, turns=(5, 15), pace_s=(100.0, 0.55), slow_p=0.22,
                                     slow_s=(190.0, 450.0), spread=0.4, propensity=(1.1, 4.2), stick=0.3,
                                     break_s=(350.0, 2900.0), long_p=0.1, system_paragraphs=26, reply_sentences=11)),
    "unseen-2": ChatCase(46, PacedChat(sessions=11, turns=(4, 17), pace_s=(80.0, 0.65), slow_p=0.25,
                                       slow_s=(210.0, 430.0), spread=0.45, propensity=(1.3, 4.0), stick=0.35,
                                       break_s=(340.0, 2800.0), long_p=0.12, system_paragraphs=19, reply_sentences=12)),
    "unseen-3": ChatCase(47, PacedChat(sessions=10, turns=(5, 16), pace_s=(95.0, 0.6), slow_p=0.2,
                                       slow_s=(200.0, 440.0), spread=0.5, propensity=(1.2, 3.8), stick=0.3,
                                       break_s=(330.0, 3000.0), long_p=0.1, system_paragraphs=23, reply_sentences=10)),
    "unseen-4": ChatCase(48, PacedChat(sessions=12, turns=(4, 18), pace_s=(85.0, 0.6), slow_p=0.28,
                                       slow_s=(190.0, 460.0), spread=0.5, propensity=(1.25, 4.3), stick=0.32,
                                       break_s=(320.0, 3100.0), long_p=0.09, system_paragraphs=21, reply_sentences=13)),
}
IID, PACED = "human-paced chat", "human-paced chat, paced by person"

# The method was developed on TUNE and looked at CHECK along the way; HELD_OUT (other seeds, gap distributions,
# session counts and prefix sizes again) was run only for the first report, and FRESH (chat only: new seeds and
# shapes, i.i.d. and paced by person) only for the report after the chat work of 2026-11-27.
TUNE = {
    IID: IID_SHAPES["tune"],
    PACED: PACED_SHAPES["tune"],
    "agent working day": lambda: agent_day(21),
    "nothing repeats": lambda: nothing_repeats(31),
}
CHECK = {
    IID: IID_SHAPES["check"],
    PACED: PACED_SHAPES["check"],
    "agent working day": lambda: agent_day(22, AgentDay(bursts=10, steps=(3, 30), step_s=(2.0, 40.0),
                                                        breaks=((0.3, 120.0, 900.0), (0.4, 900.0, 2400.0),
                                                                (0.3, 3600.0, 4 * 3600.0)),
                                                        tools=6, system_paragraphs=12, result_sentences=(8, 30))),
    "nothing repeats": lambda: nothing_repeats(32, OneOff(prompts=30, paragraphs=(60, 120), gap_s=(5.0, 3600.0))),
}
HELD_OUT = {
    IID: IID_SHAPES["held-out"],
    "agent working day": lambda: agent_day(23, AgentDay(bursts=16, steps=(4, 22), step_s=(3.0, 30.0),
                                                        breaks=((0.5, 90.0, 900.0), (0.25, 900.0, 3500.0),
                                                                (0.25, 3700.0, 2.5 * 3600.0)),
                                                        tools=14, system_paragraphs=30, result_sentences=(2, 20))),
    "nothing repeats": lambda: nothing_repeats(33, OneOff(prompts=50, paragraphs=(20, 60), gap_s=(1.0, 600.0))),
}
FRESH = {IID: IID_SHAPES["fresh"], PACED: PACED_SHAPES["fresh"]}
# UNSEEN (chat only, new seeds and shapes, written down before any run) was run only for the report of the
# keep-alive upgrade (2026-11-27 10:30), which was developed looking at the four sets above.
UNSEEN = {IID: IID_SHAPES["unseen"], PACED: PACED_SHAPES["unseen"]}


def _unseen(name: str, day: tuple[int, AgentDay], one_off: tuple[int, OneOff]) -> dict:
    """A set written down before any run: the chat shapes named `name`, an agent's day and a nothing-repeats trace."""
    return {IID: IID_SHAPES[name], PACED: PACED_SHAPES[name], "agent working day": lambda: agent_day(*day),
            "nothing repeats": lambda: nothing_repeats(*one_off)}


# UNSEEN_2 (chat and the agent's day, new seeds and shapes, written down before any run) was run only for the report
# of the third keep-alive session (2026-11-27 14:15), after the prior and TTL changes made looking at the five above.
UNSEEN_2 = _unseen("unseen-2", (24, AgentDay(bursts=12, steps=(5, 24), step_s=(3.0, 35.0),
                                             breaks=((0.4, 100.0, 800.0), (0.35, 800.0, 3200.0), (0.25, 3600.0, 3 * 3600.0)),
                                             tools=9, system_paragraphs=20, result_sentences=(3, 22))),
                   (34, OneOff(prompts=35, paragraphs=(30, 90), gap_s=(10.0, 1800.0))))
# UNSEEN_3 (the same, new seeds and shapes again, written down before any run) was run only for the report of
# the held entries (2026-11-27 13:35), developed looking at the sets above (unseen-2 included).
UNSEEN_3 = _unseen("unseen-3", (25, AgentDay(bursts=13, steps=(4, 20), step_s=(3.0, 28.0),
                                             breaks=((0.45, 90.0, 700.0), (0.3, 700.0, 3400.0), (0.25, 3700.0, 2.8 * 3600.0)),
                                             tools=11, system_paragraphs=26, result_sentences=(4, 18))),
                   (35, OneOff(prompts=45, paragraphs=(25, 70), gap_s=(2.0, 1200.0))))
# UNSEEN_4 (the same again, written down before any run) was first run at 2026-11-27 15:16 UTC, for the report of the
# sixth keep-alive session; trace mode was as at the 13:43 report, developed looking at the sets above.
UNSEEN_4 = _unseen("unseen-4", (26, AgentDay(bursts=11, steps=(5, 22), step_s=(2.5, 32.0),
                                             breaks=((0.4, 80.0, 750.0), (0.35, 750.0, 3300.0), (0.25, 3650.0, 3.2 * 3600.0)),
                                             tools=8, system_paragraphs=18, result_sentences=(5, 20))),
                   (36, OneOff(prompts=40, paragraphs=(35, 80), gap_s=(3.0, 1500.0))))
SETS = {"tune": TUNE, "check": CHECK, "held-out": HELD_OUT, "fresh": FRESH, "unseen": UNSEEN, "unseen-2": UNSEEN_2,
        "unseen-3": UNSEEN_3, "unseen-4": UNSEEN_4}
