"""A key written twice in one object of a request body is refused, at any depth and however it is spelt (RFC 8259:
names SHOULD be unique; I-JSON, RFC 7493: MUST), whether the body is parsed whole or from where it differs from the
body it resends (`dialects.resent`); the same key in two objects, a colon in a string (written as it is or as
`\\u003a`) and numbers past 64 bits are ordinary JSON."""

from __future__ import annotations

import base64
import json
import threading

import pytest

from prefixgate.dialects import bedrock, unique_keys
from prefixgate.dialects.resent import ResentBodies
from prefixgate.dialects.validate import load_body, load_resent
from prefixgate.errors import RequestError


@pytest.mark.parametrize(("raw", "field"), [
    (b'{"model": "gpt-5.4", "messages": [], "model": "gpt-5.5"}', "model"),
    (b'{"contents": [{"parts": [{"fileData": {"fileUri": "files/a"}, "fileData": {"fileUri": "files/b"}}]}]}',
     "contents.0.parts.0.fileData"),
    (b'{"a": {"b": [1, {"c": 1, "d": 2, "c": 3}]}}', "a.b.1.c"),
    # A key spelt with an escape is the same key to every parser.
    (b'{"expireTime": "2026-12-01T00:00:00Z", "expire\\u0054ime": "2027-12-01T00:00:00Z"}', "expireTime"),
    # Escaped colons in strings the parsed value keeps, as many as the repeated pairs hide.
    (b'{"x": "\\u003a\\u003a", "y": {"z": 1, "z": 2}}', "y.z"),
    (b'{"n": 123456789012345678901234567890, "n": 1}', "n"),      # past orjson's 64 bits
    (b'{"s": "a: b", "s": "c"}', "s"),
])
def test_a_key_written_twice_is_refused_naming_it(raw: bytes, field: str) -> None:
    with pytest.raises(RequestError, match="twice") as refused:
        load_body(raw)
    assert refused.value.field == field and refused.value.status == 400


@pytest.mark.parametrize("text", ['{"a": 1, "a": 2}', '{"a": {"b": 1, "b": 1}}'])
@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-8-sig"])
def test_bodies_in_other_encodings_json_reads_are_held_to_it_too(text: str, encoding: str) -> None:
    with pytest.raises(RequestError, match="twice"):
        load_body(text.encode(encoding))
    with pytest.raises(RequestError, match="twice"):
        load_body(text)         # a body given as text


@pytest.mark.parametrize("raw", [
    b'{"a": {"k": 1}, "b": {"k": 1}, "c": [{"k": 1}, {"k": 2}]}',
    b'{"url": "https://example.com:8443/a", "t": "10:30", "k:": ":"}',
    b'{"x": "\\u003a", "y": "\\u003A:"}',
    b'{"n": 123456789012345678901234567890, "m": -1.5e300}',
    b'{"emoji": "\\ud83e\\udd16", "user_id": 1, "userId": 2}',
    '{"a": 1, "b": "\u00e9:\u65e5"}'.encode("utf-16"),
])
def test_ordinary_bodies_pass(raw: bytes) -> None:
    assert load_body(raw) == json.loads(raw)


def _body(messages: list[str], tail: str = '"max_tokens": 9') -> bytes:
    return ('{"model": "m", "messages": [' + ", ".join(messages) + "], " + tail + "}").encode()


def _history() -> list[str]:
    return [json.dumps({"role": "user", "content": f"Turn {i}: " + "a build log line: ok. " * 60}) for i in range(30)]


@pytest.mark.parametrize(("where", "field"), [
    ("new message", "messages.30.content"), ("fields after the messages", "metadata.user_id"),
    ("fields before the messages", "system.0.text")])
