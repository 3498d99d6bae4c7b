"""The mock's generateContent refuses a generationConfig value of the wrong JSON type with the Gemini API's proto3
JSON parse error (400 INVALID_ARGUMENT `Invalid value at '<proto path>' (<type>), <value>`), as Google does; a
generationConfig that was not an object was a 500 here, and a string temperature or thinking budget was answered."""

from __future__ import annotations

import httpx
import pytest

KEY = {"x-goog-api-key": "AIzaMockConfigTypes0000000000"}
HI = [{"role": "user", "parts": [{"text": "hi"}]}]


@pytest.mark.parametrize("config,message", [
    ("fast", "Invalid value at 'generation_config' (type.googleapis.com/google.ai.generativelanguage.v1beta."
             'GenerationConfig), "fast"'),
    ({"temperature": "hot"}, "Invalid value at 'generation_config.temperature' (TYPE_FLOAT), \"hot\""),
    ({"topK": [5]}, "Invalid value at 'generation_config.top_k' (TYPE_INT32), [5]"),
    ({"thinkingConfig": "deep"}, "Invalid value at 'generation_config.thinking_config' (type.googleapis.com/"
                                 'google.ai.generativelanguage.v1beta.ThinkingConfig), "deep"'),
    ({"thinkingConfig": {"thinkingBudget": "lots"}},
     "Invalid value at 'generation_config.thinking_config.thinking_budget' (TYPE_INT32), \"lots\""),
])
def test_a_config_value_of_the_wrong_type_is_googles_parse_error(mock_server, config, message):
    url, _ = mock_server
    answer = httpx.post(f"{url}/v1beta/models/gemini-3.5-flash:generateContent", headers=KEY,
                        json={"contents": HI, "generationConfig": config})
    assert answer.status_code == 400
    assert answer.json()["error"] == {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}


def test_a_number_written_as_a_string_is_taken(mock_server):
    url, _ = mock_server
    answer = httpx.post(f"{url}/v1beta/models/gemini-3.5-flash:generateContent", headers=KEY,
                        json={"contents": HI, "generationConfig": {"temperature": "0.5", "topK": "5"}})
    assert answer.status_code == 200
