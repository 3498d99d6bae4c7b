"""Side-by-side engine benchmark on one machine, in one run.

In process: prefixgate's engine vs transformers `generate` (one request at a time, explicit attention_mask)
vs transformers `generate_batch` (continuous batching with block sharing), the latter twice: with its own
defaults, as a user calling it gets, and given prefixgate's block size and token budget, its best
configuration we found on a CPU (2-3x faster than its defaults here).

Over HTTP: `prefixgate backend` vs llama.cpp's `llama-server` on the same GGUF (bench/serving.py), N streams
submitted at once, a cold wave (nothing cached) then a warm one (same system prompt, new questions).

Shared-prefix workload: N requests = one ~850-token system prompt + a ~40-token unique question each,
32 greedy output tokens (EOS ignored). No-sharing workload: random-token prompts.

    python bench/engine.py                      # 16 requests in process; servers at 16 and 64 streams
    python bench/engine.py --requests 16 64     # add the 64-request case in process (slow peers: --peers)
    python bench/engine.py --peers none --streams   # prefixgate in process only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from serving import (  # noqa: E402
    HOW_TO_BUILD,
    find_llama_server,
    llama_kv_bytes_per_token,
    llama_server,
    prefixgate_backend,
    wave,
)

from prefixgate.local_backend.engine import LLM  # noqa: E402
from prefixgate.local_backend.kv_cache_manager import cdiv  # noqa: E402
from prefixgate.local_backend.model_loader import bundled_gguf, load_model  # noqa: E402
from prefixgate.local_backend.sampling_params import SamplingParams  # noqa: E402

BLOCK = 16
WORDS = ("account address agent billing cancel carrier charge customer damaged delivery discount escalate exchange "
         "invoice label order package payment policy product receipt refund replacement return review shipping "
         "status subscription support tracking verify warehouse warranty").split()


@dataclass
class Result:
    system: str
    workload: str
    requests: int
    output_tokens: int
    seconds: float
    ttfts: list[float] = field(default_factory=list, repr=False)
    kv_blocks: int | None = None
    ideal_blocks: int | None = None

    @property
    def tok_s(self) -> float:
        return self.output_tokens / self.seconds

    @property
    def ttft_mean(self) -> float:
        return statistics.fmean(self.ttfts)

    @property
    def ttft_p95(self) -> float:
        s = sorted(self.ttfts)
        return s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]


def shared_prefix_prompts(tokenizer, n: int, seed: int = 0) -> list[list[int]]:  # noqa: ANN001
    rng = random.Random(seed)
    system = ("You are the customer-support assistant of Acme Parcel. Follow the policy below exactly. "
              + " ".join(rng.choice(WORDS) for _ in range(820)))
    out = []
    for i in range(n):
        question = f"Ticket {i}: " + " ".join(rng.choice(WORDS) for _ in range(30)) + "?"
        text = tokenizer.apply_chat_template([{"role": "system", "content": system},
                                              {"role": "user", "content": question}],
                                             tokenize=False, add_generation_prompt=True)
        out.append(tokenizer.encode(text, add_special_tokens=False))
    return out


def random_prompts(vocab: int, n: int, length: int, seed: int = 1) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(length)] for _ in range(n)]


def ideal_blocks(prompts: list[list[int]], out_tokens: int) -> int:
    """Blocks if every common full prefix block is stored once: shared prefix blocks + each request's own."""
    common = len(os.path.commonprefix(prompts)) // BLOCK if len(prompts) > 1 else 0
    # The last sampled token's KV is never computed.
    return common + sum(cdiv(len(p) + out_tokens - 1, BLOCK) - common for p in prompts)


# -- systems -----------------------------------------------------------------------------------------------


def run_prefixgate(llm: LLM, prompts: list[list[int]], out_tokens: int, workload: str) -> Result:
    engine = llm.engine
    llm.reset_prefix_cache()
    sp = SamplingParams(temperature=0, max_tokens=out_tokens, ignore_eos=True)
    t0 = time.perf_counter()
    for p in prompts:
        engine.add_request({"prompt_token_ids": p}, sp)
    peak, done = 0, []
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                done.append(out)
        peak = max(peak, engine.kv.num_used_blocks)
    seconds = time.perf_counter() - t0
    return Result("prefixgate", workload, len(prompts), sum(len(o.outputs[0].token_ids) for o in done), seconds,
                  [o.metrics.time_to_first_token for o in done], peak, ideal_blocks(prompts, out_tokens))


