"""Which requests and answers the response cache may keep and replay (docs/response-cache.md): a request that
bypasses it, an answer it must not store, and a request whose fresh answer shadow mode compares.
"""

from __future__ import annotations

from typing import Any

from prefixgate.dialects.neutral import Reply, unreadable_args
from prefixgate.dialects.openai import NAME as CHAT
from prefixgate.dialects.wire import WireFormat
from prefixgate.ir import Conversation
from prefixgate.policies.schema import ResponseCachePolicy

# Request fields naming upstream state the request reads and changes: a Responses conversation gains each turn,
# an Anthropic container keeps what its code wrote. A replay would answer from older state and leave it unchanged.
STATEFUL = ("conversation", "container")
# A Responses code_interpreter tool naming a container by id runs in that container: its files as they are now,
# which the code changes (a container given as {"type": "auto"} is a fresh one each time).
CONTAINER_TOOL = "code_interpreter"
LOGPROBS_INCLUDE = "message.output_text.logprobs"      # Responses asks for log probabilities in `include`
# The provider acts for the caller: it calls the caller's MCP servers (Anthropic's `mcp_servers`, a Responses `mcp`
# tool, an Interactions `mcp_server` tool), or its webhook. A replay would report calls as made and make none.
ACTING_FIELDS = ("mcp_servers", "webhook_config")
ACTING_TOOLS = ("mcp", "mcp_server")


def uncacheable(conv: Conversation) -> str | None:
    """Why a request's answer cannot be replayed faithfully (several candidates, log probabilities, a background
    job, upstream state the request reads or changes, calls the provider makes for the caller), or None."""
    params = conv.params
    config = params.get("generationConfig") if isinstance(params.get("generationConfig"), dict) else {}
    if params.get("n") not in (None, 1) or config.get("candidateCount") not in (None, 1):
        return "several candidates asked"
    include = params.get("include") if isinstance(params.get("include"), list) else []
    if params.get("logprobs") or params.get("top_logprobs") or config.get("responseLogprobs") or LOGPROBS_INCLUDE in include:
        return "log probabilities asked"
    if params.get("background"):
        return "a background response"
    tools = [b.native for seg in conv.segments if seg.role == "tools" for b in seg.blocks if isinstance(b.native, dict)]
    if any(params.get(k) is not None for k in STATEFUL) or any(
            t.get("type") == CONTAINER_TOOL and isinstance(t.get("container"), str) for t in tools):
        return "server-side state"
    if conv.dialect == CHAT and params.get("store") is True:     # Chat Completions keeps the completion upstream
        return "a stored completion"        # a replay stores none: GET /v1/chat/completions/{id} and the list lack it
    prompt = params.get("prompt")
    if isinstance(prompt, dict) and prompt.get("version") is None:
        return "an unversioned prompt template"     # its latest version answers, which the operator may publish anew
    if any(params.get(k) for k in ACTING_FIELDS) or any(t.get("type") in ACTING_TOOLS for t in tools):
        return "the provider acts for the caller"
    return None


# Where a format puts its sampling settings, besides the top level: Gemini, Bedrock Converse, the Interactions API.
SAMPLING_BLOCKS = ("generationConfig", "inferenceConfig", "generation_config")


def deterministic(conv: Conversation) -> bool:
    """Whether the request asks for temperature 0 (what shadow mode compares fresh answers for)."""
    blocks = [conv.params.get(k) for k in SAMPLING_BLOCKS]
    return any(isinstance(b, dict) and b.get("temperature") == 0 for b in [conv.params, *blocks])


# What an answer carries beside its tool calls that the caller must send back with them, and that only the exact
# body carries (a format's stream writer has no place for it): Gemini's thought signatures (Gemini 3 answers a 400 to
# a call sent back without one), Claude's signed or redacted thinking blocks (a tool result must follow them),
# Converse's reasoningContent, Responses' encrypted reasoning.
SIGNED_KEYS = frozenset({"thoughtSignature", "thought_signature", "signature", "encrypted_content", "reasoningContent"})


def signed(value: Any) -> bool:
    """Whether an answer (or one of its stream events), parsed, carries reasoning state the caller must send back."""
    if isinstance(value, dict):
        return value.get("type") == "redacted_thinking" or any(
            (k in SIGNED_KEYS and bool(v)) or signed(v) for k, v in value.items())
    return isinstance(value, list) and any(signed(v) for v in value)


def refusal(reply: Reply | None, source: WireFormat | None, policy: ResponseCachePolicy, caller: WireFormat) -> str | None:
    """Why an answer (in `source`'s format, to a caller of `caller`'s) must not be replayed, or None: it must have
    ended by itself, by the format's own finish reason (the neutral one reads some that did not, such as a pause,
    as a stop), in a word a replay can say, and say something: text or a tool call."""
    if reply is None or source is None:
        return "unfinished"
    if (reply.finish == "tool_calls" or reply.tool_calls) and not policy.tool_calls:
        return "tool calls"
    if any(unreadable_args(c.args) for c in reply.tool_calls):
        return "malformed tool call"     # a replay would send some other JSON than the model's text
    if reply.finish not in ("stop", "tool_calls"):
        return reply.finish             # length, content_filter
    if reply.native_finish not in source.natural_finishes:
        return "not a natural finish"       # a metric label: the upstream's own word stays out of it
    said = source.finish_to.get(source.finish_from.get(reply.native_finish or "", ""), reply.native_finish)
    if source is caller and said != reply.native_finish:
        # The caller read the format's own word (Anthropic's stop_sequence, and which sequence), which the format's
        # stream writer, reading the neutral finish, cannot say: a streamed replay would say end_turn.
        return "finish a replay cannot say"
    if not reply.text and not reply.tool_calls:
        return "empty"      # OpenAI's refusals finish normally, their words in `refusal`, which no replay carries
    return None
