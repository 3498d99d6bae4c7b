"""A lone UTF-16 surrogate escape is refused wherever it sits, and a whole escaped pair (an emoji) is ordinary
text, including next to escaped backslashes that make text look like an escape (JSON's own rules decide)."""

from __future__ import annotations

import pytest

from prefixgate.dialects.validate import load_body
from prefixgate.errors import RequestError


def body(text: bytes) -> bytes:
    return b'{"model":"m","messages":[{"role":"user","content":"' + text + b'"}]}'


@pytest.mark.parametrize("text", [
    rb"a robot \ud83e\udd16", rb"\uD83E\uDD16", rb"\\ud83e and \ud83e\udd16", rb"\\\\ud83e",
])
def test_whole_pairs_and_escaped_backslashes_pass(text: bytes) -> None:
    load_body(body(text))


@pytest.mark.parametrize("text", [
    rb"\ud83e", rb"\udd16", rb"\ud83e\ud83e\udd16", rb"\\\ud83e", rb"\\ud83e\udd16", rb"\ud83e\\udd16",
    rb"\udd16\ud83e",
])
def test_a_lone_half_is_refused(text: bytes) -> None:
    with pytest.raises(RequestError, match="lone UTF-16 surrogate"):
        load_body(body(text))


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32", "utf-8-sig"])
@pytest.mark.parametrize("text", [r"\ud83e", "raw"])
def test_a_lone_half_is_refused_in_every_encoding_json_reads(encoding: str, text: str) -> None:
    # RFC 8259 allows UTF-8 only, but the gateway reads the UTF-16 and UTF-32 JSON detects (json.detect_encoding):
    # a half escaped, or a raw one (surrogatepass decodes it), is as lone there.
    if text == "raw":
        raw = body(b"\x00").decode().replace("\x00", "\ud83e").encode(encoding, "surrogatepass")
    else:
        raw = body(text.encode()).decode().encode(encoding)
    with pytest.raises(RequestError, match="lone UTF-16 surrogate"):
        load_body(raw)
    load_body(body(rb"a robot \ud83e\udd16").decode().encode(encoding))      # a whole pair passes


def _session(where: str, half: bytes) -> list[bytes]:
    """Two bodies of one session (the second resends the first's messages and adds one), 30 KB each so they
    take the resent-body path, with `half` (an escape) in the first message or in the system prompt after
    the messages (Claude Code's order)."""
    first = b'{"role":"user","content":"question ' + (half if where == "messages" else b"") + b' ' + b"q " * 9000 + b'"}'
    system = b'"system":"You are terse. ' + (half if where == "tail" else b"") + b' ' + b"s " * 6000 + b'"'
    answer = b'{"role":"assistant","content":"an answer"}'
    nxt = b'{"role":"user","content":"next"}'
    return [b'{"model":"m","messages":[' + b",".join(msgs) + b"]," + system + b',"max_tokens":9}'
            for msgs in ([first, answer], [first, answer, nxt])]


@pytest.mark.parametrize("where", ["messages", "tail"])
def test_a_refused_body_lends_nothing_to_the_next(where: str) -> None:
    # A body refused for a lone half must not be remembered as checked: the next body of the session, which
    # resends its bytes and is parsed only where it differs, is refused too.
    from prefixgate.dialects import anthropic

    anthropic.BODIES.clear()
    for raw in _session(where, rb"\ud83e"):
        with pytest.raises(RequestError, match="lone UTF-16 surrogate"):
            anthropic.parse_request(raw)
    # A whole pair there is text: both bodies pass, the second reusing the first's parsed messages.
    anthropic.BODIES.clear()
    convs = [anthropic.parse_request(raw) for raw in _session(where, rb"\ud83e\udd16")]
    assert convs[1].source is not None and convs[1].source.reused == 2