def ttft_cold_vs_cached(llm: LLM, prompts: list[list[int]], repeats: int = 5) -> tuple[float, float]:
    """Median TTFT of a request alone with an empty cache, and of one whose system prompt another left cached."""
    sp = SamplingParams(temperature=0, max_tokens=1, ignore_eos=True)
    cold, cached = [], []
    for i in range(repeats):
        llm.reset_prefix_cache()
        cold.append(llm.generate({"prompt_token_ids": prompts[2 * i]}, sp)[0].metrics.time_to_first_token)
        warm = llm.generate({"prompt_token_ids": prompts[2 * i + 1]}, sp)[0]
        assert warm.num_cached_tokens > 0.9 * len(os.path.commonprefix(prompts[:2]))
        cached.append(warm.metrics.time_to_first_token)
    return statistics.median(cold), statistics.median(cached)


def run_generate(model, prompts: list[list[int]], out_tokens: int, workload: str) -> Result:  # noqa: ANN001
    from transformers.generation.streamers import BaseStreamer

    class FirstToken(BaseStreamer):
        def __init__(self) -> None:
            self.calls, self.at = 0, None

        def put(self, value) -> None:  # noqa: ANN001 - first call: the prompt; second: the first new token
            self.calls += 1
            if self.calls == 2:
                self.at = time.perf_counter()

        def end(self) -> None:
            pass

    t0 = time.perf_counter()
    ttfts, n = [], 0
    for p in prompts:
        ids = torch.tensor([p])
        streamer = FirstToken()
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=out_tokens,
                                 min_new_tokens=out_tokens, do_sample=False, streamer=streamer,
                                 pad_token_id=model.config.eos_token_id)
        n += out.shape[1] - len(p)
        ttfts.append(streamer.at - t0)  # every request arrived at t0 and waited its turn
    return Result("transformers generate", workload, len(prompts), n, time.perf_counter() - t0, ttfts)


def run_generate_batch(model, prompts: list[list[int]], out_tokens: int, workload: str,  # noqa: ANN001
                       sharing: bool = True, shipped: bool = False) -> Result:
    """`shipped`: generate_batch's own defaults (page size 256, batch size sized from free memory), as a user
    calling it gets; otherwise our block size and token budget (16, 512), which is 2-3x faster here."""
    from transformers.generation import ContinuousBatchingConfig, GenerationConfig

    gen = GenerationConfig(max_new_tokens=out_tokens, min_new_tokens=out_tokens, do_sample=False,
                           eos_token_id=model.config.eos_token_id, pad_token_id=model.config.eos_token_id)
    if shipped:
        cb = ContinuousBatchingConfig(allow_block_sharing=sharing)
    else:
        num_blocks = cdiv(sum(len(p) + out_tokens for p in prompts), BLOCK) + 64
        cb = ContinuousBatchingConfig(page_size=BLOCK, num_blocks=num_blocks, max_batch_tokens=512,
                                      allow_block_sharing=sharing)
    t0 = time.perf_counter()
    outs = model.generate_batch(inputs=prompts, generation_config=gen, continuous_batching_config=cb,
                                progress_bar=False, record_timestamps=True)
    seconds = time.perf_counter() - t0
    outs = list(outs.values())
    name = "transformers generate_batch" + (" (its defaults)" if shipped else " (block 16, 512-token budget)")
    return Result(name, workload, len(prompts),
                  sum(len(o.generated_tokens) for o in outs), seconds, [o.timestamps[0] - t0 for o in outs])


def compare_servers(tok, vocab: int, streams: list[int], out_tokens: int, llama: str | None,  # noqa: ANN001
                    threads: int) -> list[Result]:
    """Each server fresh per stream count: a warm-up request that shares nothing, a cold wave, a warm wave."""
    waves: list[Result] = []
    opener = random_prompts(vocab, 1, 32, seed=7)
    for n in streams:
        prompts = shared_prefix_prompts(tok, 2 * n)
        servers = [("prefixgate backend", lambda n=n: prefixgate_backend(max(n, 16), ["--cpu-threads", str(threads)]))]
        if llama:
            servers.append(("llama.cpp llama-server", lambda n=n: llama_server(llama, bundled_gguf("smollm2-135m"),
                                                                                n, threads)))
        for name, start in servers:
            with start() as url:
                wave(url, opener, 2)
                for phase, part in (("cold", prompts[:n]), ("warm", prompts[n:])):
                    seconds, ttfts, tokens = wave(url, part, out_tokens)
                    waves.append(Result(name, phase, n, tokens, seconds, ttfts))
                    print(wave_table(waves[-1:], header=False), flush=True)
    return waves


