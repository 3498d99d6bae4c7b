"""OpenAI's prompt cache, in its two regimes (O1-O4 in the fact sheet).

- `implicit` (gpt-4o .. gpt-5.5): every prompt of 1024+ tokens is cached for free; a later prompt reads
  its longest cached prefix, counted in 128-token steps (1024, 1152, ...). Entries live per retention
  policy (`in_memory`: minutes idle; `24h`: a day).
- `breakpoints` (GPT-5.6+): a prefix is cached only at breakpoints (one implicit at the end of the newest
  non-assistant message unless `prompt_cache_options.mode` is `explicit`, plus `prompt_cache_breakpoint`
  parts); at most 4 written per request, writes billed at 1.25x, reads match exactly at one of the latest
  80 breakpoints in the conversation (this request's, or an earlier request's it still contains), with no
  rounding.

Both regimes route by a hash of the first ~256 tokens plus `prompt_cache_key`: about 15 requests a minute
fit one machine, and each extra machine starts with a cold cache.
"""

from __future__ import annotations

import hashlib
import math
from array import array
from collections import defaultdict, deque
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from prefixgate.dialects.responses import UNRENDERED
from prefixgate.errors import RequestError
from prefixgate.ir import Block, Conversation, without_markers
from prefixgate.providers.rules import ModelRules, OpenAIRules
from prefixgate.simulation.layout import Breakpoint, Layout, PrefixHasher, canonical
from prefixgate.simulation.store import CacheStore
from prefixgate.tokens import encoder, encoding_for
from prefixgate.usage import Usage

_SYNTHETIC = 1 << 24  # ids for non-text content and message markers, outside every real vocabulary
ROUTING_WINDOW_S = 60.0


@dataclass
class Prompt:
    """A chat request as OpenAI's cache sees it: the token stream and its block positions."""

    ids: array = field(default_factory=lambda: array("l"))
    layout: Layout = field(default_factory=Layout)
    last_eligible: int = -1        # position of the end of the newest non-assistant message
    breakpoints: list[Breakpoint] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.layout.total


