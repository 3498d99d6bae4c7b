"""Which requests are samples of one route, and how a finding names another request."""

from __future__ import annotations

from prefixgate.cache_planner.lint.inputs import Request


def ref(req: Request, other: Request) -> str:
    """How a finding on `req` names `other`: its line in the same trace, else its file (and line)."""
    if other.source is req.source and other.record is not None:
        return f"line {other.source.line_of(other.start)}"
    return other.label


def sample_key(req: Request) -> tuple[str, ...]:
    """Which requests are samples of one route: a trace's records of one tenant and route, or the
    request files of one folder."""
    if req.record is not None and req.source.path.suffix == ".jsonl":
        return (req.source.display, req.record.tenant, req.record.route)
    return (str(req.source.path.parent),)
