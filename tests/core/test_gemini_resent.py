"""A Gemini chat resends its whole history every turn (generateContent is stateless: ai.google.dev's multi-turn
guide sends `contents` with every earlier turn): its next body is parsed from where it differs
(`dialects.resent`), to what a whole parse gives, and held to every body's checks where it was parsed."""

from __future__ import annotations

import json

import pytest

from prefixgate.compact_json import compact_bytes
from prefixgate.dialects import gemini, resent
from prefixgate.errors import RequestError
from prefixgate.ir import Conversation

MODEL = "gemini-3.5-flash"


def _turns(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "model",
             "parts": [{"text": f"Turn {i}: the build log says ok, the tests pass, the lint is clean. " * 6}]}
            for i in range(n)]


def _body(contents: list[dict], system: str = "Answer in one line.") -> dict:
    # The order the google-genai SDK writes: contents first, then the config's fields.
    return {"contents": contents, "systemInstruction": {"parts": [{"text": system}]},
            "tools": [{"functionDeclarations": [{"name": "run_tests", "description": "Run the suite."}]}],
            "generationConfig": {"maxOutputTokens": 256}}


def _whole(raw: bytes) -> Conversation:
    """`raw` parsed as a first body is: nothing taken from an earlier one."""
    resent.MEMO.disabled = True
    try:
        return gemini.parse_request(raw, model=MODEL)
    finally:
        resent.MEMO.disabled = False


def test_the_next_turn_takes_up_the_earlier_turns_and_parses_to_the_same() -> None:
    gemini.BODIES.clear()
    history = _turns(60)
    first = json.dumps(_body(history)).encode()
    conv1 = gemini.parse_request(first, model=MODEL)
    turn = {"role": "user", "parts": [{"text": "Now fix the failing test."}]}
    raw2 = json.dumps(_body([*history, {"role": "model", "parts": [{"text": "Done."}]}, turn])).encode()
    conv2 = gemini.parse_request(raw2, model=MODEL)
    assert conv2.source is not None and conv2.source.reused == 60
    # system, tools, then the contents: the earlier request's segments, shared as they are
    assert all(conv2.segments[i] is conv1.segments[i] for i in range(2 + 60))
    whole = _whole(raw2)
    assert [(s.role, [b.native for b in s.blocks]) for s in conv2.segments] == \
        [(s.role, [b.native for b in s.blocks]) for s in whole.segments]
    assert conv2.params == whole.params and conv2.field_order == whole.field_order
    sent = resent.encode(gemini.encode_request(conv2), conv2.source)
    assert json.loads(sent) == json.loads(compact_bytes(gemini.encode_request(whole))) == json.loads(raw2)


@pytest.mark.parametrize(("new", "field"), [
    ('{"role": "user", "parts": [{"text": "Use files/mine.", "text": "Use files/theirs."}]}', "contents.60.parts.0.text"),
    ('{"role": "user", "parts": [{"fileData": {"fileUri": "files/a", "file_uri": "files/b"}}]}',
     "contents.60.parts.0.fileData.fileUri"),
])
def test_a_new_turn_is_checked_where_it_was_parsed(new: str, field: str) -> None:
    gemini.BODIES.clear()
    history = [json.dumps(t) for t in _turns(60)]
    tail = ', "generationConfig": {"maxOutputTokens": 256}}'
    gemini.parse_request(('{"contents": [' + ", ".join(history) + "]" + tail).encode(), model=MODEL)
    raw = ('{"contents": [' + ", ".join([*history, new]) + "]" + tail).encode()
    for _ in range(2):          # refused, it is not remembered: sent again, it is refused again
        with pytest.raises(RequestError) as refused:
            gemini.parse_request(raw, model=MODEL)
        assert refused.value.field == field and refused.value.status == 400
