"""Retired models at the mock providers: refused, and no longer listed, as each provider does it.

A model is retired on and after its catalogue row's `retires` date (the data gateway/lifecycle.py reads), by the
mock's own calendar: `MockContext.today`, from `prefixgate mock-providers --today` or PREFIXGATE_MOCK_TODAY, else
the date of the mock's clock. The test suite pins it, so that it answers the same on a model's shutdown day.

From that day, in each provider's words (before any streamed event: an HTTP status):
- Claude API: 404 not_found_error "model: <id>". Its dates are the Anthropic-operated platforms' only; Claude on
  Vertex AI retires on Google's dates, which the catalogue does not hold, so Vertex serves it as before.
- OpenAI (Chat Completions, Responses): 404 invalid_request_error, code model_not_found, "The model `<id>` has been
  deprecated, learn more here: https://platform.openai.com/docs/deprecations".
- Bedrock (its own `bedrock` rows): 404 ResourceNotFoundException "This model version has reached the end of its
  life. ...".
- Gemini API: Google routes a shut-down model to the replacement it names and bills it at that model's rates
  (gemini-2.5-pro and -flash from 2026-12-01, https://ai.google.dev/gemini-api/docs/deprecations); one without a
  replacement is its 404 for an unknown model. Vertex AI's own dates are not in the catalogue either.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

from prefixgate.errors import RequestError
from prefixgate.providers.pricing import UnknownModel, resolve_model
from prefixgate.providers.rules import ModelRules

if TYPE_CHECKING:
    from prefixgate.simulation.mock.server import MockContext

ENV = "PREFIXGATE_MOCK_TODAY"
OPENAI_DEPRECATIONS = "https://platform.openai.com/docs/deprecations"
BEDROCK_END_OF_LIFE = ("This model version has reached the end of its life. Please refer to the AWS documentation "
                       "for more details.")


def parse_day(value: str, source: str = ENV) -> date:
    """A calendar day written YYYY-MM-DD."""
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"{source}: expected a date as YYYY-MM-DD, got {value!r}") from None


def today_from_env() -> date | None:
    value = os.environ.get(ENV, "")
    return parse_day(value) if value.strip() else None


def today(ctx: MockContext) -> date:
    return ctx.today or datetime.fromtimestamp(ctx.clock(), UTC).date()


def current(ctx: MockContext, models: Iterable[ModelRules]) -> list[ModelRules]:
    """The models a provider still lists."""
    on = today(ctx)
    return [m for m in models if not m.retired(on)]


def refuse(ctx: MockContext, provider: str, asked: str, rules: ModelRules | None = None) -> None:
    """Raise `provider`'s answer to a call for a retired model (`asked`, as the caller spelt it); nothing for a
    model still served, or one the catalogue does not know (each provider's unknown-model path answers that)."""
    if rules is None:
        try:
            rules = resolve_model(provider, asked, ctx.simulator.catalog)
        except UnknownModel:
            return
    if not is_retired(ctx, rules):
        return
    if provider == "anthropic":
        raise RequestError(f"model: {asked}", field="model", status=404, kind="not_found")
    if provider == "bedrock":
        raise RequestError(BEDROCK_END_OF_LIFE, status=404, kind="not_found", code="ResourceNotFoundException")
    raise RequestError(f"The model `{asked}` has been deprecated, learn more here: {OPENAI_DEPRECATIONS}",
                       status=404, kind="not_found", code="model_not_found")


def is_retired(ctx: MockContext, rules: ModelRules) -> bool:
    return rules.retired(today(ctx))
