"""Code execution containers, each its organisation's (OpenAI) or workspace's (Anthropic).

- Anthropic: a request with a code execution tool (`code_execution_*`) runs in a container, and the answer's
  `container` says which (`{"id", "expires_at"}`, also on the stream's `message_delta`); the request's top-level
  `container` (an id, or `{"id": ...}`) reuses one.
- OpenAI: a `code_interpreter` tool's `container` is `{"type": "auto", ...}` (a new container) or an id; the
  answer's `code_interpreter_call` item names it (`container_id`). A container expires when it has not been used
  for 20 minutes (OpenAI's code interpreter guide).

An id the caller's account does not hold (another's, an expired one) is a 404 naming it.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

from prefixgate.errors import RequestError
from prefixgate.simulation.mock.code_execution import runs_code

OPENAI_IDLE_S = 20 * 60
ANTHROPIC_LIFETIME_S = 30 * 86400     # the mock's; callers read `expires_at`, never assume it


class Containers:
    def __init__(self) -> None:
        self._expires: dict[tuple[str, str], float] = {}     # (account, id) -> when it expires

    def anthropic(self, body: dict, tenant: str, now: float) -> dict:
        """The answer's `container` field for `body` ({} when it runs no code)."""
        named = body.get("container")
        named = named.get("id") if isinstance(named, dict) else named
        if not isinstance(named, str) and not runs_code(body):
            return {}
        ident = self._use(tenant, named if isinstance(named, str) else None, "container_", now, ANTHROPIC_LIFETIME_S,
                          idle=False)
        expires = datetime.fromtimestamp(self._expires[(tenant, ident)], UTC).isoformat().replace("+00:00", "Z")
        return {"container": {"id": ident, "expires_at": expires}}

    def code_interpreter(self, body: dict, tenant: str, now: float) -> str | None:
        """The container a Responses request's `code_interpreter` tool runs in (None: it has no such tool)."""
        for tool in body.get("tools") or ():
            if isinstance(tool, dict) and tool.get("type") == "code_interpreter":
                named = tool.get("container")
                return self._use(tenant, named if isinstance(named, str) else None, "cntr_", now, OPENAI_IDLE_S, idle=True)
        return None

    def _use(self, tenant: str, named: str | None, prefix: str, now: float, lifetime_s: float, *, idle: bool) -> str:
        """A new container, or `named` if the account holds it; `idle`: its lifetime runs from its last use."""
        if named is None:
            ident = prefix + secrets.token_hex(12)
            self._expires[(tenant, ident)] = now + lifetime_s
            return ident
        if self._expires.get((tenant, named), 0.0) <= now:
            raise RequestError(f"Container with id '{named}' not found.", field="container", status=404, kind="not_found")
        if idle:
            self._expires[(tenant, named)] = now + lifetime_s
        return named
