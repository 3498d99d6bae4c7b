"""Gemini's caches: implicit prefix caching, and explicit `cachedContents` named by a request (G1-G7).

Implicit: a request's prompt is cached for free; a later request reads the longest token prefix it shares with a
live cached prompt, wherever that prefix ends (inside a part too, as Gemini's implicit cache matches tokens, not
parts), when it holds at least the model's minimum, at the cached rate. Explicit: the request names a cached
content, whose tokens it reads; it may not also send system instruction, tools or tool config.

`TokenStream` and `TokenPrefixCache` are the implicit cache's mechanism, shared by every Gemini-shaped mock
(generateContent, Vertex's Gemini, the Interactions API): build a stream of the prompt, then `serve` it.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from prefixgate.errors import RequestError
from prefixgate.ir import Block, Conversation
from prefixgate.providers.cached_contents import CONTENT_KEYS, CachedContent, CachedContentRegistry
from prefixgate.providers.rules import GeminiRules, ModelRules
from prefixgate.simulation.layout import Layout, PrefixHasher, canonical
from prefixgate.simulation.store import CacheStore
from prefixgate.tokens import count_tokens, encoder
from prefixgate.usage import Usage

CACHED_CONTENT_CONFLICT = (
    "Tool config, tools and system instruction should not be set in the request when using cached content."
)
_IMAGE_KEYS = ("inlineData", "inline_data", "fileData", "file_data")


@dataclass
class TokenStream:
    """A prompt as the implicit cache compares it: one 64-bit atom per text token, and one atom (hashed from
    its content) per boundary (a turn's role: weight 0) or non-text part (an image: its token cost)."""

    atoms: array = field(default_factory=lambda: array("q"))
    ends: array = field(default_factory=lambda: array("q"))     # tokens through each atom

    @property
    def tokens(self) -> int:
        return self.ends[-1] if self.ends else 0

    def text(self, text: str) -> None:
        start = self.tokens
        ids = encoder("cl100k_base")(text)
        self.atoms.extend(ids)
        self.ends.extend(range(start + 1, start + len(ids) + 1))

    def opaque(self, value: Any, tokens: int) -> None:
        """A boundary (tokens 0) or a part the cache matches whole (its token cost)."""
        digest = hashlib.blake2b(canonical(value).encode(), digest_size=8).digest()
        # Negative, so never equal to a token id.
        self.atoms.append(-(int.from_bytes(digest, "big") >> 1) - 1)
        self.ends.append(self.tokens + tokens)

    def shared_tokens(self, other: TokenStream) -> int:
        """Tokens in the longest atom prefix both streams share."""
        a, b = self.atoms.tobytes(), other.atoms.tobytes()
        lo, hi = 0, min(len(a), len(b))
        while lo < hi:  # binary search on bytes: the comparisons run in C
            mid = (lo + hi + 1) // 2
            if a[lo:mid] == b[lo:mid]:
                lo = mid
            else:
                hi = mid - 1
        n = lo // self.atoms.itemsize
        return self.ends[n - 1] if n else 0


class TokenPrefixCache:
    """Cached prompts per scope (provider, model, project), each live for `ttl_s` after its last use."""

    def __init__(self, max_per_scope: int = 128) -> None:
        self.max_per_scope = max_per_scope
        self._scopes: dict[Hashable, OrderedDict[bytes, tuple[TokenStream, float]]] = {}

    def serve(self, scope: Hashable, stream: TokenStream, min_tokens: int, ttl_s: float, now: float) -> int:
        """Tokens `stream` reads from the scope's live prompts (0 below `min_tokens`), then cache it."""
        entries = self._scopes.setdefault(scope, OrderedDict())
        head = stream.atoms[:1].tobytes()
        best, best_key = 0, None
        for key, (cached, expires_at) in list(entries.items()):
            if expires_at <= now:
                del entries[key]
            elif cached.atoms[:1].tobytes() == head:
                shared = stream.shared_tokens(cached)
                if shared > best:
                    best, best_key = shared, key
        if best < min_tokens:
            best, best_key = 0, None
        if best_key is not None:    # a hit keeps the cached prompt alive
            entries[best_key] = (entries[best_key][0], now + ttl_s)
            entries.move_to_end(best_key)
        if stream.tokens >= min_tokens:
            key = hashlib.blake2b(stream.atoms.tobytes(), digest_size=16).digest()
            entries[key] = (stream, now + ttl_s)
            entries.move_to_end(key)
            while len(entries) > self.max_per_scope:
                entries.popitem(last=False)
        return best


class GeminiCache:
    def __init__(self, rules: GeminiRules, store: CacheStore, registry: CachedContentRegistry) -> None:
        self.rules = rules
        self.store = store
        self.registry = registry
        self.implicit = TokenPrefixCache()

    def request(self, conv: Conversation, model: ModelRules, tenant: str, now: float) -> Usage:
        """The usage Gemini would report for `conv` at `now` (output tokens left at 0)."""
        named = conv.params.get("cachedContent", conv.params.get("cached_content"))
        if named is not None:
            cached = self.cached_content_for(conv, named, model, tenant, now)
            return Usage(uncached_input=self.layout(conv).total, cache_read=cached.tokens)
        stream = self.stream(conv)
        read = self.implicit.serve(("gemini", model.id, tenant), stream, model.min_cache_tokens,
                                   self.rules.implicit_ttl_s, now)
        return Usage(uncached_input=stream.tokens - read, cache_read=read)

    def cached_content_for(self, conv: Conversation, name: Any, model: ModelRules, tenant: str,
                           now: float) -> CachedContent:
        if not isinstance(name, str):
            raise RequestError("cachedContent: expected a resource name 'cachedContents/{id}'", field="cachedContent")
        if any(seg.role in ("system", "tools") for seg in conv.segments) or any(
                k in conv.params for k in ("toolConfig", "tool_config")):
            raise RequestError(CACHED_CONTENT_CONFLICT, field="cachedContent")
        content = self.registry.get(tenant, name, now)
        if content.model != model.id:
            raise RequestError(
                f"Model used by GenerateContent request (models/{model.id}) and CachedContent "
                f"({content.model_path}) has to be the same.", field="cachedContent")
        return content

    def count(self, conv: Conversation) -> int:
        return self.layout(conv).total

    def stream(self, conv: Conversation) -> TokenStream:
        """The prompt's tokens in the order `layout` hashes its parts, with the same boundaries."""
        stream = TokenStream()
        salted = False
        for seg in conv.segments:
            if seg.role not in ("system", "tools"):
                if not salted:
                    stream.opaque({k: conv.params[k] for k in ("toolConfig", "tool_config") if k in conv.params}, 0)
                    salted = True
                stream.opaque({"role": seg.role}, 0)
            for block in seg.blocks:
                if block.kind == "text":
                    stream.text(block.text)
                else:
                    stream.opaque(block.native, self._tokens(block))
        return stream

    def layout(self, conv: Conversation) -> Layout:
        hasher = PrefixHasher("gemini")
        salted = False
        for index, seg in enumerate(conv.segments):
            if seg.role not in ("system", "tools"):
                if not salted:
                    hasher.salt({k: conv.params[k] for k in ("toolConfig", "tool_config") if k in conv.params})
                    salted = True
                hasher.salt({"role": seg.role})
            for block in seg.blocks:
                hasher.add(block.native, self._tokens(block), block.kind, index)
        return Layout(hasher.positions)

    def _tokens(self, block: Block) -> int:
        if block.kind in ("image", "file") and isinstance(block.native, dict) and any(
                k in block.native for k in _IMAGE_KEYS):
            return self.rules.image_tokens
        if block.kind == "text":
            return count_tokens(block.text)
        return count_tokens(canonical(block.native))

    def content_tokens(self, body: dict) -> int:
        """Tokens a `cachedContents` create body holds (contents, system instruction, tools, tool config)."""
        total = 0
        for key in CONTENT_KEYS:
            value = body.get(key)
            if value is None:
                continue
            if key in ("contents",):
                items = value if isinstance(value, list) else [value]
                for i, content in enumerate(items):
                    total += self._parts_tokens(content, f"contents.{i}")
            elif key in ("systemInstruction", "system_instruction"):
                total += self._parts_tokens(value, key)
            else:
                total += count_tokens(canonical(value))
        return total

    def _parts_tokens(self, content: Any, field: str) -> int:
        if not isinstance(content, dict) or not isinstance(content.get("parts", []), list):
            raise RequestError(f"{field}: expected a Content object with a parts array", field=field)
        total = 0
        for part in content.get("parts", []):
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                total += count_tokens(part["text"])
            elif isinstance(part, dict) and any(k in part for k in _IMAGE_KEYS):
                total += self.rules.image_tokens
            else:
                total += count_tokens(canonical(part))
        return total
