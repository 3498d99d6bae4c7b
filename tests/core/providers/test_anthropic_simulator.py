"""Anthropic cache behaviour: writes, reads, TTLs, lookback, minimums, breakpoint limits and the 400s."""

from __future__ import annotations

from decimal import Decimal

import pytest

from prefixgate.errors import RequestError
from prefixgate.providers.pricing import cost_of
from prefixgate.simulation.simulator import Simulator
from prefixgate.tokens import count_tokens
from prefixgate.usage import Usage
from tests.core.providers.support_prompts import anthropic_body, text_of

# Anthropic publishes no per-message token overhead; 3 is the simulator's own estimate (providers.toml says
# so), so this constant follows the table rather than a public source.
OVERHEAD = 3
Q = count_tokens("Why?") + OVERHEAD


def respond(sim: Simulator, body: dict, t: float, **kw: object) -> Usage:
    return sim.respond("anthropic", body, now=t, **kw).usage


def test_first_request_writes_then_reads_and_input_tokens_is_the_tail():
    sim = Simulator()
    body = anthropic_body(system_tokens=2000)
    assert respond(sim, body, 0) == Usage(uncached_input=Q, cache_writes={"5m": 2000})
    assert respond(sim, body, 10) == Usage(uncached_input=Q, cache_read=2000)


def test_5m_entry_expires_but_each_hit_restarts_its_timer():
    sim = Simulator()
    body = anthropic_body(system_tokens=2000)
    respond(sim, body, 0)
    assert respond(sim, body, 299).cache_read == 2000     # refreshed: now lives until 599
    assert respond(sim, body, 598).cache_read == 2000     # refreshed again: until 898
    assert respond(sim, body, 898.5).cache_writes == {"5m": 2000}  # idle for 300 s: gone


def test_1h_entry_outlives_5m():
    sim = Simulator()
    respond(sim, anthropic_body(system_tokens=2000, ttl="1h"), 0)
    assert respond(sim, anthropic_body(system_tokens=2000, ttl="1h"), 3000).cache_read == 2000
    assert respond(sim, anthropic_body(system_tokens=2000, ttl="1h"), 3000 + 3601).cache_writes == {"1h": 2000}


def test_below_the_model_minimum_nothing_is_cached_and_no_error():
    sim = Simulator()
    # Haiku 4.5 needs 4096 tokens; Sonnet 4.6 needs 1024.
    for t in (0, 1):
        usage = respond(sim, anthropic_body("claude-haiku-4-5", system_tokens=3000), t)
        assert usage == Usage(uncached_input=3000 + Q)
    assert respond(sim, anthropic_body("claude-sonnet-4-6", system_tokens=1020), 0).cache_write == 0
    assert respond(sim, anthropic_body("claude-sonnet-4-6", system_tokens=1024), 0).cache_write == 1024


def test_multi_breakpoint_conversation_bills_only_the_delta_past_the_highest_hit():
    sim = Simulator()
    a, b, u1 = text_of(1500), text_of(800, " world"), text_of(600, " stone")
    reply, u2 = text_of(50, " river"), text_of(400, " cloud")
    turn1 = {
        "model": "claude-sonnet-4-6", "max_tokens": 64,
        "system": [{"type": "text", "text": a, "cache_control": {"type": "ephemeral", "ttl": "1h"}},
                   {"type": "text", "text": b, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": u1, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": " and now?"}]}],
    }
    tail = count_tokens(" and now?")
    # 1h covers the first system block; 5m covers the rest up to the last breakpoint; the tail is input.
    assert respond(sim, turn1, 0) == Usage(uncached_input=tail, cache_writes={"1h": 1500, "5m": 800 + 600 + OVERHEAD})

    turn2 = {**turn1, "messages": [
        {"role": "user", "content": [{"type": "text", "text": u1}, {"type": "text", "text": " and now?"}]},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": [{"type": "text", "text": u2, "cache_control": {"type": "ephemeral"}}]},
    ]}
    # The user-1 breakpoint moved away, but the newest breakpoint's lookback finds the entry it wrote.
    read = 1500 + 800 + 600 + OVERHEAD
    delta = tail + (50 + OVERHEAD) + (400 + OVERHEAD)
    assert respond(sim, turn2, 30) == Usage(uncached_input=0, cache_read=read, cache_writes={"5m": delta})