class OpenAICache:
    def __init__(self, rules: OpenAIRules, store: CacheStore) -> None:
        self.rules = rules
        self.store = store
        self._recent: dict[str, deque[float]] = defaultdict(deque)
        self._served: dict[str, int] = defaultdict(int)

    def request(self, conv: Conversation, model: ModelRules, tenant: str, now: float) -> Usage:
        """The usage OpenAI would report for `conv` at `now` (output tokens left at 0)."""
        prompt = self.prompt(conv, model)
        # A machine is picked by route (prefix head + key); a different route means a different machine.
        scope = ("openai", model.id, tenant, *self._machine(conv, model, tenant, prompt, now))
        if model.regime == "breakpoints":
            return self._with_breakpoints(conv, model, prompt, scope, now)
        return self._implicit(conv, model, prompt, scope, now)

    def count(self, conv: Conversation, model: ModelRules) -> int:
        return self.prompt(conv, model).total

    # ---- pre-5.6: automatic, free writes, 128-token steps ----------------------------------------

    def _implicit(self, conv: Conversation, model: ModelRules, prompt: Prompt, scope: tuple, now: float) -> Usage:
        retention = _retention(conv.params.get("prompt_cache_retention"), model, self.rules)
        ttl_s = self.rules.extended_retention_s if retention == "24h" else self.rules.in_memory_idle_s
        steps = self._steps(prompt.ids, model.min_cache_tokens, model.increment_tokens or self.rules.increment_tokens)
        read = 0
        for length, key in reversed(steps):
            entry = self.store.get(scope, key, now)
            if entry is not None:
                read = length
                break
        for length, key in steps:
            # Writes are free and unreported; every cached step's idle timer restarts.
            self.store.put(scope, key, length, retention, ttl_s, now)
        return Usage(uncached_input=prompt.total - read, cache_read=read)

    def _steps(self, ids: array, minimum: int, inc: int) -> list[tuple[int, str]]:
        """(prefix length, key) at every cacheable length: minimum, minimum + inc, ... up to the prompt."""
        h = hashlib.sha256(b"openai")
        out, done = [], 0
        length = max(minimum, inc)
        while length <= len(ids):
            h.update(ids[done:length].tobytes())
            done = length
            out.append((length, h.copy().hexdigest()[:32]))
            length += inc
        return out

    # ---- GPT-5.6+: breakpoints and paid writes ---------------------------------------------------

    def _with_breakpoints(self, conv: Conversation, model: ModelRules, prompt: Prompt, scope: tuple,
                          now: float) -> Usage:
        default_ttl = self.rules.default_breakpoint_ttl
        mode, ttl = _cache_options(conv.params.get("prompt_cache_options"), model,
                                   default_ttl if default_ttl in model.breakpoint_ttls else model.breakpoint_ttls[0])
        explicit = [bp.position for bp in prompt.breakpoints]
        ttl_at = {bp.position: bp.ttl or ttl for bp in prompt.breakpoints}
        for bp in prompt.breakpoints:
            if bp.ttl and bp.ttl not in model.breakpoint_ttls:
                raise RequestError(f"{bp.field}.prompt_cache_breakpoint.ttl: {bp.ttl!r} is not supported with model "
                                   f"{model.id}; supported: {', '.join(model.breakpoint_ttls)}",
                                   field=f"{bp.field}.prompt_cache_breakpoint.ttl")
        implicit = [prompt.last_eligible] if mode == "implicit" and prompt.last_eligible >= 0 else []
        quota = self.rules.max_breakpoint_writes - len(implicit)
        to_write = sorted(set(implicit + explicit[-quota:] if quota > 0 else implicit))
        if mode == "explicit" and not explicit:
            return Usage(uncached_input=prompt.total)
        positions = prompt.layout.positions
        # Matching considers the latest breakpoints *in the conversation*: this request's own and those earlier
        # requests wrote, wherever this prompt still contains them (O3: "up to the latest 80 breakpoints in the
        # conversation, without a content-block lookback limit"; O1: later requests check breakpoints from the
        # back for the longest cached prefix). A growing conversation thus reads its last turn's implicit
        # breakpoint, which its newest message has moved past: 96.7% of input was read over 73k GPT-5.6 calls of
        # Codex, which cannot mark breakpoints (https://github.com/thibautrey/multivibe/wiki/prompt-cache-breakpoint-audit).
        # The match is exact: a prefix nobody marked is never read (O11, O12).
        marked = set(explicit + implicit)
        read, seen = 0, 0
        for index in range(len(positions) - 1, -1, -1):
            entry = self.store.get(scope, positions[index].key, now)
            if entry is None and index not in marked:
                continue
            seen += 1
            if seen > self.rules.breakpoint_match_window:
                break
            if entry is not None:
                entry.refresh(now)
                read = positions[index].end
                break
        writes: dict[str, int] = {}
        covered = read
        for index in to_write:
            end = positions[index].end
            if end <= covered or end < model.min_cache_tokens:
                continue
            # Each breakpoint writes what lies past the last one with its own lifetime, billed at that TTL's price.
            lifetime = ttl_at.get(index, ttl)
            writes[lifetime] = writes.get(lifetime, 0) + end - covered
            self.store.put(scope, positions[index].key, end, lifetime, self.rules.breakpoint_ttls[lifetime], now)
            covered = end
        return Usage(uncached_input=prompt.total - read - sum(writes.values()), cache_read=read, cache_writes=writes)

    # ---- routing --------------------------------------------------------------------------------

    def _machine(self, conv: Conversation, model: ModelRules, tenant: str, prompt: Prompt,
                 now: float) -> tuple[str, int]:
        key = conv.params.get("prompt_cache_key")
        if key is not None and not isinstance(key, str):
            raise RequestError("prompt_cache_key: expected a string", field="prompt_cache_key")
        if key is None and isinstance(conv.params.get("user"), str):
            key = conv.params["user"]  # before prompt_cache_key, `user` played this role
        head = prompt.ids[: self.rules.routing_prefix_tokens].tobytes()
        route = hashlib.sha256(f"{tenant}\0{model.id}\0{key}\0".encode() + head).hexdigest()
        if not self.rules.overflow_rpm:
            return route, 0
        recent = self._recent[route]
        while recent and recent[0] <= now - ROUTING_WINDOW_S:
            recent.popleft()
        recent.append(now)
        machines = math.ceil(len(recent) / self.rules.overflow_rpm)
        served = self._served[route]
        self._served[route] = served + 1
        return route, served % machines

    # ---- the prompt as tokens and positions -------------------------------------------------------

    def prompt(self, conv: Conversation, model: ModelRules) -> Prompt:
        encode = _encoder(encoding_for("openai", model.id))
        prompt = Prompt()
        hasher = PrefixHasher("openai")
        message_index = -1
        # Where a part sits in the body, for errors: `messages.i` (Chat) or `input.i` (Responses, whose string
        # `instructions` come first in the prompt but are no item of `input`).
        root, item = ("input", -1) if conv.dialect == "responses" else ("messages", -1)
        for seg in conv.segments:
            if seg.role in ("tools", "schema"):
                for block in seg.blocks:
                    self._add(prompt, hasher, block.native, encode(canonical(block.native)), block.kind, -1)
                continue
            message_index += 1
            item += seg.blocks_field != "instructions"
            # A message item's `id` is not what the model reads either (Codex sends new ones on each request).
            header = {k: v for k, v in (seg.native or {}).items() if k not in ("content", "tool_calls", *UNRENDERED)}
            marker = [_SYNTHETIC + _small_hash(seg.role) % 1000 + i for i in range(self.rules.message_overhead_tokens)]
            index = self._add(prompt, hasher, header, marker, "message", message_index)
            for bi, block in enumerate(seg.blocks):
                field_name = f"{root}.{item}.content.{bi}"
                index = self._add(prompt, hasher, _rendered(block), self._block_ids(block, encode), block.kind,
                                  message_index)
                if block.checkpoint is not None:
                    _check_breakpoint(block, seg.role, field_name)
                    # A part's own ttl, else "" (the request's `prompt_cache_options.ttl`).
                    own = block.native["prompt_cache_breakpoint"].get("ttl", "")
                    prompt.breakpoints.append(Breakpoint(index, own, field_name))
            if seg.role != "assistant":
                prompt.last_eligible = index
        prompt.layout.trailing_tokens = self.rules.reply_priming_tokens
        prompt.layout.positions = hasher.positions
        return prompt

    def _add(self, prompt: Prompt, hasher: PrefixHasher, native: Any, ids: list[int], kind: str, seg: int) -> int:
        prompt.ids.extend(ids)
        return hasher.add(native, len(ids), kind, seg)

    def _block_ids(self, block: Block, encode: Any) -> list[int]:
        if block.kind in ("text", "tool_result", "tool_call"):
            return encode(block.text)
        if block.kind == "image":
            seed = _small_hash(canonical(without_markers(block.native)))
            return [_SYNTHETIC + 1000 + (seed + i) % 1_000_000 for i in range(self.rules.image_tokens)]
        return encode(canonical(without_markers(_rendered(block))))


