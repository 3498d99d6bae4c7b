"""proto3 JSON's field names (`dialects/proto_json.py`): a proto name's lowerCamelCase is the one protobuf's own JSON
mapping gives it (google.protobuf's `_ToJsonName`, the C++ `ToJsonName`), digits and repeated underscores included,
and a Gemini body's `generationConfig` read in either spelling."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor

from prefixgate.dialects import gemini
from prefixgate.dialects.proto_json import camel, one_spelling
from prefixgate.errors import RequestError

NAMES = ["cached_content", "max_output_tokens", "a_1b", "version_2_alpha", "a__b", "trailing_", "_leading", "a_B",
         "already", "fileData", "x_abcDef"]


@pytest.mark.parametrize("name", NAMES)
def test_camel_is_protobufs_json_name(name: str) -> None:
    assert camel(name) == descriptor._ToJsonName(name)


def test_a_field_spelt_both_ways_by_protobufs_rule_is_refused() -> None:
    with pytest.raises(RequestError, match="given twice"):
        one_spelling({"contents": [{"parts": [{"a1b": 1, "a_1b": 2}]}]})
    one_spelling({"contents": [{"parts": [{"a1B": 1, "a_1b": 2}]}]})     # two fields to protobuf: not one twice


@pytest.mark.parametrize("config", [{"maxOutputTokens": 7, "topK": 3, "stopSequences": ["x"]},
                                    {"max_output_tokens": 7, "top_k": 3, "stop_sequences": ["x"]}])
@pytest.mark.parametrize("key", ["generationConfig", "generation_config"])
def test_generation_config_is_read_in_either_spelling(config: dict, key: str) -> None:
    chat = gemini.read_chat({"contents": [{"role": "user", "parts": [{"text": "hi"}]}], key: config})
    assert (chat.max_tokens, chat.stop) == (7, ["x"])
