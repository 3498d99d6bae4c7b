"""Bodies that resend an earlier body's bytes (`dialects.resent`): parsed from where they differ, to exactly
what `json.loads` gives, and sent upstream with the unchanged messages' own bytes."""

from __future__ import annotations

import json
import random

import pytest

from prefixgate.cache_planner import PlannerState, Target, plan
from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import anthropic as an
from prefixgate.dialects.resent import MIN_BYTES, ResentBodies, encode
from prefixgate.dialects.validate import _DECODER, load_resent
from prefixgate.errors import RequestError
from prefixgate.ir import touched

WORDS = ["alpha", "beta", "é", "日本", "\\n", "x" * 50, "😀", 'q"uote', "\t"]


def _message(rng: random.Random, i: int) -> dict:
    roll = rng.random()
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 300)))
    if roll < 0.5:
        return {"role": rng.choice(["user", "assistant"]), "content": [{"type": "text", "text": text}]}
    if roll < 0.8:
        return {"role": "user", "content": text}
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": [1, 2.5, None, True]}]}


ORDERS = (["model", "max_tokens", "system", "tools", "messages", "metadata"],
          ["model", "messages", "system", "tools", "metadata", "max_tokens", "stream"],
          ["messages", "system", "model"])


def test_resent_bodies_parse_to_what_json_loads_gives():
    """Sessions in three field orders and several spellings, whose turns append, replace, drop messages
    and change fields before and after the list: every parse equals json.loads, and most reuse earlier
    messages."""
    rng = random.Random(5)
    bodies = ResentBodies()
    reused = parsed = 0
    for session in range(24):
        order = ORDERS[session % 3]
        fields = {"model": "claude", "max_tokens": 100, "system": "You are terse. " * 1200,
                  "tools": [{"name": "t", "description": "d" * 3000}], "metadata": {"user_id": "u"}, "stream": True}
        messages = [_message(rng, i) for i in range(rng.randint(1, 12))]
        spelling = {"indent": rng.choice([None, 2]), "ensure_ascii": session % 2 == 0,
                    "separators": rng.choice([None, (",", ":")])}
        for turn in range(12):
            roll = rng.random()
            if roll < 0.5:
                messages.append(_message(rng, turn))
            elif roll < 0.6:
                messages[rng.randrange(len(messages))] = _message(rng, turn)
            elif roll < 0.7 and len(messages) > 1:
                messages.pop()
            elif roll < 0.8:
                fields["metadata"] = {"user_id": str(rng.random())}
            elif roll < 0.9:
                # Fields before the list change (a time in the system prompt): found by the list's own bytes.
                fields["system"] = f"Now: {rng.random()} {rng.choice(WORDS)}. " + "You are terse. " * 1200
            raw = json.dumps({k: messages if k == "messages" else fields[k] for k in order}, **spelling).encode()
            found = bodies.load(raw, "messages", _DECODER)
            assert found is not None
            expected = json.loads(raw)
            assert found.data == expected and list(found.data) == list(expected)
            assert len(found.ends) == len(expected["messages"])
            for n in range(1, len(found.ends) + 1):
                assert json.loads(b"[" + found.span(n) + b"]") == expected["messages"][:n]
            assert raw[found.after - 1:found.after] == b"]"
            parsed += 1
            reused += found.reused > 0
    assert bodies.hits == reused and reused > parsed * 0.7


def _body(**extra: object) -> dict:
    return {"model": "claude-sonnet-4-6", "max_tokens": 10,
            "messages": [{"role": "user", "content": "x" * MIN_BYTES}, {"role": "assistant", "content": "ok"},
                         {"role": "user", "content": "next"}], **extra}


@pytest.mark.parametrize("change", [
    lambda raw: raw[:-1],                                           # truncated
    lambda raw: raw + b"x",                                         # extra data
    lambda raw: raw.replace(b'"next"}]', b'"next"},]'),            # trailing comma
    lambda raw: raw.replace(b'"max_tokens": 10', b'"messages": 1'),  # a repeated key
    lambda raw: raw.replace(b'{"role": "assistant", "content": "ok"}', b"5"),   # an element a longer body could extend
])
def test_what_it_cannot_take_goes_back_to_the_usual_parse(change):
    bodies = ResentBodies()
    raw = json.dumps(_body()).encode()
    assert bodies.load(raw, "messages", _DECODER) is not None
    assert bodies.load(change(raw), "messages", _DECODER) is None


def test_errors_are_those_of_the_usual_parse():
    bodies = ResentBodies()
    raw = json.dumps(_body()).encode()
    load_resent(raw, "messages", bodies)
    with pytest.raises(RequestError, match="NaN is not a JSON number"):
        load_resent(raw.replace(b'"next"', b"NaN"), "messages", bodies)
    with pytest.raises(RequestError, match="lone UTF-16 surrogate"):
        load_resent(raw.replace(b'"next"', b'"\\ud800"'), "messages", bodies)
    with pytest.raises(RequestError, match="not valid JSON"):
        load_resent(raw[:-2], "messages", bodies)
    # Fields before the list that changed are parsed, and checked, though the messages are reused.
    with pytest.raises(RequestError, match="lone UTF-16 surrogate"):
        load_resent(raw.replace(b'"max_tokens": 10', b'"max_tokens": 10, "metadata": {"user_id": "\\udc00"}'), "messages", bodies)


