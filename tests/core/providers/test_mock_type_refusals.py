"""The mock refuses a value of the wrong JSON type where the providers do, in their words, instead of answering:
an Anthropic image/document `source` that is not an object (pydantic's tagged-union wording, as the API words
`...tool_use.input: Input should be a valid dictionary`), OpenAI's `Invalid type for '<param>'` (code
`invalid_type`) for a Chat content part's `file`, a `temperature` or a Responses `prompt`, and Gemini's proto3
JSON parse error for a `fileData.fileUri` or a countTokens generationConfig of the wrong type. Each was a 200."""

from __future__ import annotations

import httpx
import pytest

ANTHROPIC = {"x-api-key": "sk-ant-type-refusals", "anthropic-version": "2023-06-01"}
OPENAI = {"authorization": "Bearer sk-type-refusals"}
GEMINI = {"x-goog-api-key": "AIzaTypeRefusals00000000000000"}
DOCUMENT = [{"role": "user", "content": [{"type": "text", "text": "Summarise."}, {"type": "document", "source": "x"}]}]
SOURCE = "messages.0.content.1.document.source: Input should be a valid dictionary or object to extract fields from"


@pytest.mark.parametrize("path,body", [
    ("/v1/messages", {"model": "claude-sonnet-5-5", "max_tokens": 20, "messages": DOCUMENT}),
    ("/v1/messages/count_tokens", {"model": "claude-sonnet-5-5", "messages": DOCUMENT}),
])
def test_a_claude_document_whose_source_is_not_an_object(mock_server, path, body):
    answer = httpx.post(mock_server[0] + path, headers=ANTHROPIC, json=body)
    assert answer.status_code == 400
    assert answer.json()["error"] == {"type": "invalid_request_error", "message": SOURCE}


@pytest.mark.parametrize("path,body,param,expected,got", [
    ("/v1/chat/completions", {"model": "gpt-5.4", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Read it."}, {"type": "file", "file": "x"}]}]},
     "messages[0].content[1].file", "an object", "a string"),
    ("/v1/chat/completions", {"model": "gpt-5.4", "messages": [{"role": "user", "content": "hi"}], "temperature": "x"},
     "temperature", "a decimal", "a string"),
    ("/v1/responses", {"model": "gpt-5.4", "input": "hi", "temperature": "x"}, "temperature", "a decimal", "a string"),
    ("/v1/responses", {"model": "gpt-5.4", "input": "hi", "prompt": "x"}, "prompt", "an object", "a string"),
    ("/v1/responses", {"model": "gpt-5.4", "input": "hi", "prompt": ["pmpt_1"]}, "prompt", "an object", "an array"),
])
def test_an_openai_value_of_the_wrong_type(mock_server, path, body, param, expected, got):
    answer = httpx.post(mock_server[0] + path, headers=OPENAI, json=body)
    assert answer.status_code == 400
    assert answer.json()["error"] == {
        "message": f"Invalid type for '{param}': expected {expected}, but got {got} instead.",
        "type": "invalid_request_error", "param": param, "code": "invalid_type"}


def _file_part(file_data) -> list[dict]:
    return [{"role": "user", "parts": [{"text": "Summarise."}, {"fileData": file_data}]}]


@pytest.mark.parametrize("method,body,message", [
    ("generateContent", {"contents": _file_part({"fileUri": 5, "mimeType": "application/pdf"})},
     "Invalid value at 'contents[0].parts[1].file_data.file_uri' (TYPE_STRING), 5"),
    ("countTokens", {"contents": _file_part({"file_uri": ["a"]})},
     "Invalid value at 'contents[0].parts[1].file_data.file_uri' (TYPE_STRING), [\"a\"]"),
    ("generateContent", {"contents": _file_part("files/abc")},
     "Invalid value at 'contents[0].parts[1].file_data' "
     '(type.googleapis.com/google.ai.generativelanguage.v1beta.FileData), "files/abc"'),
    ("countTokens", {"generateContentRequest": {"model": "models/gemini-3.5-flash", "contents": _file_part({"fileUri": 5})}},
     "Invalid value at 'generate_content_request.contents[0].parts[1].file_data.file_uri' (TYPE_STRING), 5"),
    ("countTokens", {"generateContentRequest": {"model": "models/gemini-3.5-flash",
                                                "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                                                "generationConfig": {"temperature": "hot"}}},
     "Invalid value at 'generate_content_request.generation_config.temperature' (TYPE_FLOAT), \"hot\""),
    ("countTokens", {"generateContentRequest": {"model": "models/gemini-3.5-flash",
                                                "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                                                "generationConfig": {"thinkingConfig": {"thinkingBudget": "lots"}}}},
     "Invalid value at 'generate_content_request.generation_config.thinking_config.thinking_budget' (TYPE_INT32), "
     "\"lots\""),
])
def test_a_gemini_value_of_the_wrong_type_is_googles_parse_error(mock_server, method, body, message):
    answer = httpx.post(f"{mock_server[0]}/v1beta/models/gemini-3.5-flash:{method}", headers=GEMINI, json=body)
    assert answer.status_code == 400
    assert answer.json()["error"] == {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}


def test_well_typed_values_are_still_answered(mock_server):
    url = mock_server[0]
    ok = [
        httpx.post(url + "/v1/responses", headers=OPENAI, json={"model": "gpt-5.4", "input": "hi", "temperature": 0.5}),
        httpx.post(f"{url}/v1beta/models/gemini-3.5-flash:countTokens", headers=GEMINI, json={
            "generateContentRequest": {"model": "models/gemini-3.5-flash", "contents": [{"role": "user", "parts": [
                {"text": "hi"}]}], "generationConfig": {"temperature": "0.5"}}}),
    ]
    assert [a.status_code for a in ok] == [200, 200]
