"""Whole-proof sampling's memory: the peak memory leanloop's whole-proof sampler
(``prover.samplers.ModelSampler`` over ``TacticGenerator``: the prompt's cache shared by the
samples, each sample's score read from the tokens chosen) adds to a process, against plain
``model.generate`` sampling the same number of tokens from the same prompts, measured in the
same run.

How it is measured: each variant runs in a fresh process of its own (``--child``), which loads
the model, generates once with 2 new tokens (so that one-off allocations of the first call —
thread pools, kernels' scratch — are not charged to the variant), collects garbage, reads its
resident memory (``VmRSS``), resets the kernel's peak (``VmHWM``, by writing 5 to
``/proc/self/clear_refs``) and then samples ``--samples`` answers of ``--tokens`` tokens for each
of ``--problems`` miniF2F problems (one prompt at a time, as the sampler asks); the figure is the
peak minus the resident memory before. Peak resident memory sees every allocation, torch's CPU
allocator's included (``tracemalloc`` sees only Python's); the children run with glibc's
``MALLOC_MMAP_THRESHOLD_=65536``, so that a freed tensor's memory leaves the process and the peak
follows what was alive at once, not the allocator's history. Every sample runs to ``--tokens``
tokens: the end tokens are replaced by an id the tokenizer never produces, in both variants, so
that they generate the same number of tokens.

The third variant, plain ``generate`` asked for ``output_logits`` (each step's
full-vocabulary logits kept, then turned into float32 — what leanloop's sampler did before), is
printed for comparison and not part of the target.

Measured on the shared 2-core CPU (load average about 8 from other work) with the defaults
(SmolLM2-135M-Instruct, one miniF2F problem, 8 samples × 256 tokens): plain ``generate`` +228 MB,
leanloop +230 MB (ratio 1.01), plain ``generate`` keeping the logits +1,374 MB (6.0×).

Target: ``ratio`` (leanloop's peak growth / plain generate's) ≤ 1.2. Last line:
``RESULT: ratio=... leanloop_mb=... plain_mb=... logits_kept_mb=... tokens=...``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ("plain", "leanloop", "logits_kept")


def fixtures() -> Path:
    return Path(os.environ.get("LEANLOOP_FIXTURES") or REPO.parent / "shared" / "fixtures")


def memory_kb() -> tuple[int, int]:
    """(resident now, peak resident since the last reset) in kB, as the kernel counts them."""
    status = Path("/proc/self/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
    peak = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))
    return rss, peak


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def child(args) -> dict:
    """One variant in this process: its peak growth in MB and the tokens it generated."""
    import torch

    from leanloop.data.benchmark import BenchmarkFile
    from leanloop.ml.generation import TacticGenerator
    from leanloop.prover.benchmark_config import ProofPrompt
    from leanloop.prover.samplers import ModelSampler

    torch.set_num_threads(1)
    problems = BenchmarkFile(fixtures() / "minif2f" / "minif2f.jsonl").problems("valid")
    problems = problems[: args.problems]
    generator = TacticGenerator(args.model, device="cpu")
    never = len(generator.tokenizer)  # an id past the tokenizer's: never an end token sampled
    generator.end_ids = [never]
    generator.model.generation_config.eos_token_id = never
    sampler = ModelSampler(
        args.model, ProofPrompt(), max_tokens=args.tokens, seed=0, generator=generator
    )
    prompts = [sampler._rendered(p) for p in problems]
    tokenizer, model = generator.tokenizer, generator.model

    def plain(prompt: str, tokens: int, **extra) -> int:
        ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            out = model.generate(
                **ids,
                do_sample=True,
                temperature=1.0,
                top_p=1.0,
                top_k=0,
                num_return_sequences=args.samples,
                max_new_tokens=tokens,
                eos_token_id=never,
                pad_token_id=tokenizer.pad_token_id,
                **extra,
            )
        sequences = out.sequences if hasattr(out, "sequences") else out
        if "output_logits" in extra:  # what the sampler did with them: float32, stacked
            torch.log_softmax(torch.stack(out.logits, dim=1).float(), dim=-1)
        return (sequences.shape[1] - ids["input_ids"].shape[1]) * sequences.shape[0]

    def run(tokens: int) -> int:
        total = 0
        for problem, prompt in zip(problems, prompts, strict=True):
            if args.child == "leanloop":
                sampler.options["max_new_tokens"] = tokens
                total += sum(s.tokens or 0 for s in sampler.sample(problem, args.samples, 0))
            elif args.child == "plain":
                total += plain(prompt, tokens)
            else:
                total += plain(prompt, tokens, return_dict_in_generate=True, output_logits=True)
        return total

    run(2)  # the first call's one-off allocations
    gc.collect()
    before, _ = memory_kb()
    reset_peak()
    tokens = run(args.tokens)
    _, peak = memory_kb()
    return {"growth_mb": (peak - before) / 1024, "tokens": tokens}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--samples", type=int, default=8, help="samples per problem")
    parser.add_argument("--tokens", type=int, default=256, help="tokens per sample")
    parser.add_argument("--problems", type=int, default=1)
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.child:
        print(json.dumps(child(args)))
        return 0
    figures = {}
    for variant in VARIANTS:
        command = [sys.executable, __file__, "--child", variant]
        # allocations above 64 kB are mapped and given back when freed: resident memory then
        # follows what is alive (glibc's moving threshold would keep freed blocks resident,
        # charging a variant for the allocator's history rather than for what it holds)
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
        for flag in ("model", "samples", "tokens", "problems"):
            command += [f"--{flag}", str(getattr(args, flag))]
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
        if done.returncode:
            print(done.stderr[-3000:], file=sys.stderr)
            return done.returncode
        figures[variant] = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"{variant:>12}: peak +{figures[variant]['growth_mb']:.0f} MB "
            f"for {figures[variant]['tokens']} tokens",
            flush=True,
        )
    tokens = {f["tokens"] for f in figures.values()}
    if len(tokens) != 1:
        print(f"the variants generated different numbers of tokens: {figures}", file=sys.stderr)
        return 1
    ratio = figures["leanloop"]["growth_mb"] / max(figures["plain"]["growth_mb"], 1e-9)
    print(f"target: leanloop / plain <= 1.2 ({'met' if ratio <= 1.2 else 'NOT met'})")
    print(
        f"RESULT: ratio={ratio:.2f} leanloop_mb={figures['leanloop']['growth_mb']:.0f} "
        f"plain_mb={figures['plain']['growth_mb']:.0f} "
        f"logits_kept_mb={figures['logits_kept']['growth_mb']:.0f} tokens={tokens.pop()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
