"""The cheapest request each provider accepts that keeps a cached prefix alive, and what it costs.

A refresh re-sends the prefix up to the request's last cache checkpoint and asks for as little output as the
provider allows: a cache hit restarts the entry's TTL at no charge beyond the read (Anthropic A1/A2; Bedrock;
OpenAI's and Gemini's implicit caches keep what was recently used). Per wire format:

- Anthropic Messages (also Bedrock InvokeModel, Vertex): the messages through the last `cache_control` (a
  top-level `cache_control` covers the whole body), `max_tokens: 0` (pre-warm: no output; A2). Pre-warm is
  refused with streaming (dropped: it does not touch the cache), with thinking, a forced `tool_choice` or a
  structured-output format, which all salt the cache and so must stay: then `max_tokens: 1` (thinking:
  its budget + 1, the smallest the API takes).
- Bedrock Converse: the messages through the last `cachePoint`, `inferenceConfig.maxTokens: 1`.
- OpenAI Chat Completions: the messages through the last `prompt_cache_breakpoint` part (all of them when
  the cache is implicit), `max_completion_tokens: 1`.
- OpenAI Responses: on models with paid cache writes (GPT-5.6+), `prompt_cache_options.prewarm: true`, which
  fills the cache without output (wire-2026-11.md section 3); otherwise `max_output_tokens: 16`, the minimum.
- Gemini generateContent: with a `cachedContent`, the refresh is a TTL extension, `PATCH cachedContents/{id}`
  with `{"ttl": "<s>s"}` (kind "cachedContents.update"; storage is what it costs); implicit caching: the same
  contents with `generationConfig.maxOutputTokens: 1`.
- Gemini Interactions: no refresh (an interaction cannot be sent without producing output we can bound).
A body with nothing cached (no checkpoint on a provider that needs one) has no refresh: `refresh_body` is None.
Where an upstream refuses a pre-warm, `prewarm=False` asks for the least output instead (`max_tokens: 1`; on
Responses the minimum of 16): the gateway's fallback (`gateway/keepalive.py`).

An *upgrade* (`upgrade_body`, Anthropic Messages only) keeps a conversation through a break its write's TTL does
not cover. A hit restarts an entry's TTL but never lengthens it, so re-sending the same prefix marked 1h only
buys another 5 minutes. The reply the session received is new to the cache, though: the prefix, the reply
marked with the long TTL and a filler user turn, as a pre-warm, read the prefix and write the reply into a new
entry that lives the long TTL, and the session's next request (the same prefix, the same reply, its new turn)
reads it. It costs a read of the prefix and the reply's tokens at the long TTL's write price, which the next
request would have paid at the short one anyway. The conversation's earlier marks become long too (a hit there
only restarts it; a shorter mark before a longer one is refused), and at the 4-mark limit the last gives way
(the new mark looks back 20 blocks and still finds its entry). The static prefix's marks (tools, system) are
taken off: its own entry is left to its own keep-alive decision, and once it lapses the next request marks it
again for free (a write is billed only past the longest hit, here the conversation's). Only a reply of text
blocks is re-sent: a tool call needs its result next, and thinking changes what is cached.

Public API (stable):
    Refresh(kind, body, name=None, output_tokens=0, prewarm=False)
    refresh_body(provider, body, model=None, ttl_s=3600.0, catalog=None, prewarm=True) -> Refresh | None
    refresh_cost(refresh, price, cached_tokens, uncached_tokens=0, ttl_s=3600.0) -> Decimal   (USD)
    upgrade_body(provider, body, reply, ttl="1h") -> Refresh | None
    upgrade_cost(upgrade, price, cached_tokens, reply_tokens, short, long) -> (bill, net)   (USD)
    reply_content(provider, response) -> list | None
    static_mark(conv) -> (block index, Checkpoint) | None   (the static prefix's deepest checkpoint)
    through(provider, body, index, model=None) -> dict   (the body with its checkpoints after that block taken off)
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from prefixgate.cache_planner.rewrite import STATIC_ROLES
from prefixgate.cost import MTOK, Price
from prefixgate.dialects import request_dialect
from prefixgate.dialects.anthropic import reply_blocks
from prefixgate.ir import Checkpoint, Conversation
from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.providers.rules import Catalog

RESPONSES_MIN_OUTPUT = 16   # Responses rejects max_output_tokens below 16
FILLER = "."                # the user turn a refresh needs when only the system prompt and tools are cached
FILLER_TOKENS = 4           # the filler turn's input tokens with its turn's framing, about (for pricing ahead)
MAX_MARKS = 4               # Anthropic's breakpoints per request


@dataclass(frozen=True)
class Refresh:
    kind: Literal["generate", "cachedContents.update"]
    body: dict                    # a complete request body (generate) or the PATCH body (TTL extension)
    name: str | None = None       # the cachedContents name a TTL extension patches
    output_tokens: int = 0        # output tokens billed at most
    prewarm: bool = False         # the provider produces no output for it


def refresh_body(provider: str, body: dict, model: str | None = None, ttl_s: float = 3600.0,
                 catalog: Catalog | None = None, prewarm: bool = True) -> Refresh | None:
    """The cheapest refresh of the prefix `body` cached, or None when it caches nothing a refresh could keep.
    `model`: for providers that name it in the URL (Gemini, Bedrock); `ttl_s`: a TTL extension's new TTL;
    `prewarm=False`: the least output instead of a pre-warm (where the upstream refused one)."""
    name = request_dialect(provider, body).name
    if name in ("anthropic", "bedrock_invoke", "vertex_anthropic"):
        return _anthropic(body, prewarm)
    if name == "bedrock_converse":
        return _converse(body)
    if name == "openai":
        return _chat(body)
    if name == "responses":
        return _responses(body, model, catalog, prewarm)
    if name in ("gemini", "vertex_gemini"):
        return _gemini(body, ttl_s)
    return None


def static_mark(conv: Conversation) -> tuple[int, Checkpoint] | None:
    """The static prefix's deepest checkpoint (its block index, and itself), or None. Its entry on its own serves
    a session that starts. Reads only the leading static segments (`rewrite.conversation_start`'s)."""
    index, found = 0, None
    for seg in conv.segments:
        if seg.role not in STATIC_ROLES:
            break
        for block in seg.blocks:
            if block.checkpoint is not None:
                found = (index, block.checkpoint)
            index += 1
    return found


def through(provider: str, body: dict, index: int, model: str | None = None) -> dict:
    """`body` with its checkpoints after block `index` taken off, so that its refresh (`refresh_body`: through the
    last checkpoint) keeps that block's entry and no more. `body` itself is not changed."""
    dialect = request_dialect(provider, body)
    conv = dialect.parse_request(body, model=model)  # freshly parsed: ours to change
    later = [b for b in conv.blocks()[index + 1:] if b.checkpoint is not None]
    if not later:
        return body
    for block in later:
        block.checkpoint = None
    return dialect.encode_request(conv)


def refresh_cost(refresh: Refresh, price: Price, cached_tokens: int, uncached_tokens: int = 0,
                 ttl_s: float = 3600.0) -> Decimal:
    """What the refresh is expected to cost in USD: the cached prefix read, any uncached tokens (a filler turn,
    an implicit cache's tail past its last step) and the output it may produce; a TTL extension stores the
    cache's tokens for `ttl_s` more seconds."""
    if refresh.kind == "cachedContents.update":
        return price.storage_per_hour * cached_tokens * Decimal(str(ttl_s)) / Decimal(3600) / MTOK
    return (price.cache_read * cached_tokens + price.input * uncached_tokens + price.output * refresh.output_tokens) / MTOK


def _through_last(items: list, marked: Callable[[Any], bool], parts: Callable[[Any], Any]) -> list | None:
    """`items` (messages) cut after the last marked part: the message holding it keeps its parts up to it."""
    for i in range(len(items) - 1, -1, -1):
        content = parts(items[i])
        if isinstance(content, list):
            for j in range(len(content) - 1, -1, -1):
                if marked(content[j]):
                    last = {**items[i], _content_key(items[i]): content[: j + 1]}
                    return [*items[:i], last]
    return None


def _content_key(message: dict) -> str:
    return "content" if "content" in message else "parts"


def _has(key: str) -> Callable[[Any], bool]:
    return lambda part: isinstance(part, dict) and key in part


def _anthropic(body: dict, prewarm: bool) -> Refresh | None:
    out = copy.deepcopy(body)
    out.pop("stream", None)
    messages = out.get("messages") or []
    if out.get("cache_control") is None:
        cut = _through_last(messages, _has("cache_control"), lambda m: m.get("content"))
        if cut is None:
            static = [b for b in [*(out.get("tools") or []), *(out.get("system") or [] if isinstance(out.get("system"), list) else [])]
                      if isinstance(b, dict) and "cache_control" in b]
            if not static:
                return None
            cut = [{"role": "user", "content": FILLER}]
        out["messages"] = cut
    last = out["messages"][-1] if out["messages"] else {}
    content = last.get("content") if isinstance(last.get("content"), list) else []
    if last.get("role") == "assistant" and not any(_is_call(b) for b in content):
        # Cut after a marked reply: a request must end on a user turn (newer models refuse a prefill).
        out["messages"] = [*out["messages"], {"role": "user", "content": FILLER}]
    return _least_output(out, prewarm)


def _is_call(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use")


def _least_output(out: dict, prewarm: bool = True) -> Refresh:
    """`out` (an Anthropic body) asking for as little output as the API takes (`prewarm=False`: at least 1)."""
    thinking = out.get("thinking") if isinstance(out.get("thinking"), dict) else {}
    forced = isinstance(out.get("tool_choice"), dict) and out["tool_choice"].get("type") in ("tool", "any")
    formatted = isinstance(out.get("output_config"), dict) and "format" in out["output_config"]
    if thinking.get("type") == "enabled":
        out["max_tokens"] = int(thinking.get("budget_tokens", 1024)) + 1
        return Refresh("generate", out, output_tokens=out["max_tokens"])
    if forced or formatted or not prewarm:
        out["max_tokens"] = 1
        return Refresh("generate", out, output_tokens=1)
    out["max_tokens"] = 0
    return Refresh("generate", out, prewarm=True)


def upgrade_cost(upgrade: Refresh, price: Price, cached_tokens: int, reply_tokens: int, short: str,
                 long: str) -> tuple[Decimal, Decimal]:
    """What an upgrade is billed (the prefix read, the filler turn, any output, the reply written with `long`),
    and what it costs net: the session's next request then reads the reply instead of writing it with `short`."""
    bill = refresh_cost(upgrade, price, cached_tokens, uncached_tokens=FILLER_TOKENS) + reply_tokens * price.write_price(long) / MTOK
    return bill, bill + reply_tokens * (price.cache_read - price.write_price(short)) / MTOK


def reply_content(provider: str, response: dict | None) -> list | None:
    """The content blocks of a recorded answer as the client sends them back, when an upgrade may re-send them
    (an Anthropic answer of text blocks)."""
    return reply_blocks(response) if provider == "anthropic" else None


def upgrade_body(provider: str, body: dict, reply: list, ttl: str = "1h") -> Refresh | None:
    """The pre-warm that writes `reply` (`reply_content`) after the prefix `body` caches, marked `ttl`; None
    where it cannot be sent (another wire format, thinking, a prefix with no mark, a body ending on a reply)."""
    if request_dialect(provider, body).name != "anthropic" or not reply:
        return None
    out = copy.deepcopy(body)
    out.pop("stream", None)
    thinking = out.get("thinking") if isinstance(out.get("thinking"), dict) else {}
    messages = out.get("messages")
    if thinking.get("type") == "enabled" or out.get("cache_control") is not None or not isinstance(messages, list):
        return None
    cut = _through_last(messages, _has("cache_control"), lambda m: m.get("content"))
    if cut is None or cut != messages or cut[-1].get("role") != "user":
        return None  # the reply must follow the whole conversation, marked at its very end, as the next turn sends it
    long = {"type": "ephemeral", "ttl": ttl}
    marked = [b for m in cut if isinstance(m.get("content"), list) for b in m["content"]
              if isinstance(b, dict) and "cache_control" in b]
    static = [b for b in [*(out.get("tools") or []), *(out.get("system") if isinstance(out.get("system"), list) else [])]
              if isinstance(b, dict) and "cache_control" in b]
    for block in static:
        del block["cache_control"]
    if len(marked) >= MAX_MARKS:
        del marked[-1]["cache_control"]
        marked = marked[:-1]
    for block in marked:
        block["cache_control"] = dict(long)
    answer = copy.deepcopy(reply)
    answer[-1]["cache_control"] = dict(long)
    out["messages"] = [*cut, {"role": "assistant", "content": answer}, {"role": "user", "content": FILLER}]
    return _least_output(out)


def _converse(body: dict) -> Refresh | None:
    out = copy.deepcopy(body)
    cut = _through_last(out.get("messages") or [], _has("cachePoint"), lambda m: m.get("content"))
    if cut is None:
        tools = (out.get("toolConfig") or {}).get("tools") or []
        if not any(_has("cachePoint")(b) for b in [*(out.get("system") or []), *tools]):
            return None
        cut = [{"role": "user", "content": [{"text": FILLER}]}]
    out["messages"] = cut
    out["inferenceConfig"] = {**(out.get("inferenceConfig") or {}), "maxTokens": 1}
    return Refresh("generate", out, output_tokens=1)


def _chat(body: dict) -> Refresh:
    out = copy.deepcopy(body)
    for key in ("stream", "stream_options", "max_tokens", "n"):
        out.pop(key, None)
    cut = _through_last(out.get("messages") or [], _has("prompt_cache_breakpoint"), lambda m: m.get("content"))
    if cut is not None:
        out["messages"] = cut
    out["max_completion_tokens"] = 1
    return Refresh("generate", out, output_tokens=1)


def _responses(body: dict, model: str | None, catalog: Catalog | None, prewarm: bool = True) -> Refresh:
    out = copy.deepcopy(body)
    out.pop("stream", None)
    options = out.get("prompt_cache_options") if isinstance(out.get("prompt_cache_options"), dict) else {}
    # In implicit mode (the default) the entry ends at OpenAI's own breakpoint, the newest user or tool message
    # (an agent loop's string tool output, which no explicit one can mark): the refresh keeps the whole input.
    if isinstance(out.get("input"), list) and options.get("mode") == "explicit":
        cut = _through_last(out["input"], _has("prompt_cache_breakpoint"), lambda m: m.get("content"))
        if cut is not None:
            out["input"] = cut
    try:
        regime = resolve_model("openai", model or str(out.get("model", "")), catalog).regime
    except UnknownModel:
        regime = ""
    if regime == "breakpoints" and prewarm:
        out["prompt_cache_options"] = {**(out.get("prompt_cache_options") or {}), "prewarm": True}
        return Refresh("generate", out, prewarm=True)
    out["max_output_tokens"] = RESPONSES_MIN_OUTPUT
    return Refresh("generate", out, output_tokens=RESPONSES_MIN_OUTPUT)


def _gemini(body: dict, ttl_s: float) -> Refresh:
    named = body.get("cachedContent", body.get("cached_content"))
    if isinstance(named, str) and named:
        return Refresh("cachedContents.update", {"ttl": f"{int(ttl_s)}s"}, name=named)
    out = copy.deepcopy(body)
    key = "generationConfig" if "generationConfig" in out or "generation_config" not in out else "generation_config"
    out[key] = {**(out.get(key) or {}), "maxOutputTokens": 1}
    return Refresh("generate", out, output_tokens=1)
