"""Cross-format translation: the caller's wire body -> neutral `Chat` -> the target's wire body, and
the target's answer -> neutral `Reply` -> the caller's.

Caching intent survives the trip, because losing it silently is the bug users of other gateways
report most after wrong costs: `cache_control` checkpoints become OpenAI `prompt_cache_breakpoint`s
(and the reverse), the TTL maps to the shortest TTL the target offers that is at least as long,
OpenAI's `prompt_cache_key` becomes Anthropic automatic caching, and a checkpoint the target cannot
express is reported in the explanation instead of vanishing. The gateway parses the result with the
target's own parser, so a translated body is validated exactly like a native one. Usage is normalised
by the target's parser and re-emitted by the caller's, so cached and written tokens arrive in the
fields the caller's SDK reads.
"""

from __future__ import annotations

from prefixgate.dialects.call_ids import make_call_ids_unique
from prefixgate.dialects.wire import WireFormat


def translate_body(body: dict, source: WireFormat, target: WireFormat, model: str,
                   stream: bool | None = None) -> tuple[dict, list[str]]:
    """`body` (in `source`'s format) as a `target` body for `model`, plus explanation lines. `stream`,
    when given, overrides the body's own (a format may stream by URL rather than by a body field)."""
    chat = source.read_chat(body)
    make_call_ids_unique(chat)
    if stream is not None:
        chat.stream = stream
    out = target.write_chat(chat, model)
    return out, [f"translate: {source.name} -> {target.name}"] + [f"translate: {n}" for n in chat.notes]


def translate_reply(body: dict, source: WireFormat, target: WireFormat, model: str) -> dict:
    """A whole answer in `source`'s format as `target`'s."""
    return target.write_reply(source.read_reply(body), model)
