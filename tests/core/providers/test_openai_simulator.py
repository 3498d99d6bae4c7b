"""OpenAI cache behaviour: 128-token steps, retention, routing overflow, and the GPT-5.6+ breakpoint regime."""

from __future__ import annotations

import pytest

from prefixgate.errors import RequestError
from prefixgate.simulation.simulator import Simulator
from prefixgate.usage import Usage
from tests.core.providers.support_prompts import text_of

# Per-message and reply-priming tokens of ChatML: 3 and 3, per OpenAI's counting cookbook
# (https://cookbook.openai.com/examples/how_to_count_tokens_with_tiktoken), typed here, not read from the table.
ROLE = 3
PRIMING = 3


def chat(model: str, system: str, user: str = " hi", **extra: object) -> dict:
    return {"model": model, "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            **extra}


def usage(sim: Simulator, body: dict, t: float, tenant: str = "default") -> Usage:
    return sim.respond("openai", body, now=t, tenant=tenant).usage


@pytest.mark.parametrize(("system_tokens", "cached"), [
    (1000, 0),            # prompt 1000+3+3+1 < 1024: never cached
    (1100, 1024),         # 1107 cacheable tokens -> 1024
    (1300, 1280),         # 1307 -> 1024 + 2 * 128
    (5000, 4992),         # 5007 -> 1024 + 31 * 128
])
def test_cached_tokens_grow_in_128_token_steps_from_1024(system_tokens: int, cached: int):
    sim = Simulator()
    body = chat("gpt-5.4", text_of(system_tokens))
    first = usage(sim, body, 0)
    prompt = ROLE + system_tokens + ROLE + 1 + PRIMING
    assert first == Usage(uncached_input=prompt)
    assert usage(sim, body, 5) == Usage(uncached_input=prompt - cached, cache_read=cached)


def test_shared_prefix_with_a_different_suffix_reads_the_common_steps():
    sim = Simulator()
    shared = text_of(1500)
    usage(sim, chat("gpt-5.4", shared + text_of(600, " stone")), 0)
    # Common prefix: 3 + 1500 tokens (+ the suffix diverges) -> 1024 + 3 * 128 = 1408.
    assert usage(sim, chat("gpt-5.4", shared + text_of(600, " cloud")), 1).cache_read == 1408


def test_in_memory_retention_clears_after_idle_while_24h_keeps():
    sim = Simulator()
    body = chat("gpt-5.4", text_of(2000), prompt_cache_retention="in_memory")
    usage(sim, body, 0)
    assert usage(sim, body, 299).cache_read > 0
    assert usage(sim, body, 299 + 301).cache_read == 0
    extended = chat("gpt-5.4", text_of(2000, " stone"), prompt_cache_retention="24h")
    usage(sim, extended, 0)
    assert usage(sim, extended, 20 * 3600).cache_read > 0
    # The default for non-ZDR organisations is 24h (openai-python, `prompt_cache_retention`:
    # https://github.com/openai/openai-python, types/chat/completion_create_params.py).
    default = chat("gpt-5.4", text_of(2000, " river"))
    usage(sim, default, 0)
    assert usage(sim, default, 3 * 3600).cache_read > 0


def test_gpt_5_5_accepts_only_24h_retention():
    with pytest.raises(RequestError) as e:
        usage(Simulator(), chat("gpt-5.5", text_of(10), prompt_cache_retention="in_memory"), 0)
    assert e.value.field == "prompt_cache_retention" and "gpt-5.5" in e.value.message


def test_overflow_past_15_requests_a_minute_starts_a_cold_machine():
    sim = Simulator()
    body = chat("gpt-5.4", text_of(2000))
    reads = [usage(sim, body, i * 2.0).cache_read for i in range(20)]   # 30 requests/min
    # Request 1 warms machine 0; request 16 is the 16th in the minute and lands on a new, cold machine.
    cold = [i for i, r in enumerate(reads) if r == 0]
    assert cold == [0, 15]


def test_prompt_cache_key_splits_routes_so_each_key_warms_its_own_machine():
    sim = Simulator()
    system = text_of(2000)
    for key in ("a", "b"):
        assert usage(sim, chat("gpt-5.4", system, prompt_cache_key=key), 0).cache_read == 0
    assert usage(sim, chat("gpt-5.4", system, prompt_cache_key="a"), 1).cache_read > 0
    with pytest.raises(RequestError, match="prompt_cache_key"):
        usage(sim, chat("gpt-5.4", system, prompt_cache_key=7), 2)


def test_organisations_do_not_share_caches():
    sim = Simulator()
    body = chat("gpt-5.4", text_of(2000))
    usage(sim, body, 0, tenant="org-a")
    assert usage(sim, body, 1, tenant="org-b").cache_read == 0


# ---- GPT-5.6+ ------------------------------------------------------------------------------------

def test_implicit_breakpoint_writes_at_1_25x_and_reads_the_whole_marked_prefix():
    sim = Simulator()
    body = chat("gpt-6-sol", text_of(3000))
    prompt = ROLE + 3000 + ROLE + 1 + PRIMING
    assert usage(sim, body, 0) == Usage(uncached_input=PRIMING, cache_writes={"30m": prompt - PRIMING})
    # No 128-token rounding: the read ends exactly at the breakpoint.
    assert usage(sim, body, 60) == Usage(uncached_input=PRIMING, cache_read=prompt - PRIMING)


def test_a_changing_suffix_gets_no_hit_without_an_explicit_breakpoint_at_the_stable_boundary():
    sim = Simulator()
    system = text_of(3000)
    usage(sim, chat("gpt-6-sol", system, " first"), 0)
    assert usage(sim, chat("gpt-6-sol", system, " second"), 1).cache_read == 0

    marked = {"model": "gpt-6-sol", "messages": [
        {"role": "system", "content": [{"type": "text", "text": system, "prompt_cache_breakpoint": {"mode": "explicit"}}]},
        {"role": "user", "content": " third"}]}
    usage(sim, marked, 2)
    again = {**marked, "messages": [marked["messages"][0], {"role": "user", "content": " fourth"}]}
    assert usage(sim, again, 3).cache_read == ROLE + 3000


def test_a_growing_conversation_reads_the_breakpoint_its_last_turn_wrote():
    """The implicit breakpoint moves to each turn's newest message; the next turn's prompt still contains the last
    turn's, and matching considers "the latest 80 breakpoints in the conversation" (the SDK's docstring), not only
    those this request marks: the conversation is read through its last turn and only the new turn is written."""
    sim = Simulator()
    first = chat("gpt-6-sol", text_of(3000), " first")
    usage(sim, first, 0)
    grown = {**first, "messages": [*first["messages"], {"role": "assistant", "content": " ok"},
                                   {"role": "user", "content": " second"}]}
    through_first = ROLE + 3000 + ROLE + 1        # what the first request wrote: through its user message
    assert usage(sim, grown, 60) == Usage(uncached_input=PRIMING, cache_read=through_first,
                                          cache_writes={"30m": ROLE + 1 + ROLE + 1})
    # Exact match only: a prompt that departs inside that prefix (another user turn) reads nothing of it.
    other = {**first, "messages": [first["messages"][0], {"role": "user", "content": " third"}]}
    assert usage(sim, other, 61).cache_read == 0


def test_explicit_mode_without_breakpoints_caches_nothing():
    sim = Simulator()
    body = chat("gpt-6-sol", text_of(3000), prompt_cache_options={"mode": "explicit"})
    for t in (0, 1):
        assert usage(sim, body, t) == Usage(uncached_input=ROLE + 3000 + ROLE + 1 + PRIMING)


def test_at_most_four_breakpoints_are_written_the_latest_ones():
    sim = Simulator()
    parts = [{"type": "text", "text": text_of(400, w), "prompt_cache_breakpoint": {"mode": "explicit"}}
             for w in (" alpha", " beta", " gamma", " delta", " omega", " river")]
    body = {"model": "gpt-6-sol", "prompt_cache_options": {"mode": "explicit"},
            "messages": [{"role": "user", "content": parts}]}
    first = usage(sim, body, 0)
    # Six markers: only the latest four (ending at 1203 .. 2403 tokens) are written; the first two are not.
    assert first.cache_writes == {"30m": ROLE + 2400}
    truncated = {**body, "messages": [{"role": "user", "content": parts[:2]}]}
    assert usage(sim, truncated, 1).cache_read == 0
    three = {**body, "messages": [{"role": "user", "content": parts[:3]}]}
    assert usage(sim, three, 2).cache_read == ROLE + 1200


def test_breakpoint_validation():
    sim = Simulator()
    on_assistant = {"model": "gpt-6-sol", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "x", "prompt_cache_breakpoint": {"mode": "explicit"}}]},
        {"role": "user", "content": "more"}]}
    with pytest.raises(RequestError, match="not allowed on assistant"):
        usage(sim, on_assistant, 0)
    with pytest.raises(RequestError) as e:
        usage(sim, chat("gpt-6-sol", "x", prompt_cache_options={"mode": "sometimes"}), 0)
    assert e.value.field == "prompt_cache_options.mode"
    with pytest.raises(RequestError, match="'12h' is not supported with model gpt-6-sol"):
        usage(sim, chat("gpt-6-sol", "x", prompt_cache_options={"ttl": "12h"}), 0)


