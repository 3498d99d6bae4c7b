"""Anthropic's prompt cache: explicit `cache_control` breakpoints over tools -> system -> messages.

What one request does (A1, A2 in the fact sheet):
- each breakpoint looks for the longest cached prefix among its own and the earlier positions within the
  lookback window; the highest hit over all breakpoints is read and every hit entry's timer restarts;
- each breakpoint past the hit whose prefix reaches the model's minimum writes an entry; only the delta
  past the highest hit is billed as a write, split by the TTL of the breakpoint that covers it;
- `input_tokens` is what remains: the tokens after the last written (or hit) breakpoint;
- invalid marker use is a 400, in Anthropic's words.
"""

from __future__ import annotations

from typing import Any

from prefixgate.errors import RequestError
from prefixgate.ir import Block, Conversation, without_markers
from prefixgate.providers.rules import AnthropicRules, ModelRules
from prefixgate.simulation.layout import Breakpoint, Layout, Position, PrefixHasher, canonical
from prefixgate.simulation.store import CacheStore
from prefixgate.tokens import count_tokens
from prefixgate.usage import Usage

# Blocks Anthropic cannot put a breakpoint on; automatic caching walks back past them.
_UNMARKABLE = ("thinking",)
_RUN_KINDS = ("tool_call", "tool_result")


class AnthropicCache:
    """Claude's cache. `provider` scopes its entries (Anthropic's API and Bedrock keep separate caches) and
    `marker` is what its errors call a breakpoint (`cache_control`, or Converse's `cachePoint`)."""

    def __init__(self, rules: AnthropicRules, store: CacheStore, visible_after_s: float | None = None, *,
                 provider: str = "anthropic", marker: str = "cache_control") -> None:
        self.rules = rules
        self.store = store
        self.visible_after_s = rules.entry_visible_after_s if visible_after_s is None else visible_after_s
        self.provider = provider
        self.marker = marker

    def request(self, conv: Conversation, model: ModelRules, tenant: str, now: float) -> Usage:
        """The usage Anthropic would report for `conv` at time `now` (output tokens left at 0)."""
        _check_prewarm(conv)
        layout = self.layout(conv)
        self._check_model(layout.breakpoints, model)
        scope = (self.provider, model.id, tenant)
        positions = layout.positions

        read_at = -1
        for bp in layout.breakpoints:
            for index in self._lookback(positions, bp.position):
                entry = self.store.get(scope, positions[index].key, now)
                if entry is not None:
                    entry.refresh(now)
                    read_at = max(read_at, index)
                    break
        read = layout.tokens_through(read_at)

        writes: dict[str, int] = {}
        covered = read
        for bp in layout.breakpoints:
            end = positions[bp.position].end
            if end <= covered or end < model.min_cache_tokens:
                continue
            writes[bp.ttl] = writes.get(bp.ttl, 0) + end - covered
            self.store.put(scope, positions[bp.position].key, end, bp.ttl, self.rules.ttls[bp.ttl], now,
                           self.visible_after_s)
            covered = end
        return Usage(uncached_input=layout.total - covered, cache_read=read, cache_writes=writes)

    def count(self, conv: Conversation) -> int:
        """What `/v1/messages/count_tokens` answers: every prompt token; counting never caches."""
        return self.layout(conv).total

    # ---- layout and validation ---------------------------------------------------------------

    def layout(self, conv: Conversation) -> Layout:
        hasher = PrefixHasher("anthropic")
        breakpoints: list[Breakpoint] = []
        last_markable: tuple[int, str] | None = None
        message_index = -1
        tiers = _tier_salts(conv)
        # A change of structured-output format invalidates the whole thread (structured-outputs doc).
        hasher.salt(tiers.pop("tools"))
        for seg in conv.segments:
            if seg.role != "tools" and "system" in tiers:
                hasher.salt(tiers.pop("system"))
            if seg.role in ("user", "assistant"):
                message_index += 1
                if "messages" in tiers:
                    hasher.salt(tiers.pop("messages"))
                hasher.salt({"role": seg.role})
            overhead = self.rules.message_overhead_tokens if seg.role in ("user", "assistant") else 0
            for bi, block in enumerate(seg.blocks):
                field = _field(seg.role, message_index, bi, seg.form)
                index = hasher.add(block.native, self._tokens(block) + overhead, block.kind, message_index)
                overhead = 0
                markable = block.kind not in _UNMARKABLE and not (block.kind == "text" and not block.text)
                if block.checkpoint is not None:
                    if not markable:
                        what = "thinking blocks" if block.kind == "thinking" else "empty text blocks"
                        raise RequestError(f"{field}.cache_control: cache_control cannot be set for {what}",
                                           field=f"{field}.cache_control")
                    breakpoints.append(Breakpoint(index, block.checkpoint.ttl, field))
                if markable:
                    last_markable = (index, field)
        self._add_automatic(conv.params.get("cache_control"), breakpoints, last_markable)
        self._check_breakpoints(breakpoints)
        return Layout(hasher.positions, breakpoints)

    def _check_model(self, breakpoints: list[Breakpoint], model: ModelRules) -> None:
        """Some models take no markers, or no 1h ones (Bedrock documents them per model)."""
        for bp in breakpoints:
            if bp.ttl not in model.breakpoint_ttls:
                what = ("does not support prompt caching" if not model.breakpoint_ttls
                        else f"supports ttl {' and '.join(model.breakpoint_ttls)} only, not '{bp.ttl}'")
                raise RequestError(f"{bp.field}.{self.marker}: model {model.id} {what}", field=f"{bp.field}.{self.marker}")

    def _tokens(self, block: Block) -> int:
        if block.kind == "image":
            return self.rules.image_tokens
        if block.kind == "document" and not block.text:
            return self.rules.document_tokens
        if block.kind in ("text", "tool_call", "tool_result", "thinking", "document"):
            return count_tokens(block.text)
        return count_tokens(canonical(without_markers(block.native)))

    def _add_automatic(self, marker: Any, breakpoints: list[Breakpoint], last: tuple[int, str] | None) -> None:
        """Top-level `cache_control`: one breakpoint on the last cacheable block, sharing the 4 slots."""
        if marker is None:
            return
        ttl = _marker_ttl(marker, "cache_control")
        if last is None:
            return
        index, field = last
        same = [bp for bp in breakpoints if bp.position == index]
        if same:
            if same[0].ttl != ttl:
                raise RequestError(
                    f"cache_control: automatic caching with ttl '{ttl}' conflicts with the explicit cache_control "
                    f"with ttl '{same[0].ttl}' on the last block ({same[0].field})", field="cache_control")
            return
        if len(breakpoints) >= self.rules.max_breakpoints:
            raise RequestError(
                f"cache_control: automatic caching needs a free cache_control slot, but {len(breakpoints)} "
                f"explicit cache_control blocks are already set (maximum {self.rules.max_breakpoints})",
                field="cache_control")
        breakpoints.append(Breakpoint(index, ttl, field))

    def _check_breakpoints(self, breakpoints: list[Breakpoint]) -> None:
        if len(breakpoints) > self.rules.max_breakpoints:
            raise RequestError(
                f"A maximum of {self.rules.max_breakpoints} blocks with cache_control may be provided. "
                f"Found {len(breakpoints)}.", field=breakpoints[self.rules.max_breakpoints].field)
        order = sorted(self.rules.ttls, key=self.rules.ttls.__getitem__, reverse=True)
        rank = {ttl: i for i, ttl in enumerate(order)}
        for earlier, later in zip(breakpoints, breakpoints[1:], strict=False):
            if rank[later.ttl] < rank[earlier.ttl]:
                raise RequestError(
                    f"{later.field}.cache_control: a ttl='{later.ttl}' cache_control block must not come after a "
                    f"ttl='{earlier.ttl}' cache_control block. Note that blocks are processed in the following "
                    "order: `tools`, `system`, `messages`.", field=f"{later.field}.cache_control.ttl")

    def _lookback(self, positions: list[Position], start: int) -> list[int]:
        """Positions a breakpoint checks, newest first; a run of tool_use or tool_result blocks is one step."""
        out, steps, i = [start], 1, start
        while i > 0:
            same_run = positions[i].kind == positions[i - 1].kind and positions[i].kind in _RUN_KINDS
            if not same_run:
                if steps == self.rules.lookback_positions:
                    break
                steps += 1
            i -= 1
            out.append(i)
        return out


