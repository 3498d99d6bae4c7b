"""Prefix-shape entries pinned to the rule the module documents (`role:hash:set_hash:tokens:kinds`; a leading
segment's size in the provider's tokens, a turn's in characters / 4), and `first_difference` on shapes typed by
hand: the first segment at the same position whose hash or role differs; one that the earlier request lacks
only when it is leading."""

from __future__ import annotations

import pytest

from prefixgate.cache_planner.detectors import volatile_spans
from prefixgate.dialects import anthropic
from prefixgate.prefix_shape import first_difference, parse_shape, prefix_shape

# cl100k (Claude's counts are approximated with it): each word and the period are one token, so 9 a sentence.
SENTENCE = "Answer from the handbook and cite the section. "
WEATHER = {"name": "weather", "description": "Weather for a city", "input_schema": {"type": "object"}}
CLOCK = {"name": "clock", "description": "Time in a zone", "input_schema": {"type": "object"}}


def entries(system: str, tools: list[dict], turns: list[str]) -> list[list[str]]:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
    body = {"model": "claude-sonnet-5-5", "max_tokens": 8, "system": system, "tools": tools, "messages": messages}
    return [e.split(":") for e in prefix_shape(anthropic.parse_request(body), "anthropic", volatile_spans)]


def test_entry_sizes_follow_the_documented_rule() -> None:
    ticket = "ticket 2026-03-01T10:00:00Z"                        # 27 characters
    tools, system, user, assistant = entries(SENTENCE * 60, [WEATHER], [ticket, "x" * 401])
    assert [tools[0], system[0], user[0], assistant[0]] == ["tools", "system", "user", "assistant"]
    assert int(system[3]) == 60 * 9 + 1                           # 60 sentences of 9, and the trailing space
    assert int(user[3]) == 27 // 4 and int(assistant[3]) == 401 // 4     # a turn: characters / 4
    # One block: its hash and its set hash are the same digest, 6 bytes of blake2b in hex.
    assert system[1] == system[2] and len(system[1]) == 12


def test_volatile_kinds_are_named_in_leading_segments_only() -> None:
    stamp = "Now: 2026-03-01T10:00:00Z. "
    _, system, user = entries(stamp + SENTENCE * 60, [WEATHER], [stamp])
    assert (system[0], system[4]) == ("system", "timestamp")
    assert (user[0], user[4]) == ("user", "")


def test_reordered_tools_keep_their_set_hash_and_change_their_hash() -> None:
    one = entries(SENTENCE, [WEATHER, CLOCK], ["hi"])[0]
    other = entries(SENTENCE, [CLOCK, WEATHER], ["hi"])[0]
    assert one[0] == other[0] == "tools" and one[2] == other[2] and one[1] != other[1]


BEFORE = ["tools:t1:ts:38:", "system:s1:s1:541:timestamp", "user:u1:u1:6:", "assistant:a1:a1:100:"]


def shape(entries: list[str]) -> list:
    return parse_shape(entries)


@pytest.mark.parametrize(("after", "index"), [
    (BEFORE, None),                                                       # the same request
    (BEFORE + ["user:u2:u2:3:"], None),                                   # grew by a turn
    (BEFORE[:2], None),                                                   # shorter: nothing differs
    (["tools:t2:ts:38:", *BEFORE[1:]], 0),                                # tools reordered (same set hash)
    ([BEFORE[0], "system:s2:s2:541:timestamp", *BEFORE[2:]], 1),          # the system prompt changed
    ([*BEFORE[:3], "user:a1:a1:100:"], 3),                                # the same text under another role
    ([*BEFORE[:2], "user:u9:u9:6:", BEFORE[3]], 2),                       # an earlier turn edited
])
def test_first_difference(after: list[str], index: int | None) -> None:
    found = first_difference(shape(BEFORE), shape(after))
    assert (found.index if found else None) == index


def test_a_segment_the_earlier_request_lacks_counts_only_when_leading() -> None:
    before = shape(["system:s1:s1:541:"])
    assert first_difference(before, shape(["system:s1:s1:541:", "user:u1:u1:6:"])) is None
    found = first_difference(before, shape(["system:s1:s1:541:", "developer:d1:d1:12:"]))
    assert found is not None and found.index == 1 and found.role == "developer"
