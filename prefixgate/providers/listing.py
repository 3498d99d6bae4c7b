"""`prefixgate models`: one row per model as the gateway prices and plans it (prices in USD per million
tokens as decimal strings), for JSON or for a table that fits a terminal."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from prefixgate.providers.rules import Catalog, ModelRules
from prefixgate.providers.schedule import PriceSpec, period_at
from prefixgate.providers.vertex_prices import REGIONAL, vertex_rules


def money(d: Decimal) -> str:
    return format(d.normalize(), "f")


def _prices(spec: PriceSpec) -> dict[str, Any]:
    p = spec.price
    return {"input": money(p.input), "output": money(p.output), "cache_read": money(p.cache_read),
            "cache_write": {ttl: money(v) for ttl, v in p.cache_write.items()}}


def model_row(m: ModelRules, at: datetime | None = None) -> dict[str, Any]:
    """The model's row at `at` (now when None): today's standard prices, its tiers and time-of-day windows."""
    at = at or datetime.now(UTC)
    standard = period_at(m.periods, at, windows=False)
    windows = [p for p in m.periods if p.hours is not None and (p.since is None or p.since <= at.date())]
    row: dict[str, Any] = {"provider": m.provider, "id": m.id, "aliases": list(m.aliases), **_prices(standard.base)}
    row.update({
        "min_cache_tokens": m.min_cache_tokens,
        "ttls": _ttls(m),
        "long_context": [{"above": t.above, **_prices(t)} for t in standard.long_context],
    })
    if windows:
        row["time_of_day"] = [{"from": p.hours[0].strftime("%H:%M"), "to": p.hours[1].strftime("%H:%M"),  # type: ignore[index]
                               "timezone": "UTC", **_prices(p.base)} for p in windows]
    row.update({"retires": m.retires.isoformat() if m.retires else None, "replacement": m.replacement or None,
                "source": standard.base.source, "as_of": standard.base.as_of})
    return row


def _ttls(m: ModelRules) -> list[str]:
    if m.provider == "openai":
        return list(m.breakpoint_ttls if m.regime == "breakpoints" else m.retention)
    if m.breakpoint_ttls == ("30m",):   # OpenAI's default on a compatible provider: no markers of its own
        return []
    return list(m.breakpoint_ttls)


def rows(catalog: Catalog, provider: str | None = None, at: datetime | None = None) -> list[dict[str, Any]]:
    """Every model the gateway can price, Vertex's included (the publishers' rows with Vertex's own rules:
    `regional/<id>` is a Claude model on a regional endpoint)."""
    models = list(catalog.models.values())
    for m in catalog.models_of("anthropic") + catalog.models_of("gemini"):
        models.append(vertex_rules(m, False, catalog))
        regional = vertex_rules(m, True, catalog)
        if regional.periods != m.periods:
            models.append(_renamed(regional, REGIONAL + m.id))
    return [model_row(m, at) for m in models if provider in (None, m.provider)]


def _renamed(m: ModelRules, new_id: str) -> ModelRules:
    return replace(m, id=new_id, aliases=())


COLUMNS = ("provider", "id", "input", "output", "read", "writes", "min", "ttls", "retires")
OPTIONAL = ("ttls", "writes", "provider")   # dropped in this order when a terminal is too narrow for them


def table(items: list[dict[str, Any]], width: int) -> str:
    """A plain table that fits `width`: narrow terminals drop the optional columns, then shorten ids from
    the left (the model's name is at the end of a Bedrock profile id)."""
    cells = [{"provider": r["provider"], "id": r["id"], "input": r["input"], "output": r["output"],
              "read": r["cache_read"], "writes": " ".join(f"{k}:{v}" for k, v in r["cache_write"].items()) or "-",
              "min": str(r["min_cache_tokens"]), "ttls": ",".join(r["ttls"]) or "-",
              "retires": (r["retires"] or "") + ("*" if r.get("time_of_day") else "")} for r in items]
    columns = list(COLUMNS)
    widths = {c: max([len(c)] + [len(row[c]) for row in cells]) for c in columns}

    def over() -> int:
        return sum(widths[c] for c in columns) + 2 * (len(columns) - 1) - width

    for name in OPTIONAL:
        if over() > 0 and over() > widths["id"] - 16:
            columns.remove(name)
    if over() > 0:
        widths["id"] = max(16, widths["id"] - over())
    lines = ["  ".join(c.upper().ljust(widths[c]) for c in columns).rstrip()]
    for row in cells:
        if len(row["id"]) > widths["id"]:
            row["id"] = "…" + row["id"][-(widths["id"] - 1):]
        lines.append("  ".join(row[c].ljust(widths[c]) for c in columns).rstrip())
    note = "USD/MTok; * time-of-day prices; sources and tiers: --json"
    return "\n".join(lines + [note[:width]])
