"""Model lifecycle at the gateway: a request for a model its provider retires soon is warned about (log, ledger
note, response header, dashboard), and one for a retired model follows the route's `on_retired` policy:
`warn` (send it as asked), `replace` (send it to the row's replacement) or `refuse` (a 400 in the caller's
format). Retired rows stay in the catalogue, so old records still price; `plan` and replay never change a
trace's model (they do not come here).

A date is its platform's: the row of the upstream's price rows says it (the Claude API's, OpenAI's, the Gemini API's,
a compatible provider's own). Anthropic's dates apply to Anthropic-operated platforms only, so Claude on Bedrock
(its own rows, none dated) and on Vertex AI (the publisher's rows without their dates: providers/vertex_prices.py)
is served as asked until the catalogue has a date for that platform. Days are the gateway's clock's (tests move it)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, date, datetime

from prefixgate.errors import RequestError
from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.providers.rules import Catalog, ModelRules

log = logging.getLogger("prefixgate.lifecycle")
WARN_DAYS = 30          # how far ahead of its retirement a model is warned about
HEADER = "x-prefixgate-model-retires"


@dataclass(frozen=True)
class Verdict:
    model: str              # the model to send (the replacement under `replace`)
    note: str = ""          # for the ledger record's explanation ("" when the model is not retiring)
    header: str = ""        # the response header's value: "<date>; replacement=<id>"


_warned: set[tuple[str, str]] = set()


def check(provider: str, model: str, on_retired: str, catalog: Catalog, today: date | None = None) -> Verdict:
    """What to do with a request for `model` of `provider` (price rows' provider) under the route's policy."""
    row = _row(provider, model, catalog)
    today = today or datetime.now(UTC).date()
    if row is None or not row.retires_within(WARN_DAYS, today):
        return Verdict(model)
    header = f"{row.retires.isoformat()}; replacement={row.replacement or 'none'}"  # type: ignore[union-attr]
    if not row.retired(today):
        _log_once(provider, row, f"model {row.id} retires on {row.retires}; replacement: {row.replacement or 'none'}")
        return Verdict(model, f"lifecycle: {row.id} retires on {row.retires} (replacement {row.replacement or 'none'})",
                       header)
    said = f"model {model} was retired by {provider} on {row.retires}"
    if on_retired == "refuse":
        raise RequestError(f"{said}; use {row.replacement}" if row.replacement else said, field="model")
    if on_retired == "replace" and row.replacement and _row(provider, row.replacement, catalog) is not None:
        return Verdict(row.replacement, f"lifecycle: {said}; sent to its replacement {row.replacement}", header)
    _log_once(provider, row, said)
    return Verdict(model, f"lifecycle: {said} (on_retired: warn)", header)


def day_of(seconds: float) -> date:
    """The UTC day of a clock reading: the day a retirement is judged on."""
    return datetime.fromtimestamp(seconds, UTC).date()


def _row(provider: str, model: str, catalog: Catalog) -> ModelRules | None:
    try:
        return resolve_model(provider, model, catalog)
    except UnknownModel:
        return None


def _log_once(provider: str, row: ModelRules, message: str) -> None:
    if (provider, row.id) not in _warned:
        _warned.add((provider, row.id))
        log.warning("%s (%s)", message, row.retires_source or "no source")
