"""Streaming one text answer as Responses events while it is generated (the local engine, and any
translated stream), each event with its `sequence_number`; usage goes in the terminal event."""

from __future__ import annotations

from typing import Any

from prefixgate.dialects import responses as rs
from prefixgate.dialects.sse import encode_sse
from prefixgate.usage import Usage


class ResponseEventWriter:
    """`start()`, then `delta(text)` per piece, then `finish(usage, ...)`; each returns encoded events."""

    def __init__(self, response: dict) -> None:
        # `response`: the object as it will be, without output and usage yet (id, model, echoed settings).
        self.response = response
        self.item = rs.message_item("")
        self.text: list[str] = []
        self.seq = 0

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return encode_sse(data, kind)

    def start(self) -> list[bytes]:
        pending = {**self.response, "status": "in_progress", "completed_at": None, "output": [], "usage": None}
        where = {"item_id": self.item["id"], "output_index": 0}
        return [self._event("response.created", response=pending),
                self._event("response.in_progress", response=pending),
                self._event("response.output_item.added", output_index=0,
                            item={**self.item, "status": "in_progress", "content": []}),
                self._event("response.content_part.added", **where, content_index=0,
                            part={"type": "output_text", "text": "", "annotations": [], "logprobs": []})]

    def delta(self, text: str) -> list[bytes]:
        if not text:
            return []
        self.text.append(text)
        return [self._event("response.output_text.delta", item_id=self.item["id"], output_index=0, content_index=0,
                            delta=text, logprobs=[])]

    def finish(self, usage: Usage | None, *, truncated: bool = False) -> list[bytes]:
        text = "".join(self.text)
        item = rs.message_item(text, id=self.item["id"])
        part = item["content"][0]
        where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        status = "incomplete" if truncated else "completed"
        self.response = {**self.response, "status": status, "output": [item],
                         "incomplete_details": {"reason": "max_output_tokens"} if truncated else None,
                         "usage": rs.usage_json(usage) if usage is not None else None}
        return [self._event("response.output_text.done", **where, text=text, logprobs=[]),
                self._event("response.content_part.done", **where, part=part),
                self._event("response.output_item.done", output_index=0, item=item),
                self._event(f"response.{status}", response=self.response)]