def _blocks_request(marked: int, n: int = 30) -> dict:
    blocks = [{"type": "text", "text": text_of(50, w) + f" block {i}"} for i, w in
              zip(range(n), [" alpha", " beta"] * n, strict=False)]
    blocks[marked] = {**blocks[marked], "cache_control": {"type": "ephemeral"}}
    return {"model": "claude-sonnet-4-6", "max_tokens": 8, "system": text_of(2000),
            "messages": [{"role": "user", "content": blocks}]}


@pytest.mark.parametrize(("later", "hit"), [(23, True), (24, False)])
def test_lookback_checks_20_positions(later: int, hit: bool):
    sim = Simulator()
    first = respond(sim, _blocks_request(4), 0)
    assert first.cache_write > 0
    second = respond(sim, _blocks_request(later), 1)
    # The earlier entry sits at position 5 (system is position 0); from 24 it is the 20th position back.
    assert (second.cache_read == first.cache_write) is hit
    assert (second.cache_read == 0) is not hit


def test_a_run_of_tool_use_blocks_counts_as_one_lookback_position():
    sim = Simulator()
    uses = [{"type": "tool_use", "id": f"t{i}", "name": "look", "input": {"i": i}} for i in range(25)]
    results = [{"type": "tool_result", "tool_use_id": f"t{i}", "content": f"r{i}"} for i in range(25)]
    first_turn = {"type": "text", "text": text_of(2000), "cache_control": {"type": "ephemeral"}}
    body1 = {"model": "claude-sonnet-4-6", "max_tokens": 8, "messages": [{"role": "user", "content": [first_turn]}]}
    written = respond(sim, body1, 0).cache_write
    body2 = {"model": "claude-sonnet-4-6", "max_tokens": 8, "messages": [
        {"role": "user", "content": [{k: v for k, v in first_turn.items() if k != "cache_control"}]},
        {"role": "assistant", "content": uses},
        {"role": "user", "content": [*results, {"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}]},
    ]}
    assert respond(sim, body2, 1).cache_read == written


def test_caches_are_scoped_per_model_and_per_workspace():
    sim = Simulator()
    respond(sim, anthropic_body("claude-sonnet-4-6"), 0, tenant="acme")
    assert respond(sim, anthropic_body("claude-sonnet-4-6"), 1, tenant="other").cache_read == 0
    assert respond(sim, anthropic_body("claude-sonnet-5"), 1, tenant="acme").cache_read == 0   # another model
    # A dated snapshot id is the same model, so the same cache.
    assert respond(sim, anthropic_body("claude-sonnet-4-6"), 2, tenant="acme").cache_read == 2000


def test_parallel_cold_requests_each_pay_the_write():
    sim = Simulator()
    assert respond(sim, anthropic_body(), 0).cache_write == 2000
    assert respond(sim, anthropic_body(), 0.1).cache_write == 2000   # the first response has not started yet
    assert respond(sim, anthropic_body(), 5).cache_read == 2000


def test_tool_choice_change_keeps_system_but_invalidates_messages():
    sim = Simulator()
    body = {"model": "claude-sonnet-4-6", "max_tokens": 8,
            "system": [{"type": "text", "text": text_of(1500), "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": text_of(1500, " stone"), "cache_control": {"type": "ephemeral"}}]}],
            "tool_choice": {"type": "auto"}}
    respond(sim, body, 0)
    assert respond(sim, body, 1).cache_read == 3000 + OVERHEAD
    changed = respond(sim, {**body, "tool_choice": {"type": "none"}}, 2)
    assert changed.cache_read == 1500 and changed.cache_writes == {"5m": 1500 + OVERHEAD}


def two_tier_body(**params: object) -> dict:
    return {"model": "claude-sonnet-5-5", "max_tokens": 8,
            "system": [{"type": "text", "text": text_of(1500), "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": text_of(1500, " stone"), "cache_control": {"type": "ephemeral"}}]}], **params}


