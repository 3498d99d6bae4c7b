"""Turn a sequence's new tokens into text as they arrive, and find stop strings in it."""

from __future__ import annotations

from typing import Any

from tokenizers.decoders import DecodeStream

from prefixgate.local_backend.sampling_params import SamplingParams

# Prompt tokens the stream is primed with, so the first output token decodes as it would mid-text
# (SentencePiece tokenizers drop a leading space at the very start).
PRIME_TOKENS = 6


class Detokenizer:
    def __init__(self, tokenizer: Any, prompt_token_ids: list[int], params: SamplingParams) -> None:
        self._backend = tokenizer._tokenizer  # the `tokenizers` object behind a fast tokenizer
        self._stream = DecodeStream(prompt_token_ids[-PRIME_TOKENS:], skip_special_tokens=params.skip_special_tokens)
        self.stops = params.stop
        self.include_stop = params.include_stop_str_in_output
        # A stop string may be split across tokens: this much text is held back from streaming until it
        # is known not to start one.
        self.hold_back = max((len(s) for s in self.stops), default=1) - 1 if not self.include_stop else 0
        self.text = ""

    def add(self, token_id: int) -> str | None:
        """Append a token's text; returns the stop string it completed, if any (text is then cut there)."""
        piece = self._stream.step(self._backend, token_id)
        if not piece:
            return None
        start = max(0, len(self.text) - max((len(s) for s in self.stops), default=0) + 1)
        self.text += piece
        for stop in self.stops:
            at = self.text.find(stop, start)
            if at != -1:
                self.text = self.text[:at + len(stop) if self.include_stop else at]
                return stop
        return None

    def visible_text(self, finished: bool) -> str:
        if finished or not self.hold_back:
            return self.text
        return self.text[:max(0, len(self.text) - self.hold_back)]
