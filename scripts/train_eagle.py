"""Train an EAGLE head for an existing demo target (scripts/train_demo.py trains one too, as its last stage).

    python scripts/train_eagle.py --target src/speculab/engine/assets/demo/target \
        --out src/speculab/engine/assets/demo/eagle --preset cpu --minutes 20 \
        --report src/speculab/engine/assets/demo/train_report.json

The corpus, its split and its token stream are rebuilt exactly as train_demo.py built them (same stdlib files,
the same hash split, the target's own tokenizer), the head is trained on the frozen target's features
(scripts/demo_eagle.py), exported as an HF-format EAGLE checkpoint (config.json + model.safetensors with fc.*
and layers.0.*), evaluated, and its section is written into the report under "eagle" (`--report`; other sections
are kept). No network.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for _p in (_HERE, _HERE.parent / "src"):  # runnable from a plain checkout without installing speculab
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import demo_data  # noqa: E402
import torch  # noqa: E402
from demo_eagle import EagleLoss, evaluate_eagle, frequent_tokens, new_head, save_eagle_dir, train_eagle  # noqa: E402
from demo_train import TrainConfig  # noqa: E402

from speculab.engine.loader import load_model  # noqa: E402
from speculab.engine.model import CausalLM  # noqa: E402
from speculab.engine.speculative.proposers.eagle_head import EagleHead, load_eagle_head  # noqa: E402


def eagle_stage(
    target: CausalLM,
    draft: CausalLM | None,
    train_stream: torch.Tensor,
    heldout_stream: torch.Tensor,
    preset,  # train_demo.Preset
    budget_s: float,
    out_dir: Path,
    eos_id: int,
    device: torch.device,
    seed: int,
    max_steps: int | None = None,
    loss: EagleLoss = EagleLoss(),
    log=print,
    draft_vocab: int | None = None,
    reuse: tuple[EagleHead, dict] | None = None,
) -> dict:
    """Train, export and evaluate the head; the report's "eagle" section.

    `draft_vocab` (default: the preset's) restricts drafting to that many of the most frequent training tokens
    (0 or >= the vocabulary: all). `reuse` = (a trained head, its report's "train" section) skips training: the
    draft vocabulary and the evaluation are redone for a head already trained.
    """
    from demo_data import fixed_windows

    head = new_head(target, seed + 2).to(device) if reuse is None else reuse[0]
    cfg = TrainConfig(
        batch_size=preset.batch_size,
        seq_len=preset.seq_len,
        budget_s=budget_s,
        max_steps=max_steps,
        peak_lr=preset.eagle_lr,
        warmup_steps=preset.warmup_steps,
        log_every_s=preset.log_every_s,
        eval_every_s=preset.eval_every_s,
        seed=seed + 2,
    )
    for p in target.parameters():
        p.requires_grad_(False)
    if reuse is None:
        res = train_eagle(head, target, train_stream, heldout_stream, cfg, loss, device, log=log)
        train = {
            **{k: v for k, v in asdict(cfg).items() if k != "betas"},
            "steps": res.steps,
            "tokens_seen": res.tokens_seen,
            "elapsed_s": res.elapsed_s,
            "tokens_per_s": res.tokens_seen / max(res.elapsed_s, 1e-9),
            "epochs": res.tokens_seen / train_stream.numel(),
            "best_step": res.best_step,
            "final": {k: v for k, v in res.log[-1].items() if k != "step"},
            "log": res.log,
        }
    else:
        train = reuse[1]
    n_vocab = preset.eagle_draft_vocab if draft_vocab is None else draft_vocab
    if 0 < n_vocab < target.config.vocab_size:
        head.set_draft_vocab(frequent_tokens(train_stream, target.config.vocab_size, n_vocab).to(device))
    files = save_eagle_dir(head, out_dir)
    t0 = time.monotonic()
    windows = fixed_windows(heldout_stream, preset.seq_len, preset.eval_windows)
    p = preset.replay_prompt_tokens
    starts = torch.randint(
        0, heldout_stream.numel() - p, (preset.replay_prompts,), generator=torch.Generator().manual_seed(seed)
    )
    prompts = heldout_stream[(starts[:, None] + torch.arange(p)).to(heldout_stream.device)]
    acceptance = evaluate_eagle(
        head, target, windows, prompts, preset.replay_new_tokens, eos_id, device, preset.batch_size, draft=draft
    )
    log(f"[eagle] evaluation ({time.monotonic() - t0:.1f}s)")
    tf = acceptance["teacher_forced_heldout"]
    log(f"[eagle] teacher-forced agreement {tf['agreement_alpha']:.3f}")
    for kind, s in acceptance["engine_greedy_replay"].items():
        if isinstance(s, dict):
            log(
                f"[eagle] engine greedy replay k=4 {kind}: acceptance rate {s['acceptance_rate']:.3f}, mean "
                f"acceptance length {s['mean_acceptance_length']:.2f}, tokens per target step "
                f"{s['tokens_per_target_step']:.2f}"
            )
    return {
        "config": head.to_hf(),
        "parameters": sum(p.numel() for p in head.parameters()),
        "loss": asdict(loss),
        "train": train,
        "acceptance": acceptance,
        "files": {f"{out_dir.name}/{f.name}": f.stat().st_size for f in files},
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    import train_demo

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", type=Path, default=_HERE.parent / "src/speculab/engine/assets/demo/target")
    ap.add_argument("--draft", type=Path, help="draft model directory for the replay comparison (default: ../draft)")
    ap.add_argument("--out", type=Path, required=True, help="output directory of the head (config + weights)")
    ap.add_argument("--report", type=Path, help="train_report.json to add the 'eagle' section to")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--preset", choices=sorted(train_demo.PRESETS), default="cpu")
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--max-steps", type=int)
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--max-files", type=int)
    ap.add_argument("--heldout-fraction", type=float, default=0.02)
    ap.add_argument("--no-chat", action="store_true")
    ap.add_argument("--token-weight", type=float, default=EagleLoss.token_weight)
    ap.add_argument("--feature-weight", type=float, default=EagleLoss.feature_weight)
    ap.add_argument("--noise", type=float, default=EagleLoss.noise)
    ap.add_argument("--depth", type=int, default=EagleLoss.depth, help="training-time-test passes (1 = EAGLE-1)")
    ap.add_argument("--depth-after", type=float, default=EagleLoss.depth_after, help="budget share before --depth")
    ap.add_argument("--token-fraction", type=float, default=EagleLoss.token_fraction)
    ap.add_argument("--lr", type=float, help="override the preset's eagle_lr")
    ap.add_argument("--draft-vocab", type=int, help="draft vocabulary size (default: the preset's; 0 = all tokens)")
    ap.add_argument(
        "--reuse-head",
        action="store_true",
        help="do not train: take the head in --out (and its training record in --report), redo draft vocabulary, "
        "export and evaluation",
    )
    ap.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1))
    ap.add_argument("--threads", type=int, help="torch CPU threads")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    import train_demo
    from tokenizers import Tokenizer

    args = parse_args(argv)
    wall_start = time.monotonic()
    if args.threads:
        torch.set_num_threads(args.threads)
    preset = train_demo.PRESETS[args.preset]
    overrides = {"batch_size": args.batch_size, "eagle_lr": args.lr}
    preset = replace(preset, **{k: v for k, v in overrides.items() if v is not None})
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    corpus = demo_data.load_corpus(heldout_fraction=args.heldout_fraction, max_files=args.max_files, stride=args.stride)
    tok = Tokenizer.from_file(str(args.target / "tokenizer.json"))
    train_docs = demo_data.documents(corpus.train, with_chat=not args.no_chat, workers=args.workers)
    train_stream = demo_data.encode_stream(tok, train_docs).to(device)
    heldout_stream = demo_data.encode_stream(tok, demo_data.documents(corpus.heldout, with_chat=False)).to(device)
    print(f"corpus: {train_stream.numel():,} train tokens, {heldout_stream.numel():,} held-out", flush=True)
    target = load_model(args.target, dtype=torch.float32, device=device)
    draft_dir = args.draft or args.target.parent / "draft"
    draft = load_model(draft_dir, dtype=torch.float32, device=device) if (draft_dir / "config.json").is_file() else None
    eos_id = tok.token_to_id(demo_data.EOS)
    loss = EagleLoss(
        args.feature_weight, args.token_weight, args.noise, args.depth, args.depth_after, args.token_fraction
    )
    reuse = None
    previous = json.loads(args.report.read_text()).get("eagle") if args.report and args.report.is_file() else None
    if args.reuse_head:
        if previous is None:
            raise SystemExit("--reuse-head needs the head's earlier report section (--report with an 'eagle' entry)")
        head = load_eagle_head(args.out, target, dtype=torch.float32).float()
        reuse = (head, {**previous["train"], "reused_by": sys.argv[1:] if argv is None else argv})
        loss = EagleLoss(**previous["loss"])
    section = eagle_stage(
        target,
        draft,
        train_stream,
        heldout_stream,
        preset,
        args.minutes * 60,
        args.out,
        eos_id,
        device,
        args.seed,
        max_steps=args.max_steps,
        loss=loss,
        draft_vocab=args.draft_vocab,
        reuse=reuse,
    )
    section |= {
        "created_by": "scripts/train_eagle.py",
        "argv": previous["argv"] if args.reuse_head and previous else sys.argv[1:] if argv is None else argv,
        "preset": args.preset,
        "environment": {"python": platform.python_version(), "torch": torch.__version__, "device": str(device)},
        "wall_s": time.monotonic() - wall_start,
    }
    if args.report is not None:
        report = json.loads(args.report.read_text()) if args.report.is_file() else {}
        report["eagle"] = section
        if "files" in report:  # the shipped set: the pair's files plus the head's (replacing an older head's)
            report["files"] = {k: v for k, v in report["files"].items() if not k.startswith(f"{args.out.name}/")}
            report["files"] |= section["files"]
            report["total_bytes"] = sum(report["files"].values())
        args.report.write_text(json.dumps(report, indent=2) + "\n")
    else:
        (args.out / "train_report.json").write_text(json.dumps({"eagle": section}, indent=2) + "\n")
    print(f"wrote {args.out} in {section['wall_s']:.0f}s", flush=True)
    return section


if __name__ == "__main__":
    main()
