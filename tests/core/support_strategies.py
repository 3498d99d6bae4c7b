"""Hypothesis strategies for valid request bodies of each dialect, unknown fields included."""

from __future__ import annotations

from hypothesis import strategies as st

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
json_scalar = st.none() | st.booleans() | st.integers(-10**6, 10**6) | text
json_value = st.recursive(json_scalar, lambda c: st.lists(c, max_size=3) | st.dictionaries(text, c, max_size=3), max_leaves=8)
# Fields no dialect knows: they must pass through untouched, wherever they appear.
unknown = st.dictionaries(st.sampled_from(["x_future", "zz_extra", "vendor_opt"]), json_value, max_size=2)


def _with_unknown(d: st.SearchStrategy[dict]) -> st.SearchStrategy[dict]:
    return st.tuples(d, unknown).map(lambda p: {**p[0], **p[1]})


# ---- Anthropic ----
an_cc = st.sampled_from([{}, {"cache_control": {"type": "ephemeral"}}, {"cache_control": {"type": "ephemeral", "ttl": "1h"}}])
an_text = st.tuples(text, an_cc).map(lambda p: {"type": "text", "text": p[0], **p[1]})
an_image = st.just({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}})
an_doc = text.map(lambda t: {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": t}})
an_tool_use = st.tuples(text, json_value).map(lambda p: {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": p[1]}})
an_tool_result = st.tuples(text, st.booleans()).map(
    lambda p: {"type": "tool_result", "tool_use_id": "toolu_1", "content": p[0] if p[1] else [{"type": "text", "text": p[0]}]})
an_thinking = text.map(lambda t: {"type": "thinking", "thinking": t, "signature": "s"})
an_block = _with_unknown(st.one_of(an_text, an_image, an_doc, an_tool_use, an_tool_result, an_thinking))
an_content = text | st.lists(an_block, min_size=1, max_size=4)
an_message = st.tuples(st.sampled_from(["user", "assistant"]), an_content).map(lambda p: {"role": p[0], "content": p[1]})
an_tool = st.tuples(text, an_cc).map(lambda p: {"name": "t", "description": p[0], "input_schema": {"type": "object"}, **p[1]})
anthropic_body = st.fixed_dictionaries(
    {"model": st.sampled_from(["claude-opus-5", "claude-haiku-4-5"]), "max_tokens": st.integers(0, 4096),
     "messages": st.lists(an_message, min_size=1, max_size=5)},
    optional={"system": text | st.lists(an_text, min_size=1, max_size=3), "tools": st.lists(an_tool, max_size=3),
              "stream": st.booleans(), "metadata": st.just({"user_id": "u"}), "stop_sequences": st.lists(text, max_size=2)},
).flatmap(lambda d: _with_unknown(st.permutations(list(d.items())).map(dict)))

# ---- OpenAI ----
oa_part = _with_unknown(st.one_of(
    text.map(lambda t: {"type": "text", "text": t}),
    st.just({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}}),
    text.map(lambda t: {"type": "text", "text": t, "prompt_cache_breakpoint": {"mode": "explicit"}}),
))
oa_content = text | st.lists(oa_part, min_size=1, max_size=3)
oa_call = json_value.map(lambda v: {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": str(v)}})
oa_message = st.one_of(
    st.tuples(st.sampled_from(["system", "developer", "user"]), oa_content).map(lambda p: {"role": p[0], "content": p[1]}),
    st.tuples(oa_content | st.none(), st.lists(oa_call, max_size=2)).map(
        lambda p: {"role": "assistant", "content": p[0], **({"tool_calls": p[1]} if p[1] else {})}),
    text.map(lambda t: {"role": "tool", "tool_call_id": "call_1", "content": t}),
    st.tuples(text, text).map(lambda p: {"role": "user", "content": p[0], "name": "n" + p[1][:3]}),
).flatmap(lambda m: _with_unknown(st.just(m)))
oa_tool = text.map(lambda t: {"type": "function", "function": {"name": "f", "description": t, "parameters": {"type": "object"}}})
openai_body = st.fixed_dictionaries(
    {"model": st.sampled_from(["gpt-5.4", "gpt-5.6-sol"]), "messages": st.lists(oa_message, min_size=1, max_size=5)},
    optional={"tools": st.lists(oa_tool, max_size=3), "stream": st.booleans(), "temperature": st.floats(0, 2),
              "response_format": st.just({"type": "json_schema", "json_schema": {"name": "o", "schema": {"type": "object"}}}),
              "prompt_cache_key": text, "max_completion_tokens": st.integers(1, 1000), "user": text},
).flatmap(lambda d: _with_unknown(st.permutations(list(d.items())).map(dict)))

# ---- Gemini ----
ge_part = _with_unknown(st.one_of(
    text.map(lambda t: {"text": t}),
    st.just({"inlineData": {"mimeType": "image/png", "data": "AAAA"}}),
    json_value.map(lambda v: {"functionCall": {"name": "f", "args": {"a": v}}}),
    json_value.map(lambda v: {"functionResponse": {"name": "f", "response": {"r": v}}}),
    text.map(lambda t: {"text": t, "thought": True}),
))
ge_content = st.tuples(st.sampled_from(["user", "model"]), st.lists(ge_part, min_size=1, max_size=3)).map(
    lambda p: {"role": p[0], "parts": p[1]})
gemini_body = st.fixed_dictionaries(
    {"contents": st.lists(ge_content, min_size=1, max_size=4)},
    optional={"systemInstruction": st.lists(text.map(lambda t: {"text": t}), min_size=1, max_size=2).map(lambda ps: {"parts": ps}),
              "tools": st.just([{"functionDeclarations": [{"name": "f", "description": "d"}]}]),
              "generationConfig": st.just({"temperature": 0.5, "maxOutputTokens": 10}),
              "safetySettings": st.just([{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}])},
).flatmap(lambda d: _with_unknown(st.permutations(list(d.items())).map(dict)))
