"""Warm start: what a first request would otherwise pay for, paid before the gateway says it is ready.

Uvicorn accepts connections only once the lifespan's start-up has run, so `/health` (a readiness probe)
answers after this. A cold first request spent ~0.3 s loading tiktoken's cl100k table alone, then compiled
the detectors' regexes, built the price rows' name indexes and imported what each path imports lazily.
Here one synthetic request per caller format runs through the functions the proxy uses (parse, plan,
encode, price) with no planner state (so nothing is learned), no upstream call, no ledger record and no
metric. A failure is logged and the gateway serves anyway: a cold first request beats no gateway.
"""

from __future__ import annotations

import logging
import time
import uuid
from decimal import Decimal

from prefixgate import tokens
from prefixgate.cache_planner import Target, plan
from prefixgate.compact_json import compact
from prefixgate.dialects import anthropic, gemini, openai, responses_adapter
from prefixgate.dialects.neutral import Chat, Part, Turn
from prefixgate.providers.pricing import price_for
from prefixgate.providers.rules import PROVIDERS, Catalog
from prefixgate.usage import Usage

log = logging.getLogger("prefixgate.gateway")

# A system prompt with what the planner's detectors look for (a time, an id) and enough text to plan.
_SYSTEM = (f"Current time: 2026-01-01T00:00:00Z. Request {uuid.UUID(int=0)}.\n"
           + "You answer questions about the warm-up manual, section by section. " * 40)
_QUESTION = "Which section covers start-up?"
_CHAT = Chat([Turn("system", [Part("text", _SYSTEM)]), Turn("user", [Part("text", _QUESTION)])], max_tokens=16)
# The common caller formats, each with a model of its provider; the body is the format's own (`write_chat`).
SAMPLES = ((anthropic.WIRE, "claude-sonnet-5-5"), (openai.WIRE, "gpt-5.4-mini"), (responses_adapter.WIRE, "gpt-5.4-mini"),
           (gemini.WIRE, "gemini-3.8-flash"))


def warm(catalog: Catalog) -> float:
    """Load and exercise what the request path loads lazily; returns the seconds it took."""
    started = time.perf_counter()
    for encoding in ("cl100k_base", "o200k_base"):
        tokens.count_tokens("warm", encoding)
    for provider in PROVIDERS:
        models = catalog.models_of(provider)
        if models:
            price_for(provider, models[0].id, Usage(uncached_input=1, output=1), catalog)
    for wire, model in SAMPLES:
        conv = wire.parse_request(wire.write_chat(_CHAT, model), model=None if wire.model_in_body else model)
        planned = plan(conv, Target(wire.planner_provider, model), None, "rewrite", catalog=catalog)
        compact(wire.encode_request(planned.conversation))
    return time.perf_counter() - started


def warm_or_log(catalog: Catalog) -> None:
    try:
        took = warm(catalog)
    except Exception:  # noqa: BLE001 - warm-up is an optimisation; the gateway must still serve
        log.exception("warm start failed; the first requests will load what it would have")
        return
    log.info("warm start: tokenizers, price rows and the request path ready in %s ms",
             Decimal(took * 1000).quantize(Decimal(1)))
