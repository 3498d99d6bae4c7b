"""One intercepted call: the body the application built, its plan, the body actually sent, and the
ledger record written once the answer has ended (read to the end, closed early, or failed).

Nothing here does I/O; the interceptor sends, this decides what to send and what to record.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
import warnings
from datetime import UTC, datetime
from typing import Any

from prefixgate.cache_planner import Plan, Target, plan
from prefixgate.cache_planner.detectors import volatile_spans
from prefixgate.compact_json import compact_bytes
from prefixgate.cost import ledger_fields
from prefixgate.dialects import wire_format
from prefixgate.errors import RequestError
from prefixgate.ledger import LedgerRecord, failed, miss_reason
from prefixgate.prefix_shape import prefix_shape
from prefixgate.providers.pricing import cost_of
from prefixgate.providers.routed import ran_as
from prefixgate.sdk.azure import MAPPED_BY, PRICE_ROWS
from prefixgate.sdk.config import WrapConfig
from prefixgate.sdk.endpoints import Endpoint, gemini_cache_url
from prefixgate.usage import Usage

_FRACTION = re.compile(r"(\.\d{6})\d+")


class Exchange:
    def __init__(self, endpoint: Endpoint, config: WrapConfig, body: bytes, *, host: str, attempt: int = 1) -> None:
        self.endpoint = endpoint
        self.config = config
        self.original = body
        self.host = host
        self.attempt = attempt
        self.id = uuid.uuid4().hex[:20]
        self.ts = time.time()
        self.started = time.perf_counter()
        self.model = endpoint.model or ""
        self.deployment = endpoint.deployment or ""   # Azure: what the call names instead of a model
        self.stream = endpoint.streams
        self.plan: Plan | None = None
        self.notes: list[str] = []
        self.withhold_usage = False
        self.overhead_ms = 0.0
        self.first_byte_at: float | None = None
        self._finished = False
        self._finish_lock = threading.Lock()
        if endpoint.kind == "generate":
            try:
                self._plan()
            except Exception as e:  # a planner bug must not block the call: it goes out as the caller built it
                self._give_up(e)
        self.overhead_ms = (time.perf_counter() - self.started) * 1000

    # ---- before sending ---------------------------------------------------------------------------

    def _plan(self) -> None:
        provider = self.endpoint.provider
        wire = wire_format(self.endpoint.dialect)
        try:
            conv = wire.parse_request(self.original, model=self.model)
        except RequestError as e:
            self.notes.append(f"passthrough: the body is not a valid {provider} request ({e.message}); "
                              "the provider answers it")
            return
        self.model = conv.model or self.model
        self.stream = self.stream or conv.stream
        if self.config.azure:
            # Azure ignores the body's model where the path names a deployment; on its other paths it is one.
            self.deployment = self.deployment or self.model
            self.model = dict(self.config.deployments).get(self.deployment, self.deployment)
        if not self.model:
            self.notes.append("passthrough: no model to plan for")
            return
        target = Target(provider, self.model, rows_of=PRICE_ROWS if self.config.azure else "")
        with self.config.lock:
            self.plan = plan(conv, target, self.config.state, self.config.mode,
                             route=self.config.route, now=self.ts, caller_checkpoints=self.config.caller_checkpoints)
        if self.stream:
            # Some formats report a stream's usage only when asked: ask, and withhold the answer from a
            # caller who did not (their SDK would yield a chunk it does not expect).
            self.withhold_usage = not wire.caller_wants_usage(self.plan.conversation)
            wire.billable(self.plan.conversation)

    def _give_up(self, e: Exception) -> None:
        self.plan, self.withhold_usage = None, False
        note = f"passthrough: planning failed ({type(e).__name__}: {e}); sent as the caller built it"
        self.notes.append(note)
        warnings.warn(f"prefixgate: {note}", RuntimeWarning, stacklevel=2)

    def cache_create(self, path: str) -> tuple[str, dict] | None:
        """(path, body) of the Gemini explicit cache the plan wants created first, if any."""
        if self.plan is None or self.plan.cache_create is None:
            return None
        url = gemini_cache_url(path)
        if url is None:
            self.notes.append("cache: explicit caches are created only on the Gemini API, not Vertex; sent without")
            return None
        return url, self.plan.cache_create

    def adopt_cache(self, status: int, data: Any) -> None:
        """Use the cache the provider just created (and record what creating it cost), or go without; only after
        `cache_create` named one."""
        plan = self.plan
        if plan is None or plan.cache_create is None:
            raise RuntimeError("adopt_cache: the plan asked for no explicit cache (cache_create named none)")
        name = data.get("name") if isinstance(data, dict) else None
        if status >= 400 or not isinstance(name, str):
            self.notes.append(f"cache: the provider refused the explicit cache (status {status}); sent without it")
            return
        expires = _expiry(data.get("expireTime"), plan.cache_create)
        with self.config.lock:
            plan.adopt_cached_content(name, expires)
        tokens = int((data.get("usageMetadata") or {}).get("totalTokenCount") or 0)
        # Creating bills the cached tokens at the input rate; without caching it would not exist.
        usage = Usage(cache_writes={"explicit": tokens} if tokens else {})
        rec = self._record(200, usage, error="", explanation=[f"cache: created explicit cache {name} for the planner"])
        if rec.cost_usd is not None:
            rec.cost_without_cache_usd = "0"
            rec.savings_usd = f"-{rec.cost_usd}"
        rec.id = uuid.uuid4().hex[:20]
        self.config.ledger.add(rec)

    def body(self) -> bytes:
        """The body to send: the planned one, or the caller's own bytes when planning changed nothing."""
        if self.plan is None:
            return self.original
        try:
            encoded = wire_format(self.endpoint.dialect).encode_request(self.plan.conversation)
        except Exception as e:
            self._give_up(e)
            return self.original
        if encoded == json.loads(self.original):
            return self.original
        return compact_bytes(encoded)

    # ---- after the answer -------------------------------------------------------------------------

    def finish(self, status: int, usage: Usage | None, *, error: str = "", data: Any = None, answered: str = "") -> None:
        """Record the call, once, whoever gets here first (end of body, close, or failure). `answered`: the model
        the answer named, if it named one."""
        with self._finish_lock:
            if self._finished:
                return
            self._finished = True
        today = datetime.fromtimestamp(self.ts, UTC).date()
        if self.config.azure and self.deployment:
            ran = ran_as(PRICE_ROWS, self.deployment, answered, today, dict(self.config.deployments), MAPPED_BY)
        else:   # a retired model's call the provider ran as its replacement names it in its usage
            ran = ran_as(self.priced_by, self.model, usage.model if usage is not None else "", today)
        if ran:
            self.model, note = ran
            self.notes += [note] if usage is not None else []
        try:
            self._book(status, usage, error, data)
        except Exception as e:  # a bookkeeping bug: it runs inside the SDK's read of the answer, which stays the caller's
            warnings.warn(f"prefixgate: recording the call failed ({type(e).__name__}: {e}); the call is not recorded",
                          RuntimeWarning, stacklevel=2)

    def _book(self, status: int, usage: Usage | None, error: str, data: Any) -> None:
        if self.endpoint.kind == "generate":
            try:
                rec = self._record(status, usage, error=error)
            except Exception as e:  # usage the provider sent that cannot be priced: recorded without it
                rec = self._record(status, None, error=error or f"usage: unreadable ({type(e).__name__}: {e})")
            self.config.ledger.add(rec, None if failed(status) else self._trace_line(rec))
        elif not failed(status):
            self.config.ledger.add(None, self._cache_trace_line(data))

    def _record(self, status: int, usage: Usage | None, *, error: str, explanation: list[str] | None = None) -> LedgerRecord:
        now = time.perf_counter()
        lines = explanation if explanation is not None else (self.plan.explanation if self.plan else []) + self.notes
        cost = None
        if usage is not None:   # an answer's, or the estimate of an attempt that may have been billed unanswered
            try:
                cost = cost_of(self.priced_by, self.model, usage)
            except RequestError:
                lines = [*lines, f"cost: no price for {self.priced_by} model {self.model!r}"]
        return LedgerRecord(
            id=self.id, ts=self.ts, key="sdk", tenant=self.config.tenant, route=self.route,
            target=f"sdk:{self.host}/{self.deployment}" if self.deployment else f"sdk:{self.host}",
            provider=self.priced_by, model=self.model,
            dialect=self.endpoint.dialect, stream=self.stream, status=status, **ledger_fields(usage or Usage(), cost),
            latency_ms=(now - self.started) * 1000,
            ttft_ms=(self.first_byte_at - self.started) * 1000 if self.first_byte_at else None,
            overhead_ms=self.overhead_ms, attempts=self.attempt,
            prefix_hash=self.plan.prefix_hash if self.plan else "",
            plan_summary=self.plan.summary if self.plan else "",
            explanation=lines, miss_reason=miss_reason(usage, status, lines), error=error,
            segments=prefix_shape(self.plan.conversation, self.endpoint.provider, volatile_spans) if self.plan else [])

    @property
    def priced_by(self) -> str:
        """Whose price rows bill the call: Azure's for an Azure client (as the gateway bills an Azure upstream)."""
        return PRICE_ROWS if self.config.azure else self.endpoint.provider

    @property
    def route(self) -> str:
        return self.plan.route if self.plan else (self.config.route or "default")

    def _trace_line(self, rec: LedgerRecord) -> dict:
        return {"t": self.ts, "provider": self.endpoint.provider, "model": self.model, "route": rec.route,
                "tenant": self.config.tenant or "default", "output_tokens": rec.output, "body": self.original}

    def _cache_trace_line(self, data: Any) -> dict | None:
        endpoint = {"cache_create": "cachedContents.create", "cache_update": "cachedContents.update",
                    "cache_delete": "cachedContents.delete"}[self.endpoint.kind]
        name = self.endpoint.name or (data.get("name") if isinstance(data, dict) else None)
        model = (data.get("model") if isinstance(data, dict) else None) or _body_model(self.original)
        if endpoint != "cachedContents.create" and name is None:
            return None
        line = {"t": self.ts, "provider": "gemini", "model": str(model or "unknown").removeprefix("models/"),
                "route": self.config.route or "default", "tenant": self.config.tenant or "default",
                "endpoint": endpoint, "body": self.original}
        if name is not None:
            line["name"] = name
        return line


def _body_model(body: bytes) -> str | None:
    try:
        data = json.loads(body) if body else {}
    except ValueError:
        return None
    return data.get("model") if isinstance(data, dict) else None


def _expiry(expire_time: Any, create_body: dict) -> float:
    """A cachedContent's expiry as epoch seconds (RFC 3339 with up to nanoseconds), else now + its TTL."""
    if isinstance(expire_time, str):
        try:
            return datetime.fromisoformat(_FRACTION.sub(r"\1", expire_time).replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    ttl = str(create_body.get("ttl", "3600s")).removesuffix("s")
    return time.time() + (float(ttl) if ttl.replace(".", "", 1).isdigit() else 3600.0)
