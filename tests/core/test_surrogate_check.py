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
