"""What admission holds for a prompt, by the marks of the body sent upstream (gateway/estimate.held_cost).

Claude writes its cache only at a marked breakpoint (`cache_control`, Bedrock's `cachePoint`) or at the top-level
automatic marker, and bills each write at the TTL's write price; a prompt past the last mark is billed as input
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching). OpenAI writes every prompt's prefix with
no marker, and bills it from GPT-5.6 on (https://developers.openai.com/api/docs/guides/prompt-caching)."""

from __future__ import annotations

import asyncio
import json
import math
from decimal import Decimal
from functools import partial
from types import SimpleNamespace

from prefixgate.config import Settings
from prefixgate.cost import Price
from prefixgate.dialects import anthropic, converse
from prefixgate.gateway import estimate
from prefixgate.gateway import proxy as proxy_module
from prefixgate.gateway.estimate import held_cost
from prefixgate.gateway.proxy import Proxy
from prefixgate.providers.rules import default_catalog
from prefixgate.usage import Usage

# Claude Sonnet 5.5's published prices, USD per million tokens: input $2, writes $2.50 (5 minutes) and $4 (1 hour),
# reads $0.20, output $10.
SONNET = Price(Decimal(2), Decimal(10), Decimal("0.20"), {"5m": Decimal("2.50"), "1h": Decimal(4)})
INPUT, WRITE_1H, OUTPUT = Decimal(2), Decimal(4), Decimal(10)
MTOK = Decimal(10**6)
MAX_TOKENS = 16
BYTES_PER_TOKEN = 4         # docs/gateway.md: a body's size / 4 is its prompt's tokens at admission


def body(marked: bool, automatic: bool = False) -> dict:
    """A system prompt (marked for an hour, or not) and a long first turn nothing marks."""
    system = {"type": "text", "text": "Warehouse manual. " * 2000}
    if marked:
        system["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    turn = {"type": "text", "text": "Today's pallets, one a line. " * 1500}
    out = {"model": "claude-sonnet-5-5", "max_tokens": MAX_TOKENS, "system": [system],
           "messages": [{"role": "user", "content": [turn]}]}
    if automatic:
        out["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    return out


def held(payload: dict) -> tuple[Decimal, int, int]:
    """(the hold, the prompt's tokens by size, the unmarked turn's tokens by size) of `payload` as sent."""
    raw = json.dumps(payload, separators=(",", ":")).encode()
    prompt = Usage(uncached_input=math.ceil(len(raw) / BYTES_PER_TOKEN), output=MAX_TOKENS)
    turn = len(json.dumps(payload["messages"][0]["content"][0], separators=(",", ":"))) // BYTES_PER_TOKEN
    return held_cost(prompt, SONNET, anthropic.parse_request(raw)), prompt.uncached_input, turn


def test_an_unmarked_prompt_is_held_at_the_input_price_where_claude_writes_only_at_marks():
    hold, tokens, _ = held(body(marked=False))
    assert hold == (tokens * INPUT + MAX_TOKENS * OUTPUT) / MTOK


def test_a_marked_prompt_is_held_at_the_write_price_through_its_last_mark_and_at_input_after_it():
    hold, tokens, turn = held(body(marked=True))
    assert turn > 5000
    assert hold == ((tokens - turn) * WRITE_1H + turn * INPUT + MAX_TOKENS * OUTPUT) / MTOK


def test_the_top_level_automatic_marker_may_write_the_whole_prompt():
    hold, tokens, _ = held(body(marked=False, automatic=True))
    assert hold == (tokens * WRITE_1H + MAX_TOKENS * OUTPUT) / MTOK


def test_a_prompt_whose_marks_are_not_known_yet_is_held_at_the_dearest_write():
    prompt = Usage(uncached_input=30_000, output=MAX_TOKENS)
    assert held_cost(prompt, SONNET) == (30_000 * WRITE_1H + MAX_TOKENS * OUTPUT) / MTOK


def test_the_catalogue_says_who_writes_only_at_marks():
    catalog = default_catalog()
    assert not catalog.writes_unmarked("anthropic") and not catalog.writes_unmarked("bedrock")
    assert catalog.writes_unmarked("openai") and catalog.writes_unmarked("gemini")


def test_a_mark_inside_a_tool_result_writes_through_it():
    payload = body(marked=False)
    result = {"type": "text", "text": "Dock 4 is free.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    payload["messages"] += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "docks", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": [result]}]}]
    hold, tokens, _ = held(payload)
    assert hold == (tokens * WRITE_1H + MAX_TOKENS * OUTPUT) / MTOK