def _rendered(block: Block) -> Any:
    """A block as the model reads it: Responses' `input_text` / `output_text` render as the text they hold, the
    same as a bare string content (`ir.canonical_native`'s form), so a message sent once as a string and once as
    a part (a breakpoint needs a part) is the same prefix; an input item's `id` (`Block.unrendered`) is no part
    of it."""
    native = block.rendered()
    if isinstance(native, dict) and native.get("type") in ("input_text", "output_text"):
        return {"type": "text", **{k: v for k, v in native.items() if k not in ("type", "annotations")}}
    return native


def _retention(value: Any, model: ModelRules, rules: OpenAIRules) -> str:
    if value is None:
        return rules.default_retention if rules.default_retention in model.retention else model.retention[0]
    if value not in ("in_memory", "24h"):
        raise RequestError(f"prompt_cache_retention: must be 'in_memory' or '24h', got {value!r}",
                           field="prompt_cache_retention")
    if value not in model.retention:
        raise RequestError(f"prompt_cache_retention: '{value}' is not supported with model {model.id}; "
                           f"supported: {', '.join(model.retention)}", field="prompt_cache_retention")
    return value


def _cache_options(options: Any, model: ModelRules, default_ttl: str) -> tuple[str, str]:
    if options is None:
        return "implicit", default_ttl
    if not isinstance(options, dict):
        raise RequestError("prompt_cache_options: expected an object", field="prompt_cache_options")
    unknown = set(options) - {"mode", "ttl", "prewarm", "comparison_response_id"}
    if unknown:
        name = sorted(unknown)[0]
        raise RequestError(f"prompt_cache_options.{name}: unknown parameter", field=f"prompt_cache_options.{name}")
    mode = options.get("mode", "implicit")
    if mode not in ("implicit", "explicit"):
        raise RequestError(f"prompt_cache_options.mode: must be 'implicit' or 'explicit', got {mode!r}",
                           field="prompt_cache_options.mode")
    ttl = options.get("ttl", default_ttl)
    if ttl not in model.breakpoint_ttls:
        raise RequestError(f"prompt_cache_options.ttl: {ttl!r} is not supported with model {model.id}; "
                           f"supported: {', '.join(model.breakpoint_ttls)}", field="prompt_cache_options.ttl")
    return mode, ttl


def _check_breakpoint(block: Block, role: str, field_name: str) -> None:
    marker = block.native.get("prompt_cache_breakpoint") if isinstance(block.native, dict) else None
    if not isinstance(marker, dict) or marker.get("mode") != "explicit":
        raise RequestError(f"{field_name}.prompt_cache_breakpoint: expected {{\"mode\": \"explicit\"}}",
                           field=f"{field_name}.prompt_cache_breakpoint")
    if role == "assistant":
        raise RequestError(f"{field_name}.prompt_cache_breakpoint: breakpoints are not allowed on assistant messages",
                           field=f"{field_name}.prompt_cache_breakpoint")


@lru_cache(maxsize=8)
def _encoder(name: str) -> Any:
    raw = encoder(name)

    @lru_cache(maxsize=8192)
    def encode(text: str) -> tuple[int, ...]:
        return tuple(raw(text))

    return lambda text: list(encode(text))


def _small_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big")