def test_gpt_6_2_sol_12h_writes_live_12_hours():
    sim = Simulator()
    body = chat("gpt-6.2-sol", text_of(3000), prompt_cache_options={"ttl": "12h"})
    assert set(usage(sim, body, 0).cache_writes) == {"12h"}
    assert usage(sim, body, 11 * 3600).cache_read > 0
    short = chat("gpt-6.2-sol", text_of(3000, " stone"))
    usage(sim, short, 0)
    assert usage(sim, short, 31 * 60).cache_read == 0


def test_a_breakpoint_with_its_own_ttl_writes_and_lives_at_that_ttl():
    """`prompt_cache_breakpoint` may carry its own `ttl` (openai-python 3.57.0); without one the request's applies."""
    sim = Simulator()
    system = text_of(3000)
    body = {"model": "gpt-6.2-sol", "input": [
        {"role": "developer", "content": [{"type": "input_text", "text": system,
                                           "prompt_cache_breakpoint": {"mode": "explicit", "ttl": "12h"}}]},
        {"role": "user", "content": [{"type": "input_text", "text": text_of(1500, " stone")}]}]}
    first = sim.respond("openai", body, now=0).usage
    assert set(first.cache_writes) == {"12h", "30m"} and first.cache_writes["30m"] == 1500 + ROLE
    # After 31 minutes the request-TTL entry is gone and the 12-hour one is read.
    assert sim.respond("openai", body, now=31 * 60).usage.cache_read == first.cache_writes["12h"]
    too_long = {**body, "model": "gpt-6-sol"}      # a model that offers 30m only
    with pytest.raises(RequestError) as e:
        sim.respond("openai", too_long, now=0)
    assert e.value.field == "input.0.content.0.prompt_cache_breakpoint.ttl"


def test_a_responses_message_is_the_same_prefix_as_a_string_and_as_a_marked_part():
    """A breakpoint needs a content part: the planner marks a message sent as a string by sending it as one
    `input_text` part. The model reads the same text either way, so the next request, which sends it as a string
    again, reads what the marked one wrote."""
    sim = Simulator()
    question = text_of(2000)
    marked = {"model": "gpt-6.2-sol", "prompt_cache_options": {"mode": "explicit"}, "input": [
        {"role": "user", "content": [{"type": "input_text", "text": question,
                                      "prompt_cache_breakpoint": {"mode": "explicit"}}]}]}
    written = sum(sim.respond("openai", marked, now=0).usage.cache_writes.values())
    later = {"model": "gpt-6.2-sol", "input": [{"role": "user", "content": question},
                                               {"role": "assistant", "content": " ok"},
                                               {"role": "user", "content": " more"}]}
    assert written > 2000 and sim.respond("openai", later, now=60).usage.cache_read == written
