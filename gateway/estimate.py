"""What a request may cost before (or without) the provider saying so: the estimate admission reserves
against a budget, and the usage of a stream cut before its usage arrived."""

from __future__ import annotations

from dataclasses import replace

from prefixgate.ir import Conversation
from prefixgate.usage import Usage, prompt_estimate
from prefixgate.usage import cut_usage as cut_usage  # lives beside prompt_estimate, for the SDK wrapper too

# Admission's estimate, before any tokenizer runs: the prompt from the body's size (`prompt_estimate`), and the
# output reserved for a request that sets no output limit of its own. Such a request may
# run to the model's own limit (translated into Claude it asks for it: dialects/output_limit.py, up to 128,000),
# but reserving that (31x 4,096 per request) would refuse callers with most of their budget left; the
# reservation is an estimate, and the request settles at what it really cost.
UNCAPPED_OUTPUT_TOKENS = 4096


def requested_output(params: dict) -> int | None:
    """The output limit a request sets, in whichever format's field it uses."""
    nested = [params.get("generationConfig"), params.get("generation_config"), params.get("inferenceConfig")]
    values = [params.get(k) for k in ("max_tokens", "max_completion_tokens", "max_output_tokens")]
    values += [n.get(k) for n in nested if isinstance(n, dict) for k in ("maxOutputTokens", "max_output_tokens", "maxTokens")]
    return next((v for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 0), None)


def estimated_usage(conv: Conversation, raw: bytes) -> Usage:
    """What admission reserves for: the prompt (from the body's size) and the output the request may run to."""
    output = requested_output(conv.params)
    return replace(prompt_estimate(raw), output=UNCAPPED_OUTPUT_TOKENS if output is None else output)
