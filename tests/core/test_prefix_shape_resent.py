"""The ledger's prefix shape of a resent body equals the shape computed from scratch, also when the resend
keeps every block's content but changes a message's role or how blocks are grouped into messages: the
shape names roles and segments, and the dashboard's misses view diffs them."""

from __future__ import annotations

import json

import pytest

from prefixgate.cache_planner.detectors import volatile_spans
from prefixgate.dialects import anthropic as an
from prefixgate.prefix_shape import prefix_shape

LONG = "Read the failing test, find the cause, fix it and run the suite again. " * 400   # a resendable body


def _shape_resent_and_fresh(first: dict, second: dict) -> tuple[list[str], list[str]]:
    an.BODIES.clear()
    prefix_shape(an.parse_request(json.dumps(first).encode()), "anthropic", volatile_spans)
    resent = an.parse_request(json.dumps(second).encode())
    assert resent.source.reused > 0        # parsed past the bytes it repeats: the carried path
    return prefix_shape(resent, "anthropic", volatile_spans), prefix_shape(an.parse_request(second), "anthropic",
                                                                           volatile_spans)


# Messages both requests start with, unchanged: the resend is parsed from where the bodies differ.
OPENING = [{"role": "user", "content": "Start with the build."}, {"role": "assistant", "content": "Done: it builds."}]


def _body(messages: list[dict]) -> dict:
    return {"model": "claude-sonnet-5-5", "max_tokens": 50, "system": LONG, "messages": OPENING + messages}


def _text(t: str) -> dict:
    return {"type": "text", "text": t}


@pytest.mark.parametrize(("before", "after"), [
    # The same blocks, the second message's role changed.
    ([{"role": "user", "content": [_text("first question")]}, {"role": "assistant", "content": [_text("an answer")]},
      {"role": "user", "content": [_text("next")]}],
     [{"role": "user", "content": [_text("first question")]}, {"role": "user", "content": [_text("an answer")]},
      {"role": "user", "content": [_text("next")]}]),
    # The same blocks in the same order, regrouped: two messages merged into one.
    ([{"role": "user", "content": [_text("first question")]}, {"role": "user", "content": [_text("more context")]},
      {"role": "assistant", "content": [_text("an answer")]}],
     [{"role": "user", "content": [_text("first question"), _text("more context")]},
      {"role": "assistant", "content": [_text("an answer")]}]),
])
def test_a_resend_that_changes_roles_or_grouping_is_recorded_as_sent(before: list, after: list) -> None:
    resent, fresh = _shape_resent_and_fresh(_body(before), _body(after))
    assert resent == fresh
    roles = [entry.split(":", 1)[0] for entry in fresh]
    assert roles[-len(after):] == [m["role"] for m in after]