def test_a_resent_body_is_checked_where_it_was_parsed(where: str, field: str) -> None:
    bodies = ResentBodies()
    history = _history()
    first = _body(history)
    data, found = load_resent(first, "messages", bodies)
    assert found is not None and data == json.loads(first)
    new, tail = json.dumps({"role": "user", "content": "Next."}), '"max_tokens": 9'
    if where == "new message":
        new = '{"role": "user", "content": "Next.", "content": "Other."}'
    elif where == "fields after the messages":
        tail = '"max_tokens": 9, "metadata": {"user_id": "u1", "user_id": "u2"}'
    resent = _body(history + [new], tail)
    if where == "fields before the messages":
        resent = b'{"system": [{"type": "text", "text": "Be terse.", "text": "Be verbose."}], ' + resent[1:]
    with pytest.raises(RequestError, match="twice") as refused:
        load_resent(resent, "messages", bodies)
    assert refused.value.field == field
    # Refused, it is forgotten: a body resending it parses its messages again and is refused again.
    with pytest.raises(RequestError, match="twice"):
        load_resent(resent, "messages", bodies)


def test_a_resent_body_takes_up_messages_checked_before() -> None:
    bodies = ResentBodies()
    history = _history()
    load_resent(_body(history), "messages", bodies)
    nxt = _body(history + [json.dumps({"role": "user", "content": "k: v, \\u003a"})])
    data, found = load_resent(nxt, "messages", bodies)
    assert found is not None and found.reused == 30 and data == json.loads(nxt)


def test_a_body_refused_is_never_resent_unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Big bodies are parsed on worker threads (gateway/off_loop.py): a body resending one still being checked must
    not take up its messages as checked. The first body's check (the whole one: it escapes a colon) is held until the
    second body has been read; the first repeats a key in a message, which the second resends."""
    bodies = ResentBodies()
    history = _history()
    smuggled = history + ['{"role": "user", "content": "\\u003a files/theirs", "content": "files/mine"}']
    checking, read = threading.Event(), threading.Event()
    whole = unique_keys.exact

    def held(raw: bytes | str, decoder: json.JSONDecoder) -> None:
        if not checking.is_set():
            checking.set()
            read.wait(10)
        whole(raw, decoder)

    monkeypatch.setattr(unique_keys, "exact", held)
    refused: list[BaseException] = []

    def first() -> None:
        try:
            load_resent(_body(smuggled), "messages", bodies)
        except RequestError as e:
            refused.append(e)

    worker = threading.Thread(target=first)
    worker.start()
    assert checking.wait(10)
    try:
        with pytest.raises(RequestError, match="twice") as second:
            load_resent(_body(smuggled + [json.dumps({"role": "user", "content": "Next."})]), "messages", bodies)
    finally:
        read.set()
        worker.join(10)
    assert second.value.field == "messages.30.content" and len(refused) == 1


def test_a_bedrock_count_of_invoke_model_is_held_to_it_in_its_base64_body() -> None:
    # CountTokens carries InvokeModel's body base64-encoded (botocore's bedrock-runtime model), and to Bedrock the
    # gateway forwards the caller's bytes as they came: a body of its own.
    inner = b'{"max_tokens": 9, "messages": [{"role": "user", "content": "a", "content": "b"}]}'
    raw = json.dumps({"input": {"invokeModel": {"body": base64.b64encode(inner).decode()}}}).encode()
    with pytest.raises(RequestError, match="twice") as refused:
        bedrock.counted_request(raw)
    assert refused.value.field == "input.invokeModel.body.messages.0.content"


def test_a_body_given_as_text_is_held_to_the_checks_of_its_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text takes the colon count of its UTF-8 bytes, not a second parse, and a lone surrogate in it (a code point,
    not an escape) is refused as in bytes."""
    parsed_again: list[object] = []
    whole = unique_keys.exact
    monkeypatch.setattr(unique_keys, "exact", lambda raw, decoder: parsed_again.append(raw) or whole(raw, decoder))
    text = json.dumps({"model": "gpt-5.4", "messages": [{"role": "user", "content": "k: v, \u00e9 \U0001f600"}]},
                      ensure_ascii=False)
    assert load_body(text) == json.loads(text) and parsed_again == []
    with pytest.raises(RequestError, match="twice") as refused:
        load_body('{"model": "gpt-5.4", "messages": [{"role": "user", "content": "a", "content": "b"}]}')
    assert refused.value.field == "messages.0.content"
    with pytest.raises(RequestError, match="lone UTF-16 surrogate"):
        load_body('{"model": "gpt-5.4", "user": "\ud800"}')
