"""What a request may cost before (or without) the provider saying so: the estimate admission reserves
against a budget, the output an uncapped request's hold pays for, and the usage of a stream cut before its usage
arrived."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from prefixgate.compact_json import compact_bytes
from prefixgate.cost import MTOK, Price
from prefixgate.dialects import wire_format
from prefixgate.dialects.wire import WireFormat
from prefixgate.ir import Block, Conversation
from prefixgate.usage import BYTES_PER_TOKEN, Usage, prompt_estimate
from prefixgate.usage import cut_usage as cut_usage  # lives beside prompt_estimate, for the SDK wrapper too

# Admission's estimate, before any tokenizer runs: the prompt from the body's size (`prompt_estimate`), and the
# output of a request that sets no output limit of its own, where no budget binds it (a key with none), or where a
# route's `max_request_usd` stands in for it, and what a hang-up before its answer is billed at.
UNCAPPED_OUTPUT_TOKENS = 4096
# A budgeted key's uncapped request may run to the model's own limit (translated into Claude it asks for it:
# dialects/output_limit.py), so admission holds that worst case, or what the budget has left, and the request goes
# upstream with an output limit its hold pays for (`output_bound`). Holding only an estimate and bounding the answer
# near the budget's end would not keep the budget: N concurrent requests, each holding 4,096 tokens while each may
# run to 128,000, spend up to N times what was held. The cost: fewer concurrent uncapped requests fit a small budget
# at full length (later ones go bounded, and are refused once what is left pays for less than a minimal answer).
MIN_OUTPUT_TOKENS = 16              # a minimal answer: the Responses API refuses a smaller max_output_tokens
LONGEST_OUTPUT_TOKENS = 128_000     # a model the catalogue gives no limit (OpenAI's): as long as GPT-5.x answers
BOUND_HEADER = "x-prefixgate-budget-bound"      # the output limit the key's budget set, where it set one


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


def writable(sent: Conversation, fresh: int, dearest: str | None = None) -> tuple[int, set[str]]:
    """How many of `sent`'s `fresh` prompt tokens (by size, as `prompt_estimate` counts them) a cache write may
    cover where its provider writes only at marks, and the TTLs of the marks that may write them: all with a
    top-level automatic marker (it moves to the prompt's end), none without a mark, else all but the blocks past the
    last mark (one on a block, or one nested inside it: a tool result's own text blocks may carry one). The marks
    are read for their TTLs from the last back, until `dearest` (the dearest write's TTL) is among them."""
    wire = wire_format(sent.dialect)
    automatic = wire.automatic_ttl(sent)
    ttls: set[str] = set() if automatic is None else {automatic}
    marked = automatic is not None      # a mark is behind us: the blocks from here back may be written
    tail = 0                            # the bytes past the last mark
    mark = f'"{wire.mark_field}"'.encode()
    for block in reversed(sent.blocks()):
        if marked:
            if dearest in ttls:
                break
            ttls.update(_marks_of(wire, block))
            continue
        native = compact_bytes(block.native)
        marks = _marks_of(wire, block) if block.checkpoint is not None or mark in native else []
        if marks:
            ttls.update(marks)
            marked = True
        else:
            tail += len(native)
    return (max(0, fresh - tail // BYTES_PER_TOKEN) if marked else 0), ttls


def _marks_of(wire: WireFormat, block: Block) -> list[str]:
    """The TTLs of a block's marks: its checkpoint's and those nested inside it."""
    return [*wire.marks_within(block.native), *([block.checkpoint.ttl] if block.checkpoint is not None else [])]


def _prompt_cost(prompt: Usage, price: Price, sent: Conversation | None) -> Decimal:
    """The prompt at the dearest rate it may be billed at. `sent`: the body as it goes upstream, where its
    provider writes the cache only at the marks it carries (Claude's, Bedrock's), and its planner places no more:
    the part past its last mark is held at the input price, as nothing writes it, and the rest at the dearest write
    its marks' TTLs ask for (all 5-minute marks: the 5-minute write, 1.25 times the input price on Claude, not the
    hour-long one's twice). None: any part may be written (a provider that writes unmarked prompts; a body the
    planner has yet to mark), so all of it is held at the dearest write rate. What an explicit cache holds is only
    ever read (unseen_prompt.py)."""
    dearest = max([price.input, *price.cache_write.values()])
    fresh = prompt.input_total - prompt.cache_read
    written, rate = fresh, dearest
    if sent is not None and dearest > price.input:
        written, ttls = writable(sent, fresh, max(price.cache_write, key=price.cache_write.__getitem__))
        # A TTL the price table lacks (or a mark whose TTL cannot be read) may cost the dearest write.
        rate = max([price.input, *(price.cache_write.get(ttl, dearest) for ttl in ttls)])
    return (written * rate + (fresh - written) * price.input + prompt.cache_read * price.cache_read) / MTOK


def held_cost(usage: Usage, price: Price, sent: Conversation | None = None) -> Decimal:
    """What admission holds for `usage` (an estimate: its prompt, its output limit): the prompt at the dearest rate
    it may be billed at (`_prompt_cost`: `sent`, the body as it goes upstream where its marks alone can write)
    and the output at the output price. Held at the plain input price, N concurrent capped requests whose
    prompts the caller marks for an hour-long write each held half what it spent; held at the write price where
    nothing marks it, N such requests to Claude each held twice what it could spend."""
    return _prompt_cost(usage, price, sent) + usage.output * price.output / MTOK


def uncapped_costs(prompt: Usage, price: Price, limit: int, sent: Conversation | None = None
                   ) -> tuple[Decimal, Decimal | None]:
    """(worst, least) an uncapped request costs: its prompt and `limit` output tokens, or a minimal answer (None
    where output is free: no answer's length then needs bounding)."""
    held = _prompt_cost(prompt, price, sent)     # once: reading `sent`'s marks serialises its blocks
    least = held + MIN_OUTPUT_TOKENS * price.output / MTOK if price.output else None
    return held + limit * price.output / MTOK, least


def output_bound(held_usd: Decimal, prompt: Usage, price: Price, limit: int, sent: Conversation | None = None) -> int:
    """The most output tokens `held_usd` pays for after the prompt (`sent`: as `held_cost` takes it), up to `limit`
    (the model's own)."""
    if not price.output:
        return limit
    return max(0, min(limit, int((held_usd - _prompt_cost(prompt, price, sent)) * MTOK / price.output)))