def converse_body(where: str) -> dict:
    """A Bedrock Converse body: a tool, a system prompt and a first turn, with one `cachePoint` after the `where`
    (tools or system) part: Converse caches tools, then system, then messages (the AWS prompt-caching guide)."""
    point = {"cachePoint": {"type": "default", "ttl": "1h"}}
    tool = {"toolSpec": {"name": "docks", "description": "Which docks are free. " * 1500,
                         "inputSchema": {"json": {"type": "object"}}}}
    return {"toolConfig": {"tools": [tool, *([point] if where == "tools" else [])]},
            "system": [{"text": "Warehouse manual. " * 2000}, *([point] if where == "system" else [])],
            "messages": [{"role": "user", "content": [{"text": "Today's pallets, one a line. " * 1500}]}],
            "inferenceConfig": {"maxTokens": MAX_TOKENS}}


def test_a_converse_cache_point_writes_through_its_part_alone():
    for where, unmarked in (("tools", ("system", "messages")), ("system", ("messages",))):
        payload = converse_body(where)
        raw = json.dumps(payload, separators=(",", ":")).encode()
        prompt = Usage(uncached_input=math.ceil(len(raw) / BYTES_PER_TOKEN), output=MAX_TOKENS)
        after = (len(json.dumps(payload["system"][0], separators=(",", ":"))) if "system" in unmarked else 0) + \
            len(json.dumps(payload["messages"][0]["content"][0], separators=(",", ":")))
        tail = after // BYTES_PER_TOKEN
        hold = held_cost(prompt, SONNET, converse.parse_request(raw, model="anthropic.claude-sonnet-5-5"))
        assert hold == ((prompt.uncached_input - tail) * WRITE_1H + tail * INPUT + MAX_TOKENS * OUTPUT) / MTOK, where


def test_an_uncapped_requests_admission_reads_its_marks_once(monkeypatch):
    """Reading a body's marks serialises every block past the last one (about 0.3-0.7 ms for a 20,000-token agent
    history whose one mark is its system prompt). An uncapped request's admission (a Converse caller's to Claude on
    Bedrock, planning off) read them three times: for a capped estimate it then threw away, and for its worst and
    its least cost, whose prompts cost the same."""
    reads = []
    monkeypatch.setattr(estimate, "writable", lambda sent, fresh, dearest=None: reads.append(sent) or (0, set()))
    monkeypatch.setattr(proxy_module, "unseen_prompt", lambda proxy, call: asyncio.sleep(0, Usage()))
    payload = converse_body("system")
    del payload["inferenceConfig"]      # Converse's maxTokens is optional: the request is uncapped
    raw = json.dumps(payload).encode()
    conv = converse.parse_request(raw, model="anthropic.claude-sonnet-5-5")
    target = SimpleNamespace(upstreams=["bedrock"], model="anthropic.claude-sonnet-5-5")
    call = SimpleNamespace(caller=SimpleNamespace(key=SimpleNamespace(budget=object())), conv=conv, raw=raw,
                           route=SimpleNamespace(targets=[target], max_request_usd=None), uncapped=False)
    admitted: list = []

    async def admit(key: object, usd: Decimal, least: Decimal | None = None) -> None:
        admitted.append((usd, least))

    gateway = SimpleNamespace(policy=SimpleNamespace(upstreams={"bedrock": object()}), settings=Settings(),
                              limits=SimpleNamespace(admit=admit), _priced=lambda *a: (SONNET, 64_000),
                              _as_sent=lambda *a: conv)
    gateway.estimated_cost = partial(Proxy.estimated_cost, gateway)
    asyncio.run(Proxy.admit(gateway, call, bounds_output=True))  # type: ignore[arg-type]
    tokens = math.ceil(len(raw) / BYTES_PER_TOKEN)
    # With no mark read (`writable` says 0 here), the prompt is held at input; the answer at up to 64,000 tokens.
    assert admitted == [((tokens * INPUT + 64_000 * OUTPUT) / MTOK, (tokens * INPUT + 16 * OUTPUT) / MTOK)]
    assert len(reads) == 1
