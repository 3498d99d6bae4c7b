"""Conversation turns of a trace through the provider simulator: which turns failed to read the history
the previous turn of the same conversation made cacheable, and what that cost.

A conversation is identified by its first message (the prefix key of the first block after tools and
system); its previous turn is the latest earlier request of the same tenant and route with that first
message and fewer blocks. What the previous turn made cacheable is what it read plus what it wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from prefixgate.cache_planner.rewrite import SYSTEM_ROLES
from prefixgate.errors import RequestError
from prefixgate.ir import ttl_seconds
from prefixgate.providers.rules import Catalog
from prefixgate.simulation.simulator import Simulator
from prefixgate.usage import Usage

if TYPE_CHECKING:
    from prefixgate.cache_planner.lint.inputs import Request

# A turn that misses less than this of what the previous one cached is noise (token-count rounding).
MISSED_SHARE = 0.1
MISSED_TOKENS = 64


@dataclass
class Turn:
    request: Request
    previous: Request
    rewritten: int                     # tokens the previous turn made cacheable that this one paid for again
    history_changed_at: int | None     # first history block whose bytes changed since the previous turn
    expired: bool
    gap: float
    ttl: str
    last_marker: int | None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Seen:
    request: Request
    keys: list[str]
    usage: Usage
    t: float


def simulate_turns(requests: list[Request], catalog: Catalog) -> list[Turn]:
    """The turns of every traced conversation that re-paid for history, trace by trace."""
    out: list[Turn] = []
    by_source: dict[str, list[Request]] = {}
    for req in requests:
        by_source.setdefault(req.source.display, []).append(req)
    for trace in by_source.values():
        out += _trace_turns(sorted(trace, key=lambda r: r.record.t), catalog)  # type: ignore[union-attr]
    return out


def _trace_turns(requests: list[Request], catalog: Catalog) -> list[Turn]:
    sim = Simulator(catalog)
    conversations: dict[tuple[str, str, str], _Seen] = {}
    out: list[Turn] = []
    for req in requests:
        record, conv = req.record, req.conv
        if record is None or conv is None:
            raise RuntimeError(f"{req.label}: simulate_turns takes traced requests the provider accepts "
                               "(a trace record and a parsed conversation)")
        try:
            result = sim.respond(req.provider, req.body, now=record.t, tenant=record.tenant, model=req.model_name,
                                 output_tokens=record.output_tokens)
        except RequestError:
            continue
        keys = conv.prefix_keys()
        leading = _leading_blocks(req)
        if len(keys) <= leading:
            continue
        cid = (record.tenant, record.route, keys[leading])
        prev = conversations.get(cid)
        conversations[cid] = _Seen(req, keys, result.usage, record.t)
        if prev is None or len(prev.keys) >= len(keys):
            continue
        turn = _turn(req, prev, keys, result.usage, record.t, result.model.price_for(result.usage.input_total))
        if turn is not None:
            out.append(turn)
    return out


def _leading_blocks(req: Request) -> int:
    n = 0
    for seg in req.conv.segments:  # type: ignore[union-attr]
        if seg.role not in (*SYSTEM_ROLES, "tools", "schema"):
            break
        n += len(seg.blocks)
    return n


def _turn(req: Request, prev: _Seen, keys: list[str], usage: Usage, t: float, price: Any) -> Turn | None:
    cacheable = prev.usage.cache_read + prev.usage.cache_write
    missed = cacheable - usage.cache_read
    if cacheable <= 0 or missed < max(MISSED_TOKENS, MISSED_SHARE * cacheable):
        return None
    changed = next((i for i in range(len(prev.keys)) if keys[i] != prev.keys[i]), None)
    marks = [i for i, b in enumerate(prev.request.conv.blocks()) if b.checkpoint is not None]  # type: ignore[union-attr]
    ttl = prev.request.conv.blocks()[marks[-1]].checkpoint.ttl if marks else "5m"  # type: ignore[union-attr]
    gap = t - prev.t
    written = min(usage.cache_write, missed)
    write_ttl = max(usage.cache_writes, key=usage.cache_writes.__getitem__) if usage.cache_writes else ttl
    loss = (written * (price.write_price(write_ttl) - price.cache_read)
            + (missed - written) * (price.input - price.cache_read)) / Decimal(1_000_000)
    current = [i for i, b in enumerate(req.conv.blocks()) if b.checkpoint is not None]  # type: ignore[union-attr]
    return Turn(req, prev.request, missed, changed, gap > ttl_seconds(ttl), gap, ttl,
                current[-1] if current else None, {"rewritten": missed, "loss": str(loss)})
