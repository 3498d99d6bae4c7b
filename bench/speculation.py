"""Prompt-lookup (n-gram) speculation on and off, side by side in one run, on two workloads:

- copy-heavy: code edits whose answers quote the file in the prompt (each request its own file version);
- plain: bench/engine.py's shared-prefix support tickets, whose answers quote nothing on purpose.

Prompts are prefilled once before the timed pass (their KV stays cached), so the figure is decode speed,
where speculation acts. Each configuration runs twice, alternating, and keeps its faster pass (the machine
may be shared); the speed-up is also given in the process's CPU time, which time spent waiting for a core
that other work holds does not inflate. Tokens are compared with speculation off: in float32 they must be identical; in bfloat16 a
different batch shape may round a near-tie differently, for plain greedy decoding as much as with drafts.

    python bench/speculation.py                 # 4 and 16 streams, default dtype
    python bench/speculation.py --dtype float32
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from engine import shared_prefix_prompts  # noqa: E402

from prefixgate.local_backend.engine import LLM  # noqa: E402
from prefixgate.local_backend.model_loader import load_model  # noqa: E402
from prefixgate.local_backend.sampling_params import SamplingParams  # noqa: E402

FILE = '''import json
from dataclasses import dataclass


@dataclass
class Item:
    sku: str
    name: str
    price: float
    quantity: int


def load_items(path):
    with open(path) as f:
        return [Item(**row) for row in json.load(f)]


def total_price(items, tax_rate):
    subtotal = 0
    for item in items:
        subtotal += item.price * item.quantity
    tax = subtotal * tax_rate
    return subtotal + tax


def apply_discount(total, code):
    if code == "SAVE10":
        return total * 0.9
    if code == "SAVE20":
        return total * 0.8
    return total
'''
# Asks whose answers SmolLM2-135M writes by quoting the file (asked to rename, add type hints or extract the
# functions, it writes other code instead, so those are not copy-heavy for this model).
ASKS = ["Repeat the file above exactly, with no changes.",
        "Fix any bug in the file above and return the whole corrected file.",
        "Return the file above with the comment '# reviewed' added at the top.",
        "Return the file above with its imports sorted."]


def copy_prompts(tokenizer, n: int) -> list[list[int]]:  # noqa: ANN001
    out = []
    for i in range(n):
        text = f"# version {i}\n{FILE}"
        messages = [{"role": "user", "content": f"```python\n{text}```\n{ASKS[i % len(ASKS)]}"}]
        chat = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        out.append(tokenizer.encode(chat, add_special_tokens=False))
    return out


def timed_pass(llm: LLM, prompts: list[list[int]], out_tokens: int) -> tuple[float, float, list[list[int]]]:
    """Output tokens per second of wall time and of this process's CPU time, and the tokens."""
    sp = SamplingParams(temperature=0, max_tokens=out_tokens, ignore_eos=True)
    batch = [{"prompt_token_ids": p} for p in prompts]
    llm.generate(batch, SamplingParams(temperature=0, max_tokens=1))  # prefill: the prompts' KV is cached
    t0, c0 = time.perf_counter(), time.process_time()
    outs = llm.generate(batch, sp)
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    tokens = [o.outputs[0].token_ids for o in outs]
    n = sum(map(len, tokens))
    return n / seconds, n / cpu_seconds, tokens


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--output-tokens", type=int, default=96)
    ap.add_argument("--speculative-tokens", type=int, default=8)
    ap.add_argument("--passes", type=int, default=2, help="passes of each configuration, alternating")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (1: steadier when other work shares the machine's cores)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    loaded = load_model("smollm2-135m")
    tok = loaded.tokenizer
    common = dict(loaded=loaded, dtype=args.dtype, max_num_batched_tokens=512, max_num_seqs=128)
    plain = LLM(**common, num_speculative_tokens=0)
    spec = LLM(**common, num_speculative_tokens=args.speculative_tokens)
    print(f"# {os.cpu_count()} CPUs, {args.threads} thread(s), dtype {plain.engine.config.dtype}, {args.speculative_tokens} draft tokens, "
          f"load average at start {os.getloadavg()[0]:.1f}", flush=True)
    rows = ["| workload | streams | off tok/s | on tok/s | speed-up | speed-up in CPU time | identical outputs |",
            "|---|---:|---:|---:|---:|---:|---|"]
    for workload, make in (("copy-heavy", copy_prompts), ("plain", shared_prefix_prompts)):
        for n in args.streams:
            prompts = make(tok, n)
            wall, cpu, tokens = {}, {}, {}
            for _ in range(args.passes):
                for name, llm in (("off", plain), ("on", spec)):
                    llm.reset_prefix_cache()
                    tok_s, cpu_tok_s, tokens[name] = timed_pass(llm, prompts, args.output_tokens)
                    wall[name], cpu[name] = max(wall.get(name, 0.0), tok_s), max(cpu.get(name, 0.0), cpu_tok_s)
            same = sum(a == b for a, b in zip(tokens["off"], tokens["on"], strict=True))
            rows.append(f"| {workload} | {n} | {wall['off']:.1f} | {wall['on']:.1f} | {wall['on'] / wall['off']:.2f}x | "
                        f"{cpu['on'] / cpu['off']:.2f}x | {same} of {n} |")
            print(rows[-1], flush=True)
    print(f"\nload average at end {os.getloadavg()[0]:.1f}\n\n" + "\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