# -- report ------------------------------------------------------------------------------------------------


def wave_table(waves: list[Result], header: bool = True) -> str:
    rows = ["| streams | wave | server | output tok/s | mean TTFT (s) |", "|---:|---|---|---:|---:|"] if header else []
    rows += [f"| {w.requests} | {w.workload} | {w.system} | {w.tok_s:.1f} | {w.ttft_mean:.2f} |" for w in waves]
    return "\n".join(rows)


def wave_ratios(waves: list[Result]) -> list[str]:
    lines = []
    for n in sorted({w.requests for w in waves}):
        got = {(w.system.split()[0], w.workload): w for w in waves if w.requests == n}
        if ("llama.cpp", "cold") not in got:
            continue
        cold, warm = got["prefixgate", "cold"], got["prefixgate", "warm"]
        their_cold, their_warm = got["llama.cpp", "cold"], got["llama.cpp", "warm"]
        lines.append(f"{n} streams vs llama.cpp: warm tok/s {warm.tok_s / their_warm.tok_s:.2f}x (target >= 1.5x), "
                     f"cold tok/s {cold.tok_s / their_cold.tok_s:.1f}x (target >= 5x), "
                     f"warm mean TTFT {warm.ttft_mean / their_warm.ttft_mean:.2f}x (target <= 0.5x)")
    return lines