# "What invalidates what" (https://github.com/anthropics/skills/blob/main/skills/claude-api/shared/prompt-caching.md):
# thinking and effort changes always invalidate the messages cache; images added or removed invalidate the messages;
# fast mode (`speed`) and the web-search and citations toggles invalidate system and messages; setting effort
# explicitly to its default is no change.
MESSAGES_ONLY = [
    ({"output_config": {"effort": "high"}}, {"output_config": {"effort": "low"}}),
    ({}, {"thinking": {"type": "enabled", "budget_tokens": 1024}}),
]


@pytest.mark.parametrize(("before", "after"), MESSAGES_ONLY, ids=["effort", "thinking"])
def test_effort_and_thinking_changes_rewrite_the_messages_but_read_the_system(before, after):
    sim = Simulator()
    respond(sim, two_tier_body(**before), 0)
    assert respond(sim, two_tier_body(**before), 1).cache_read == 3000 + OVERHEAD
    changed = respond(sim, two_tier_body(**after), 2)
    assert changed.cache_read == 1500 and changed.cache_writes == {"5m": 1500 + OVERHEAD}


def test_effort_set_to_its_default_is_no_change():
    sim = Simulator()
    respond(sim, two_tier_body(), 0)
    assert respond(sim, two_tier_body(output_config={"effort": "high"}), 1).cache_read == 3000 + OVERHEAD


def test_an_image_added_in_a_later_turn_rewrites_the_messages():
    sim = Simulator()
    body = two_tier_body()
    respond(sim, body, 0)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    turn = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": [image, {"type": "text", "text": "and?"}]}]
    later = respond(sim, {**body, "messages": body["messages"] + turn}, 1)
    assert later.cache_read == 1500    # the system only: the earlier messages are written again


def test_fast_mode_rewrites_the_system_too():
    sim = Simulator()
    respond(sim, two_tier_body(), 0)
    changed = respond(sim, two_tier_body(speed="fast"), 1)
    assert changed.cache_read == 0 and changed.cache_writes == {"5m": 3000 + OVERHEAD}


def test_automatic_caching_marks_the_last_block_and_moves_forward():
    sim = Simulator()
    body = {"model": "claude-sonnet-4-6", "max_tokens": 8, "cache_control": {"type": "ephemeral"},
            "system": text_of(2000), "messages": [{"role": "user", "content": "first"}]}
    first = respond(sim, body, 0)
    assert first.uncached_input == 0 and first.cache_write == 2000 + count_tokens("first") + OVERHEAD
    grown = {**body, "messages": [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"},
                                  {"role": "user", "content": "second"}]}
    second = respond(sim, grown, 1)
    assert second.cache_read == first.cache_write
    assert second.cache_write == count_tokens("ok") + count_tokens("second") + 2 * OVERHEAD


def test_five_breakpoints_is_a_400():
    body = {"model": "claude-sonnet-4-6", "max_tokens": 8, "messages": [{"role": "user", "content": [
        {"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}} for i in range(5)]}]}
    with pytest.raises(RequestError) as e:
        Simulator().respond("anthropic", body, now=0)
    assert e.value.status == 400
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in e.value.message


def test_automatic_caching_with_four_explicit_breakpoints_is_a_400():
    body = {"model": "claude-sonnet-4-6", "max_tokens": 8, "cache_control": {"type": "ephemeral"},
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}} for i in range(4)]
                + [{"type": "text", "text": "tail"}]}]}
    with pytest.raises(RequestError, match="automatic caching needs a free cache_control slot"):
        Simulator().respond("anthropic", body, now=0)


