"""The planner benchmark's OpenAI Responses trace: a support agent whose `instructions` start with the
current time, sessions of 1-5 turns resent whole each turn (`store: false`, as Codex sends them), with
function tools, on two models:

- gpt-4o caches implicitly (1024-token minimum, 128-token steps, free writes), so what the planner can do is
  make the prefix static (the time moves into the newest user turn), keep one `prompt_cache_key` per static
  prefix and ask for 24h retention when reuse comes after the in-memory window. The expert is the same
  traffic restructured by hand with hindsight: static instructions, the time in the user turn, one cache key
  for the route and 24h retention (free on these models, never a loss).
- gpt-6.2-sol (GPT-5.6+) writes at breakpoints only, at 1.25x input, and reads a prefix only where one was
  written. `instructions` is a string no breakpoint can mark, so a new session would write the handbook
  again. The expert also sends the instructions as the first input item, a developer message marked with a
  breakpoint, so every session after the first reads them.
"""

from __future__ import annotations

import random

from planner_traces import prose

from prefixgate.providers.trace import TraceRecord

MODELS = ("gpt-4o", "gpt-6.2-sol")


def _ts(t: float) -> str:
    s = int(t)
    return f"2026-11-22T{9 + s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}Z"


def _record(t: float, body: dict) -> TraceRecord:
    return TraceRecord(line=0, t=t, provider="openai", model=body["model"], body=body, route="responses",
                       tenant="acme", output_tokens=120)


def _expert(model: str, handbook: str, tools: list, items: list) -> dict:
    instructions = f"You are Ava, ACME's support agent.\n{handbook}"
    if model == "gpt-4o":
        return {"model": model, "instructions": instructions, "tools": tools, "input": items, "store": False,
                "prompt_cache_key": "acme-support", "prompt_cache_retention": "24h"}
    developer = {"role": "developer", "content": [{"type": "input_text", "text": instructions,
                                                   "prompt_cache_breakpoint": {"mode": "explicit"}}]}
    return {"model": model, "tools": tools, "input": [developer, *items], "store": False,
            "prompt_cache_key": "acme-support"}


def responses_support(seed: int = 7, model: str = MODELS[0]) -> tuple[list, list]:
    rng = random.Random(seed)
    handbook = "ACME support handbook.\n" + "\n".join(prose(rng, 6) for _ in range(30))
    tools = [{"type": "function", "name": f"lookup_{i}", "description": prose(rng, 2),
              "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}
             for i in range(4)]
    orig, expert = [], []
    for _ in range(40):
        t = rng.uniform(0, 7200)
        items_o: list = []
        items_e: list = []
        for k in range(rng.randint(1, 5)):
            ctx = f"Current date and time: {_ts(t)}\n"
            question = f"Question {k}: " + prose(rng, 2)
            items_o = [*items_o, {"role": "user", "content": question}]
            orig.append(_record(t, {"model": model, "instructions": f"You are Ava, ACME's support agent.\n{ctx}{handbook}",
                                    "tools": tools, "input": items_o, "store": False}))
            items_e = [*items_e, {"role": "user", "content": [{"type": "input_text", "text": "Context:\n" + ctx},
                                                              {"type": "input_text", "text": question}]}]
            expert.append(_record(t, _expert(model, handbook, tools, items_e)))
            answer = {"type": "message", "role": "assistant",
                      "content": [{"type": "output_text", "text": prose(rng, 4), "annotations": []}]}
            items_o, items_e = [*items_o, answer], [*items_e, answer]
            t += rng.uniform(20, 150) if rng.random() < 0.7 else rng.uniform(400, 1800)
    return orig, expert
