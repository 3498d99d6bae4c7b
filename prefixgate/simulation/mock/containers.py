"""Code execution containers, each its organisation's (OpenAI) or workspace's (Anthropic).

- Anthropic: a request with a code execution tool (`code_execution_*`) runs in a container, and the answer's
  `container` says which (`{"id", "expires_at"}`, also on the stream's `message_delta`); the request's top-level
  `container` (an id, or `{"id": ...}`) reuses one.
- OpenAI: a `code_interpreter` tool's `container` is `{"type": "auto", ...}` (a new container) or an id; the
  answer's `code_interpreter_call` item names it (`container_id`), and the file the mock's code writes
  (`/mnt/data/output.txt`, `source: "assistant"`) is cited in the answer's text as a `container_file_citation`.
  The Containers API (`mock/containers_api.py`) creates, lists and deletes containers and their files. A
  container expires when it has not been used for its `expires_after.minutes` (20 by default: OpenAI's code
  interpreter guide); running code in it or adding a file uses it.

An id the caller's account does not hold (another's, an expired one) is a 404 naming it.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime

from prefixgate.errors import RequestError
from prefixgate.providers.files import CONTAINER_IDLE_S, container_not_found
from prefixgate.simulation.mock.code_execution import OUTPUT, runs_code

ANTHROPIC_LIFETIME_S = 30 * 86400     # the mock's; callers read `expires_at`, never assume it
WRITTEN = "output.txt"                # what the mock's code interpreter writes
DATA = "/mnt/data/"


@dataclass
class Box:
    """An OpenAI container: its object as the API answers it, and its files (id -> (object, bytes))."""
    meta: dict
    files: dict[str, tuple[dict, bytes]] = field(default_factory=dict)

    def expires(self) -> float:
        return self.meta["last_active_at"] + self.meta["expires_after"]["minutes"] * 60


class Containers:
    def __init__(self) -> None:
        self._expires: dict[tuple[str, str], float] = {}     # Anthropic's: (account, id) -> when it expires
        self._boxes: dict[tuple[str, str], Box] = {}          # OpenAI's: (account, id) -> its container

    def anthropic(self, body: dict, tenant: str, now: float) -> dict:
        """The answer's `container` field for `body` ({} when it runs no code)."""
        named = body.get("container")
        named = named.get("id") if isinstance(named, dict) else named
        if not isinstance(named, str) and not runs_code(body):
            return {}
        if not isinstance(named, str):
            named = "container_" + secrets.token_hex(12)
            self._expires[(tenant, named)] = now + ANTHROPIC_LIFETIME_S
        elif self._expires.get((tenant, named), 0.0) <= now:
            raise RequestError(f"Container with id '{named}' not found.", field="container", status=404, kind="not_found")
        expires = datetime.fromtimestamp(self._expires[(tenant, named)], UTC).isoformat().replace("+00:00", "Z")
        return {"container": {"id": named, "expires_at": expires}}

    def code_interpreter(self, body: dict, tenant: str, now: float) -> str | None:
        """The container a Responses request's `code_interpreter` tool runs in (None: it has no such tool)."""
        for tool in body.get("tools") or ():
            if isinstance(tool, dict) and tool.get("type") == "code_interpreter":
                named = tool.get("container")
                if not isinstance(named, str):
                    return self.create(tenant, {"name": "code_interpreter"}, now)["id"]
                try:
                    return self.used(tenant, named, now).meta["id"]
                except RequestError:
                    raise RequestError(f"Container with id '{named}' not found.", field="container", status=404,
                                       kind="not_found") from None
        return None

    def ran(self, response: dict, tenant: str, container: str, now: float) -> None:
        """`response` with the code its model ran in `container` first, and the file that code wrote cited at the
        end of its first message's text (the mock's model always runs some)."""
        written = self.add_file(tenant, container, WRITTEN, OUTPUT, "assistant", now)
        response["output"].insert(0, {"id": "ci_" + secrets.token_hex(16), "type": "code_interpreter_call",
                                      "status": "completed", "code": f"open('{DATA}{WRITTEN}', 'w').write('...')",
                                      "outputs": None, "container_id": container})
        for item in response["output"]:
            for part in item.get("content") or () if item.get("type") == "message" else ():
                if part.get("type") == "output_text":
                    end = len(part["text"])
                    part["annotations"].append({"type": "container_file_citation", "container_id": container,
                                                "file_id": written["id"], "filename": WRITTEN, "start_index": end,
                                                "end_index": end})
                    return

    def create(self, tenant: str, body: dict, now: float) -> dict:
        minutes = (body.get("expires_after") or {}).get("minutes", CONTAINER_IDLE_S // 60)
        meta = {"id": "cntr_" + secrets.token_hex(24), "object": "container", "created_at": int(now),
                "status": "running", "expires_after": {"anchor": "last_active_at", "minutes": minutes},
                "last_active_at": int(now), "name": body["name"], "memory_limit": body.get("memory_limit", "1g")}
        self._boxes[(tenant, meta["id"])] = Box(meta)
        return meta

    def of(self, tenant: str, now: float) -> list[dict]:
        """The account's live containers, oldest first."""
        return [box.meta for (account, _), box in self._boxes.items() if account == tenant and box.expires() > now]

    def get(self, tenant: str, container_id: str, now: float) -> Box:
        box = self._boxes.get((tenant, container_id))
        if box is None or box.expires() <= now:
            raise container_not_found(container_id)
        return box

    def used(self, tenant: str, container_id: str, now: float) -> Box:
        box = self.get(tenant, container_id, now)
        box.meta["last_active_at"] = int(now)
        return box

    def delete(self, tenant: str, container_id: str, now: float) -> None:
        self.get(tenant, container_id, now)
        del self._boxes[(tenant, container_id)]

    def add_file(self, tenant: str, container_id: str, name: str, content: bytes, source: str, now: float) -> dict:
        box = self.used(tenant, container_id, now)
        meta = {"id": "cfile_" + secrets.token_hex(16), "object": "container.file", "created_at": int(now),
                "bytes": len(content), "container_id": container_id, "path": DATA + name.rpartition("/")[2],
                "source": source}
        box.files[meta["id"]] = (meta, content)
        return meta

    def file(self, tenant: str, container_id: str, file_id: str, now: float) -> tuple[dict, bytes]:
        found = self.get(tenant, container_id, now).files.get(file_id)
        if found is None:
            raise RequestError(f"Container file with id '{file_id}' not found.", status=404, kind="not_found")
        return found
