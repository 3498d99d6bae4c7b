"""OpenAI's completions and chat-completions wire format: request bodies in, response JSON and SSE chunks out."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from prefixgate.errors import RequestError
from prefixgate.local_backend.outputs import Logprob, RequestOutput
from prefixgate.local_backend.sampling_params import SamplingParams

# Accepted and ignored when neutral; a non-neutral value is refused rather than silently dropped.
_NEUTRAL = {"presence_penalty": 0, "frequency_penalty": 0, "logit_bias": None, "n": 1, "best_of": 1,
            "echo": False, "suffix": None, "tools": None, "tool_choice": None, "response_format": None}


@dataclass
class ParsedRequest:
    chat: bool
    prompt: Any  # str | {"prompt_token_ids": [...]} | chat messages
    params: SamplingParams
    stream: bool = False
    include_usage: bool = False
    cache_salt: str | None = None
    top_logprobs: int | None = None  # chat: per-token alternatives to show
    priority: int = 0  # vLLM's: lower is served first (admitted first, preempted last)
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:24])
    created: int = field(default_factory=lambda: int(time.time()))


def _bad(name: str, message: str, status: int = 400) -> RequestError:
    return RequestError(f"{name}: {message}", field=name, status=status)


def parse_request(body: Any, *, chat: bool, model_name: str) -> ParsedRequest:
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model", "required, the name of a served model")
    if model != model_name:
        raise _bad("model", f"unknown model {model!r}; this server serves {model_name!r}")
    for name, neutral in _NEUTRAL.items():
        if body.get(name, neutral) not in (neutral, None) and not (name == "response_format"
                                                                    and body[name] == {"type": "text"}):
            raise _bad(name, "is not supported by the local backend")
    prompt = _messages(body.get("messages")) if chat else _prompt(body.get("prompt"))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens")) if chat else body.get("max_tokens", 16)
    top_logprobs = None
    if chat:
        if body.get("logprobs"):
            top_logprobs = body.get("top_logprobs") or 0
            logprobs = top_logprobs
        elif body.get("top_logprobs") is not None:
            raise _bad("top_logprobs", "needs logprobs: true")
        else:
            logprobs = None
    else:
        logprobs = body.get("logprobs")
    stream = body.get("stream", False)
    options = body.get("stream_options") or {}
    if not isinstance(stream, bool) or not isinstance(options, dict):
        raise _bad("stream" if not isinstance(stream, bool) else "stream_options", "has the wrong type")
    salt = body.get("cache_salt")
    if salt is not None and not isinstance(salt, str):
        raise _bad("cache_salt", "must be a string")
    priority = body.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise _bad("priority", "must be an integer (lower is served first)")
    params = SamplingParams(
        temperature=_get(body, "temperature", 1.0), top_p=_get(body, "top_p", 1.0), top_k=_get(body, "top_k", 0),
        max_tokens=max_tokens, min_tokens=_get(body, "min_tokens", 0), stop=body.get("stop"),
        stop_token_ids=_get(body, "stop_token_ids", []), ignore_eos=bool(body.get("ignore_eos", False)),
        seed=body.get("seed"), logprobs=logprobs,
        skip_special_tokens=bool(body.get("skip_special_tokens", True)),
        include_stop_str_in_output=bool(body.get("include_stop_str_in_output", False)))
    if isinstance(params.stop, list) and len(params.stop) > 16:
        raise _bad("stop", "at most 16 stop strings")
    return ParsedRequest(chat, prompt, params, stream, bool(options.get("include_usage")), salt, top_logprobs,
                         priority)


def _get(body: dict, name: str, default: Any) -> Any:
    value = body.get(name)
    return default if value is None else value


def _prompt(prompt: Any) -> Any:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    if isinstance(prompt, str):
        if not prompt:
            raise _bad("prompt", "must not be empty")
        return prompt
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return {"prompt_token_ids": prompt}
    if isinstance(prompt, list) and len(prompt) > 1:
        raise _bad("prompt", "batched prompts are not supported; send one request per prompt")
    raise _bad("prompt", "required: a non-empty string or a list of token ids")


def _messages(messages: Any) -> list[dict[str, str]]:
    if not isinstance(messages, list) or not messages:
        raise _bad("messages", "required: a non-empty list of messages")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _bad(f"messages[{i}]", "each message needs a role")
        content = m.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                    raise _bad(f"messages[{i}].content", "only text content parts are supported")
                parts.append(part["text"])
            content = "".join(parts)
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise _bad(f"messages[{i}].content", "must be a string or a list of text parts")
        out.append({"role": m["role"], "content": content})
    return out


# -- responses ---------------------------------------------------------------------------------------------


def usage(out: RequestOutput) -> dict[str, Any]:
    prompt, completion = len(out.prompt_token_ids), len(out.outputs[0].token_ids)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": out.num_cached_tokens}}


def _finish(reason: str | None) -> str | None:
    return None if reason == "abort" else reason


def _ranked(entry: dict[int, Logprob], k: int) -> list[Logprob]:
    return sorted(entry.values(), key=lambda lp: lp.rank)[:k]


def chat_logprobs(req: ParsedRequest, tokens: list[int], entries: list[dict[int, Logprob]]) -> dict[str, Any]:
    def item(lp: Logprob) -> dict[str, Any]:
        return {"token": lp.decoded_token, "logprob": lp.logprob, "bytes": list(lp.decoded_token.encode())}

    content = []
    for token, entry in zip(tokens, entries, strict=True):
        content.append({**item(entry[token]), "top_logprobs": [item(lp) for lp in _ranked(entry, req.top_logprobs or 0)]})
    return {"content": content}


def completion_logprobs(req: ParsedRequest, tokens: list[int], entries: list[dict[int, Logprob]],
                        offset: int) -> dict[str, Any]:
    k = req.params.logprobs or 0
    strings = [entry[t].decoded_token for t, entry in zip(tokens, entries, strict=True)]
    offsets, at = [], offset
    for s in strings:
        offsets.append(at)
        at += len(s)
    return {"tokens": strings, "token_logprobs": [entry[t].logprob for t, entry in zip(tokens, entries, strict=True)],
            "top_logprobs": [{lp.decoded_token: lp.logprob for lp in _ranked(entry, k)} for entry in entries],
            "text_offset": offsets}


def _logprobs(req: ParsedRequest, tokens: list[int], entries: list[dict[int, Logprob]] | None,
              text_offset: int = 0) -> dict[str, Any] | None:
    if req.params.logprobs is None or entries is None:
        return None
    if req.chat:
        return chat_logprobs(req, tokens, entries)
    return completion_logprobs(req, tokens, entries, text_offset)


def response(req: ParsedRequest, out: RequestOutput, model: str) -> dict[str, Any]:
    c = out.outputs[0]
    choice: dict[str, Any] = {"index": 0, "logprobs": _logprobs(req, c.token_ids, c.logprobs),
                              "finish_reason": _finish(c.finish_reason)}
    if req.chat:
        choice["message"] = {"role": "assistant", "content": c.text}
        kind, prefix = "chat.completion", "chatcmpl-"
    else:
        choice["text"] = c.text
        kind, prefix = "text_completion", "cmpl-"
    return {"id": prefix + req.id, "object": kind, "created": req.created, "model": model, "choices": [choice],
            "usage": usage(out)}


class ChunkWriter:
    """Turns a request's cumulative outputs into OpenAI stream chunks carrying only what is new."""

    def __init__(self, req: ParsedRequest, model: str) -> None:
        self.req, self.model = req, model
        self.sent_text = 0
        self.sent_tokens = 0
        self.kind = "chat.completion.chunk" if req.chat else "text_completion"
        self.id = ("chatcmpl-" if req.chat else "cmpl-") + req.id

    def _chunk(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        chunk = {"id": self.id, "object": self.kind, "created": self.req.created, "model": self.model,
                 "choices": choices}
        if self.req.include_usage:
            chunk["usage"] = None
        return chunk

    def first(self) -> dict[str, Any] | None:
        if not self.req.chat:
            return None
        return self._chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                             "finish_reason": None}])

    def update(self, out: RequestOutput) -> dict[str, Any] | None:
        c = out.outputs[0]
        text = c.text[self.sent_text:]
        tokens = c.token_ids[self.sent_tokens:]
        entries = c.logprobs[self.sent_tokens:] if c.logprobs is not None else None
        finish = _finish(c.finish_reason)
        if not text and finish is None and (entries is None or not tokens):
            return None
        logprobs = _logprobs(self.req, tokens, entries, self.sent_text)
        self.sent_text, self.sent_tokens = len(c.text), len(c.token_ids)
        if self.req.chat:
            delta = {"content": text} if text else {}
            choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish}
        return self._chunk([choice])

    def usage_chunk(self, out: RequestOutput) -> dict[str, Any]:
        return {"id": self.id, "object": self.kind, "created": self.req.created, "model": self.model,
                "choices": [], "usage": usage(out)}
