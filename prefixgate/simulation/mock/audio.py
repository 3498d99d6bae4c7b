"""Chat Completions audio answers: with `modalities` including "audio", the assistant message carries `audio`
(`id`, base64 `data` in the requested `audio.format`, `expires_at`, `transcript`) and no text `content`; a later
turn names it again by `{"role": "assistant", "audio": {"id": ...}}` until `expires_at` (OpenAI's audio guide and
chat API reference). The mock's audio is silence; the transcript is the text reply."""

from __future__ import annotations

import base64
import secrets

LIFETIME_S = 3600       # the mock's; callers read `expires_at`


def with_audio(answer: dict, body: dict, now: float) -> dict:
    """`answer` (a chat.completion) as an audio answer when `body` asks for one."""
    modalities = body.get("modalities")
    if not isinstance(modalities, list) or "audio" not in modalities:
        return answer
    for choice in answer["choices"]:
        message = choice["message"]
        message["audio"] = {"id": "audio_" + secrets.token_hex(16), "data": base64.b64encode(bytes(64)).decode(),
                            "expires_at": int(now + LIFETIME_S), "transcript": message.get("content") or ""}
        message["content"] = None
    return answer