def _tier_salts(conv: Conversation) -> dict[str, Any]:
    """What each tier's cache depends on beyond its own blocks ("What invalidates what", A2): a change of a
    tier's salt rewrites that tier and every later one."""
    output_config = conv.params.get("output_config") or {}
    output_config = output_config if isinstance(output_config, dict) else {}
    blocks = [b for seg in conv.segments for b in seg.blocks]
    natives = [b.native for b in blocks if isinstance(b.native, dict)]
    citations = any(isinstance(n.get("citations"), dict) and n["citations"].get("enabled") for n in natives)
    web_search = any(str(n.get("type", "")).startswith("web_search") for n in natives)
    return {
        "tools": {"format": output_config.get("format")},
        # Fast mode, and toggling web search or citations, invalidate system and messages.
        "system": {"speed": conv.params.get("speed"), "web_search": web_search, "citations": citations},
        # tool_choice, thinking, effort, and images added or removed anywhere invalidate the messages. Effort
        # set to the default ("high") is no change.
        "messages": {"tool_choice": conv.params.get("tool_choice"), "thinking": conv.params.get("thinking"),
                     "effort": output_config.get("effort") or "high",
                     "images": sum(b.kind == "image" for b in blocks)},
    }


def _field(role: str, message_index: int, block_index: int, form: str) -> str:
    if role == "tools":
        return f"tools.{block_index}"
    if role == "system":
        return "system" if form == "string" else f"system.{block_index}"
    return f"messages.{message_index}" + ("" if form == "string" else f".content.{block_index}")


def _marker_ttl(marker: Any, field: str) -> str:
    if not isinstance(marker, dict):
        raise RequestError(f"{field}: expected an object", field=field)
    if marker.get("type") != "ephemeral":
        raise RequestError(f"{field}.type: must be 'ephemeral'", field=f"{field}.type")
    ttl = marker.get("ttl", "5m")
    if ttl not in ("5m", "1h"):
        raise RequestError(f"{field}.ttl: must be '5m' or '1h', got {ttl!r}", field=f"{field}.ttl")
    return ttl


def _check_prewarm(conv: Conversation) -> None:
    """`max_tokens: 0` pre-warms the cache; Anthropic rejects it with streaming, thinking or forced tools (A2)."""
    if conv.params.get("max_tokens") != 0:
        return
    thinking = conv.params.get("thinking") or {}
    tool_choice = conv.params.get("tool_choice") or {}
    conflicts = [
        ("stream", conv.stream),
        ("thinking", isinstance(thinking, dict) and thinking.get("type") == "enabled"),
        ("tool_choice", isinstance(tool_choice, dict) and tool_choice.get("type") in ("tool", "any")),
        ("output_config.format", isinstance(conv.params.get("output_config"), dict)
         and "format" in conv.params["output_config"]),
    ]
    for name, present in conflicts:
        if present:
            raise RequestError(f"max_tokens: 0 (cache pre-warming) cannot be combined with {name}", field="max_tokens")