def test_a_resent_body_shares_the_earlier_messages_and_sends_their_bytes():
    """The second request's repeated messages are the first's parsed values and segments; its upstream
    body equals the plain encoding, with the caller's own bytes for the unchanged messages."""
    an.BODIES.clear()
    first = _body()
    second = {**first, "messages": [*first["messages"], {"role": "assistant", "content": "done"},
                                    {"role": "user", "content": [{"type": "text", "text": "more",
                                                                  "cache_control": {"type": "ephemeral"}}]}]}
    conv1 = an.parse_request(json.dumps(first).encode())
    raw2 = json.dumps(second).encode()
    conv2 = an.parse_request(raw2)
    assert conv2.source.reused == 3
    assert all(conv2.segments[i] is conv1.segments[i] for i in range(3))
    planned = plan(conv2, Target("anthropic", "claude-sonnet-4-6"), PlannerState()).conversation
    payload = an.encode_request(planned)
    sent = encode(payload, conv2.source)
    assert json.loads(sent) == json.loads(compact_bytes(payload))
    assert json.dumps(first["messages"][0]).encode() in sent          # spliced: the caller's spelling
    assert json.loads(sent)["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_a_plan_that_changes_a_shared_message_changes_only_its_own_draft():
    """A checkpoint the planner moves onto an early message goes out on the wire, and the shared parsed
    segment (the next request's too) keeps its blocks as parsed."""
    an.BODIES.clear()
    body = _body()
    body["messages"] = [{"role": "user", "content": [{"type": "text", "text": f"turn {i} " + "w " * 400}]}
                        if i % 2 == 0 else {"role": "assistant", "content": "ok"} for i in range(41)]
    an.parse_request(json.dumps(body).encode())
    conv = an.parse_request(json.dumps({**body, "messages": [*body["messages"], {"role": "assistant", "content": "k"},
                                                                {"role": "user", "content": "go"}]}).encode())
    draft = conv.draft()
    block = draft.segments[0].own(draft.segments[0].blocks[0])
    block.checkpoint = an.Checkpoint("1h")
    sent = json.loads(encode(an.encode_request(draft), conv.source))
    assert sent["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert conv.segments[0].blocks[0].checkpoint is None and not touched(conv.segments[:1])
    assert "cache_control" not in json.loads(encode(an.encode_request(conv.draft()), conv.source))["messages"][0]["content"][0]


def test_keep_bounds_every_formats_memo_and_zero_turns_it_off():
    from prefixgate.dialects import resent

    bodies = ResentBodies()
    raw = json.dumps(_body()).encode()
    assert bodies.load(raw, "messages", _DECODER) is not None
    try:
        resent.keep(0)
        assert resent.MEMO.entries == 0 and not bodies._by_head
        assert bodies.load(raw, "messages", _DECODER) is None       # parsed whole by the caller
        resent.keep(8 * len(raw))                                    # room for one body with its parsed values
        assert bodies.load(raw, "messages", _DECODER) is not None
        assert bodies.load(raw.replace(b'"next"', b'"then"'), "messages", _DECODER).reused == 2
        assert resent.MEMO.entries == 1
    finally:
        resent.keep(24 << 20)


def test_a_tail_after_the_messages_is_decoded_only_when_it_changed():
    """Claude Code sends its system prompt and tools after the messages, the same on every request: a body that
    ends with the earlier one's bytes after its list takes that tail as it is and parses only its new messages.
    A body that merely ends with those bytes, its list ending before them, is parsed through what lies between."""
    bodies = ResentBodies()
    tail = {"system": "You are terse. " * 1200, "tools": [{"name": "t", "description": "日本 😀 " * 500}], "max_tokens": 9}
    messages = [{"role": "user", "content": "first question " * 40}, {"role": "assistant", "content": "an answer " * 40}]
    first = bodies.load(json.dumps({"messages": messages, **tail}, ensure_ascii=False).encode(), "messages", _DECODER)
    assert first is not None
    grown = {"messages": [*messages, {"role": "user", "content": "é next"}], **tail}
    second = bodies.load(json.dumps(grown, ensure_ascii=False).encode(), "messages", _DECODER)
    assert second is not None and second.reused == 2 and second.tail is first.tail
    assert second.data == grown
    # Same last bytes, but a field of its own between the list and them: parsed, never taken from the tail.
    between = {"messages": [*messages, {"role": "user", "content": "again"}], "metadata": {"user_id": "u"}, **tail}
    third = bodies.load(json.dumps(between, ensure_ascii=False).encode(), "messages", _DECODER)
    assert third is None or third.data == between
    assert an.parse_request(json.dumps({**between, "model": "m"}, ensure_ascii=False).encode()).params["metadata"] == {
        "user_id": "u"}
