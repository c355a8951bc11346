"""What an EAGLE speculator costs when it never drafts, next to plain decoding and the adaptive policy, at C = 16.

Three rows on the shipped demo target and `demo-eagle` head, interleaved round by round (so a slow moment of the
machine hits all three): plain decoding; EAGLE with every step skipped (`disable_by_batch_size` 1: the engine
still keeps the target's hidden states for the head, the head never runs); EAGLE with the adaptive policy. The gap
between the first two is the price of carrying the head; the gap between the last two is the policy's own (its
first step and its tries). Tokens/s ratios to plain: best of the rounds, and the median of the paired rounds.

Usage: `python bench/eagle_skip_overhead.py [--kind input-grounded|open-ended] [--rounds 8]`
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling spec_decode.py: its engine rows and prompts

import spec_decode as sd

from speculab.engine.loader import load_model, resolve_model_path
from speculab.engine.speculative import speculator as spec_module
from speculab.engine.speculative.proposers.eagle_head import load_eagle_head
from speculab.engine.tokenizer import Tokenizer

ROWS = ("plain", "eagle-skip", "eagle-adaptive")


class _SkipEveryStep(spec_module.Speculator):
    """The EAGLE speculator past its disable_by_batch_size on every step (no policy)."""

    def __init__(self, proposer, **kw):
        kw.pop("adaptive", None)
        super().__init__(proposer, disable_by_batch_size=1, **kw)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", default="input-grounded", choices=("input-grounded", "open-ended"))
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=16)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    target = resolve_model_path("demo")
    model = load_model(target)
    head = load_eagle_head(resolve_model_path("demo-eagle"), model)
    tok = Tokenizer.from_dir(target)
    args = argparse.Namespace(k=4, max_tokens=96, prompt_lookup_max=4, prompt_lookup_min=2, policy_clock="cpu")
    prompts = sd.make_prompts(tok, a.kind, a.concurrency, 192, model.config.vocab_size, seed=1)
    plain_speculator = sd.Speculator
    tok_s: dict[str, list[float]] = {row: [] for row in ROWS}
    try:
        for _ in range(a.rounds):
            for row in ROWS:
                sd.Speculator = _SkipEveryStep if row == "eagle-skip" else plain_speculator
                method = "eagle" if row == "eagle-skip" else row
                tok_s[row].append(sd.run_engine(model, method, None, prompts, a.concurrency, args, head).tokens_per_s)
    finally:
        sd.Speculator = plain_speculator
    best_plain = max(tok_s["plain"])
    for row in ROWS:
        paired = [x / p for x, p in zip(tok_s[row], tok_s["plain"], strict=True)]
        print(
            f"{a.kind} C={a.concurrency} {row:15} best {max(tok_s[row]):7.0f} tok/s, best ratio "
            f"{max(tok_s[row]) / best_plain:.3f}, median paired ratio {statistics.median(paired):.3f} "
            f"({min(paired):.2f}-{max(paired):.2f})"
        )


if __name__ == "__main__":
    main()