def table(results: list[Result]) -> str:
    rows = ["| workload | requests | system | output tok/s | mean TTFT (s) | p95 TTFT (s) | KV blocks used |",
            "|---|---:|---|---:|---:|---:|---:|"]
    for r in results:
        blocks = (f"{r.kv_blocks} (ideal {r.ideal_blocks}, {r.kv_blocks / r.ideal_blocks:.2f}x)"
                  if r.kv_blocks is not None else "not measured")
        rows.append(f"| {r.workload} | {r.requests} | {r.system} | {r.tok_s:.1f} | {r.ttft_mean:.2f} | "
                    f"{r.ttft_p95:.2f} | {blocks} |")
    return "\n".join(rows)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, nargs="+", default=[16])
    ap.add_argument("--output-tokens", type=int, default=32)
    ap.add_argument("--peers", choices=["all", "batch", "none"], default="all",
                    help="transformers systems to run: all, only generate_batch (generate takes minutes), none")
    ap.add_argument("--peer-max-requests", type=int, default=16,
                    help="run the peers only for request counts up to this (they are slow on a CPU)")
    ap.add_argument("--shipped-max-requests", type=int, default=16,
                    help="also run generate_batch with its own defaults for request counts up to this")
    ap.add_argument("--random-len", type=int, default=256, help="prompt length of the no-sharing workload")
    ap.add_argument("--threads", type=int, help="torch CPU threads for every system (default: torch's choice)")
    ap.add_argument("--streams", type=int, nargs="*", default=[16, 64],
                    help="stream counts for the servers' comparison over HTTP (none: skip it)")
    ap.add_argument("--llama-server", help="llama.cpp's llama-server binary (default: $LLAMA_SERVER, then PATH)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    loaded = load_model("smollm2-135m")
    llm = LLM(loaded=loaded, max_num_batched_tokens=512, max_num_seqs=128)
    tok = loaded.tokenizer
    peer_model = None
    if args.peers != "none":
        from transformers import AutoModelForCausalLM

        peer_model = AutoModelForCausalLM.from_pretrained(loaded.folder, dtype=torch.float32,
                                                          attn_implementation="sdpa").eval()
    print(f"# machine: {_cpu_name()}, {os.cpu_count()} CPUs, torch {torch.__version__}, {torch.get_num_threads()} "
          f"threads; python {platform.python_version()}; load average at start {os.getloadavg()[0]:.1f}",
          flush=True)

    warm = shared_prefix_prompts(tok, 2, seed=99)
    llm.generate([{"prompt_token_ids": p} for p in warm], SamplingParams(temperature=0, max_tokens=2))
    if peer_model is not None:  # first calls pay one-off set-up costs
        for shipped in (False, True):
            run_generate_batch(peer_model, [p[:64] for p in warm], 2, "warm-up", shipped=shipped)

    results: list[Result] = []

    def record(result: Result) -> None:
        results.append(result)
        print(table([result]), flush=True)

    def configs(n: int) -> tuple[bool, ...]:  # generate_batch tuned, then as shipped where it is not too slow
        return (False, True) if n <= args.shipped_max_requests else (False,)

    for n in args.requests:
        prompts = shared_prefix_prompts(tok, n)
        lens = [len(p) for p in prompts]
        print(f"## shared prefix, {n} requests: prompts {min(lens)}-{max(lens)} tokens, "
              f"{len(os.path.commonprefix(prompts))} shared", flush=True)
        record(run_prefixgate(llm, prompts, args.output_tokens, "shared prefix"))
        if peer_model is not None and n <= args.peer_max_requests:
            for shipped in configs(n):
                record(run_generate_batch(peer_model, prompts, args.output_tokens, "shared prefix", shipped=shipped))
            if args.peers == "all":
                record(run_generate(peer_model, prompts, args.output_tokens, "shared prefix"))
    cold, cached = ttft_cold_vs_cached(llm, shared_prefix_prompts(tok, 10))
    n = args.requests[0]
    prompts = random_prompts(loaded.hf_config.vocab_size, n, args.random_len)
    record(run_prefixgate(llm, prompts, args.output_tokens, "no sharing"))
    if peer_model is not None:
        for shipped in configs(n):
            record(run_generate_batch(peer_model, prompts, args.output_tokens, "no sharing", sharing=False,
                                      shipped=shipped))

    print(f"\nload average at end {os.getloadavg()[0]:.1f}\n")
    print(table(results) + "\n")
    print(f"TTFT of one request alone (median of 5): cold {cold:.3f} s; with its 850-token system prompt cached "
          f"{cached:.3f} s "
          f"({cached / cold:.1%} of cold; target <= 10%)")
    for workload in ("shared prefix", "no sharing"):
        ours = [r for r in results if r.workload == workload and r.system == "prefixgate"]
        for r in results:
            if r.workload == workload and r.system != "prefixgate":
                mine = next(o for o in ours if o.requests == r.requests)
                print(f"{workload}, {r.requests} requests: prefixgate {mine.tok_s / r.tok_s:.1f}x the throughput "
                      f"of {r.system}; mean TTFT {mine.ttft_mean / r.ttft_mean:.2f}x")
    for r in results:
        if r.kv_blocks is not None:
            print(f"{r.workload}, {r.requests} requests: KV blocks {r.kv_blocks} vs ideal {r.ideal_blocks} "
                  f"= {r.kv_blocks / r.ideal_blocks:.3f}x (target <= 1.05x)")
    kv = llm.engine.runner.kv_cache
    ours_kv = kv.nbytes / (kv.shape[2] * kv.shape[3])  # [2, layers, blocks, block_size, kv_heads, head_dim]
    print(f"KV bytes per cached token: prefixgate {ours_kv:.0f} ({llm.engine.config.dtype})", end="")
    del llm  # its KV pool and weights are not needed by the servers below
    llama = find_llama_server(args.llama_server)
    if args.streams and llama:
        print(f", llama.cpp {llama_kv_bytes_per_token(llama, bundled_gguf('smollm2-135m')):.0f} (f16)")
    else:
        print()
    waves: list[Result] = []
    if args.streams:
        if not llama:
            print(HOW_TO_BUILD)
        print(f"\n## servers over HTTP, {torch.get_num_threads()} threads each\n{wave_table([])}", flush=True)
        waves = compare_servers(tok, loaded.hf_config.vocab_size, args.streams, args.output_tokens, llama,
                                torch.get_num_threads())
        print(f"\nload average at end {os.getloadavg()[0]:.1f}\n\n{wave_table(waves)}\n")
        print("\n".join(wave_ratios(waves)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": [asdict(r) | {"tok_s": r.tok_s} for r in results],
                       "ttft_cold": cold, "ttft_cached": cached, "kv_bytes_per_token": ours_kv,
                       "waves": [asdict(w) | {"tok_s": w.tok_s} for w in waves]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
