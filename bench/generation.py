"""Tactic generation's throughput: leanloop's ``TacticGenerator`` (beam search, k beams, each
prompt run through the model once and its cache copied to the beams, scores read from the chosen
tokens) against plain ``model.generate`` with the same beam search (``num_beams=k``, the scores
transformers gives with ``output_scores``, the prompt run once per beam), on the same prompts,
measured in the same run.

The prompts are the first ``--states`` proof states of $LEANLOOP_FIXTURES/leandojo_benchmark_4
rendered in leanloop's prompt format (system prompt, state), ``--batch`` of them per call, ``k``
beams and ``--tokens`` new tokens at most. After one warm-up call each, every batch is run by
both, twice, in alternating order, so that a change in the machine's load falls on both; the
figure is states per second over all runs.

Measured on the shared 2-core CPU (load average about 3 from other work) with the defaults
(SmolLM2-135M-Instruct, 8 states, 4 per call, 8 beams, 24 new tokens): leanloop 0.240 states/s,
plain ``generate`` 0.079, 3.06×. A run while the machine's load swung between 5 and 9 gave 1.58×
with whole passes taking turns (hence the alternation per batch).

Target: leanloop's throughput ≥ 2.5× plain ``generate``'s on the CPU. Last line:
``RESULT: speedup=... leanloop_states_per_s=... plain_states_per_s=...``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def fixtures() -> Path:
    return Path(os.environ.get("LEANLOOP_FIXTURES") or REPO.parent / "shared" / "fixtures")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--states", type=int, default=8)
    parser.add_argument("--batch", type=int, default=4, help="states per generate call")
    parser.add_argument("-k", type=int, default=8, help="beams")
    parser.add_argument("--tokens", type=int, default=24, help="new tokens at most")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    from leanloop.data.leandojo import LeanDojoDataset
    from leanloop.ml.generation import TacticGenerator

    torch.set_num_threads(1)
    states = []
    for theorem in LeanDojoDataset(fixtures() / "leandojo_benchmark_4").iter_theorems():
        states.extend(t.state_before for t in theorem.traced_tactics)
        if len(states) >= args.states:
            break
    states = states[: args.states]
    generator = TacticGenerator(args.model, device="cpu", max_new_tokens=args.tokens)
    prompts = [generator.prompt_text(s) for s in states]
    batches = [prompts[i : i + args.batch] for i in range(0, len(prompts), args.batch)]
    tokenizer, model = generator.tokenizer, generator.model

    def leanloop(batch: list[str]) -> None:
        generator.generate_counted(batch, args.k, method="beam", batch_size=args.batch)

    def plain(batch: list[str]) -> None:
        tokenizer.padding_side = "left"
        inputs = tokenizer(batch, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.inference_mode():
            model.generate(
                **inputs,
                num_beams=args.k,
                num_return_sequences=args.k,
                do_sample=False,
                max_new_tokens=args.tokens,
                length_penalty=0.0,
                early_stopping=True,
                eos_token_id=generator.end_ids,
                pad_token_id=tokenizer.pad_token_id,
                return_dict_in_generate=True,
                output_scores=True,
            )

    runners = {"leanloop": leanloop, "plain": plain}
    seconds = dict.fromkeys(runners, 0.0)
    for run in runners.values():  # warm-up
        run(batches[0])
    for round_ in range(2):  # each batch by both, in alternating order
        for index, batch in enumerate(batches):
            order = ("leanloop", "plain") if (round_ + index) % 2 == 0 else ("plain", "leanloop")
            for name in order:
                started = time.perf_counter()
                runners[name](batch)
                seconds[name] += time.perf_counter() - started
            print(
                f"round {round_ + 1}, batch {index + 1}: leanloop {seconds['leanloop']:.1f} s, "
                f"plain {seconds['plain']:.1f} s so far",
                flush=True,
            )
    rates = {name: 2 * len(states) / seconds[name] for name in runners}
    speedup = rates["leanloop"] / rates["plain"]
    print(f"target: leanloop >= 2.5x plain generate ({'met' if speedup >= 2.5 else 'NOT met'})")
    print(
        f"RESULT: speedup={speedup:.2f} leanloop_states_per_s={rates['leanloop']:.3f} "
        f"plain_states_per_s={rates['plain']:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