def test_automatic_ttl_conflicting_with_explicit_marker_on_last_block_is_a_400():
    body = {"model": "claude-sonnet-4-6", "max_tokens": 8, "cache_control": {"type": "ephemeral", "ttl": "1h"},
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "tail", "cache_control": {"type": "ephemeral"}}]}]}
    with pytest.raises(RequestError, match="conflicts with the explicit cache_control"):
        Simulator().respond("anthropic", body, now=0)


def test_1h_after_5m_is_a_400_naming_the_block():
    body = anthropic_body(ttl="5m")
    body["messages"] = [{"role": "user", "content": [
        {"type": "text", "text": "q", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}]
    with pytest.raises(RequestError) as e:
        Simulator().respond("anthropic", body, now=0)
    assert e.value.field == "messages.0.content.0.cache_control.ttl"
    assert "must not come after a ttl='5m'" in e.value.message


@pytest.mark.parametrize("block", [
    {"type": "text", "text": "", "cache_control": {"type": "ephemeral"}},
    {"type": "thinking", "thinking": "hmm", "signature": "s", "cache_control": {"type": "ephemeral"}},
])
def test_markers_on_unmarkable_blocks_are_400s(block: dict):
    body = {"model": "claude-sonnet-4-6", "max_tokens": 8, "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": [block]}]}
    with pytest.raises(RequestError, match="cache_control cannot be set for"):
        Simulator().respond("anthropic", body, now=0)


def test_prewarm_with_max_tokens_zero_writes_but_not_with_stream():
    sim = Simulator()
    assert respond(sim, anthropic_body(max_tokens=0), 0).cache_write == 2000
    with pytest.raises(RequestError, match="cannot be combined with stream"):
        respond(sim, anthropic_body(max_tokens=0, stream=True), 1)


def test_bad_ttl_and_unknown_model_are_rejected_in_anthropic_terms():
    with pytest.raises(RequestError, match="must be '5m' or '1h'"):
        Simulator().respond("anthropic", anthropic_body(ttl="3600"), now=0)
    with pytest.raises(RequestError) as e:
        Simulator().respond("anthropic", anthropic_body("claude-nonexistent-9"), now=0)
    assert e.value.status == 404 and e.value.kind == "not_found"


def test_count_tokens_is_the_whole_prompt_and_does_not_cache():
    sim = Simulator()
    body = anthropic_body()
    body.pop("max_tokens")
    assert sim.count_tokens("anthropic", body) == 2000 + Q
    assert respond(sim, anthropic_body(), 1).cache_read == 0


def test_break_even_5m_after_one_read_1h_after_two():
    """A 5m write pays off after one read; a 1h write after two (Sonnet 4.6 prices;
    https://platform.claude.com/docs/en/build-with-claude/prompt-caching)."""
    def spend(ttl: str | None, requests: int, cache: bool = True) -> Decimal:
        sim, total = Simulator(), Decimal(0)
        for t in range(requests):
            usage = respond(sim, anthropic_body(system_tokens=10_000, ttl=ttl, cache=cache), t * 10)
            total += cost_of("anthropic", "claude-sonnet-4-6", usage).total
        return total

    assert spend("5m", 1) > spend(None, 1, cache=False)
    assert spend("5m", 2) < spend(None, 2, cache=False)
    assert spend("1h", 2) > spend(None, 2, cache=False)
    assert spend("1h", 3) < spend(None, 3, cache=False)
    # Exactly: 10,000 tokens written at $3.75 + read at $0.30, plus the question at $3, per MTok.
    assert spend("5m", 2) == Decimal("0.0375") + Decimal("0.003") + 2 * Q * Decimal("0.000003")
