"""CPU time of the request parse, per call: a Gemini chat's history (first request, then its next turns, which take
the resent path) and an agent's Anthropic body given as bytes and as text (load_body's checks).

    .venv/bin/python bench/parse_costs.py [--turns 600] [--rounds 25]

Each figure is the least of `--rounds` timings (time.process_time, so the shared machine's other work weighs less).
The history is synthetic (Gemini's multi-turn shape: contents of alternating user and model turns, a system
instruction and generation config after them, as the google-genai SDK writes them).
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.agent_request import WORDS, agent_body  # noqa: E402
from prefixgate.dialects import gemini, validate  # noqa: E402


def gemini_history(turns: int, seed: int = 3) -> dict:
    """A generateContent body of `turns` turns (~400 bytes each)."""
    rng = random.Random(seed)
    contents = [{"role": "user" if i % 2 == 0 else "model",
                 "parts": [{"text": f"Turn {i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 70)))}]}
                for i in range(turns)]
    return {"contents": contents, "systemInstruction": {"parts": [{"text": "Be terse."}]},
            "generationConfig": {"maxOutputTokens": 512, "temperature": 0.2}}


def least_ms(call, number: int, rounds: int) -> float:
    return min(timeit.Timer(call, timer=time.process_time).repeat(number=number, repeat=rounds)) / number * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()
    history = gemini_history(args.turns)
    # A session's next turns differ in their last text; first requests (other sessions) in their first.
    nexts, firsts = [], []
    for i in range(60):
        body = copy.deepcopy(history)
        body["contents"][-1]["parts"][0]["text"] = f"Now do step {i}."
        nexts.append(json.dumps(body).encode())
    body = copy.deepcopy(history)
    for i in range(4 * args.rounds):
        body["contents"][0]["parts"][0]["text"] = f"Session {i}: start."
        firsts.append(json.dumps(body).encode())
    gemini.parse_request(nexts[0], model="gemini-3.5-flash")
    turn, first = iter(range(10**9)), iter(firsts)
    agent = json.dumps(agent_body(20000)).encode()
    text = agent.decode()
    rows = [
        (f"Gemini {args.turns}-turn history ({len(nexts[0]) // 1000} kB), next turn: parse_request",
         least_ms(lambda: gemini.parse_request(nexts[next(turn) % 60], model="gemini-3.5-flash"), 20, args.rounds)),
        (f"Gemini {args.turns}-turn history, first request: parse_request",
         least_ms(lambda: gemini.parse_request(next(first), model="gemini-3.5-flash"), 4, args.rounds)),
        (f"Gemini {args.turns}-turn history: load_body (parsed whole)",
         least_ms(lambda: validate.load_body(nexts[0]), 20, args.rounds)),
        (f"agent20k Anthropic body ({len(agent) // 1000} kB): load_body of bytes",
         least_ms(lambda: validate.load_body(agent), 50, args.rounds)),
        ("agent20k Anthropic body: load_body of text", least_ms(lambda: validate.load_body(text), 20, args.rounds)),
    ]
    for name, ms in rows:
        print(f"{name:70s} {ms:7.3f} ms")


if __name__ == "__main__":
    main()
