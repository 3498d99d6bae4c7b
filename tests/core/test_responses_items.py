"""Responses input items: every item type the installed openai SDK can send is accepted, and an item's `id` is not
prompt content (Codex gives each request's items new ids)."""

from __future__ import annotations

import typing

from openai.types.responses import response_input_item_param

from prefixgate.dialects import responses as rs


def _literals(annotation: object) -> set[str]:
    out: set[str] = set()
    for arg in typing.get_args(annotation):
        out |= {arg} if isinstance(arg, str) else _literals(arg)
    return out


def test_every_input_item_type_the_sdk_sends_is_accepted():
    sdk = set()
    for item in typing.get_args(response_input_item_param.ResponseInputItemParam):
        sdk |= _literals(typing.get_type_hints(item).get("type"))
    assert sdk and not sdk - set(rs.ITEM_TYPES), sorted(sdk - set(rs.ITEM_TYPES))


def test_items_that_differ_only_in_their_ids_are_the_same_prefix():
    def body(n: int) -> dict:
        return {"model": "gpt-6.2-sol", "input": [
            {"type": "additional_tools", "id": f"at_{n}", "role": "developer",
             "tools": [{"type": "function", "name": "grep", "parameters": {"type": "object"}}]},
            {"type": "message", "id": f"msg_{n}", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
            {"type": "message", "role": "user", "content": "hi"}]}
    first, second = rs.parse_request(body(1)), rs.parse_request(body(2))
    assert first.prefix_keys() == second.prefix_keys()
    assert rs.encode_request(second)["input"][0]["id"] == "at_2"      # still sent as the caller sent it
