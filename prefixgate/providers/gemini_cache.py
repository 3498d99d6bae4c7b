"""Gemini's caches: implicit prefix caching, and explicit `cachedContents` named by a request (G1-G7).

Implicit: prefixes of at least the model's minimum are cached for free at content-part boundaries; a later
request reads its longest live cached prefix at the cached rate. Explicit: the request names a cached
content, whose tokens it reads; it may not also send system instruction, tools or tool config.
"""

from __future__ import annotations

from typing import Any

from prefixgate.errors import RequestError
from prefixgate.ir import Block, Conversation
from prefixgate.providers.cached_contents import CONTENT_KEYS, CachedContent, CachedContentRegistry
from prefixgate.providers.layout import Layout, PrefixHasher, canonical
from prefixgate.providers.rules import GeminiRules, ModelRules
from prefixgate.providers.store import CacheStore
from prefixgate.tokens import count_tokens
from prefixgate.usage import Usage

CACHED_CONTENT_CONFLICT = (
    "Tool config, tools and system instruction should not be set in the request when using cached content."
)
_IMAGE_KEYS = ("inlineData", "inline_data", "fileData", "file_data")


class GeminiCache:
    def __init__(self, rules: GeminiRules, store: CacheStore, registry: CachedContentRegistry) -> None:
        self.rules = rules
        self.store = store
        self.registry = registry

    def request(self, conv: Conversation, model: ModelRules, tenant: str, now: float) -> Usage:
        """The usage Gemini would report for `conv` at `now` (output tokens left at 0)."""
        named = conv.params.get("cachedContent", conv.params.get("cached_content"))
        layout = self.layout(conv)
        if named is not None:
            cached = self.cached_content_for(conv, named, model, tenant, now)
            return Usage(uncached_input=layout.total, cache_read=cached.tokens)
        return self._implicit(layout, model, tenant, now)

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

    def _implicit(self, layout: Layout, model: ModelRules, tenant: str, now: float) -> Usage:
        scope = ("gemini", model.id, tenant)
        eligible = [p for p in layout.positions if p.end >= model.min_cache_tokens]
        read = 0
        for position in reversed(eligible):
            entry = self.store.get(scope, position.key, now)
            if entry is not None:
                read = position.end
                break
        for position in eligible:
            self.store.put(scope, position.key, position.end, "implicit", self.rules.implicit_ttl_s, now)
        return Usage(uncached_input=layout.total - read, cache_read=read)

    def count(self, conv: Conversation) -> int:
        return self.layout(conv).total

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
