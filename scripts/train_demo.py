"""Train speculab's demo model pair (target <= 30M, draft <= 5M parameters) on the Python standard library.

One command, no network:  python scripts/train_demo.py --out DIR --device cuda --minutes 5 [--bundle OUTDIR]
Writes DIR/target/ and DIR/draft/ (Hugging Face format, fp16 safetensors, shared BPE tokenizer), DIR/eagle/ (an
EAGLE head for the target) and DIR/train_report.json (corpus, tokenizer, architectures, steps, tokens, losses,
acceptance). `--bundle` also writes DIR as one tar split into <= 15 MiB parts (for machines that return few,
small files).
Pipeline: corpus (demo_data) -> tokenizer -> target training -> draft distillation from the target (demo_train)
-> held-out loss and acceptance (demo_eval) -> export (demo_export) -> the EAGLE head on the target's features
(demo_eagle, its own --eagle-minutes; scripts/train_eagle.py retrains only the head).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for _p in (_HERE, _HERE.parent / "src"):  # runnable from a plain checkout without installing speculab
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import demo_data  # noqa: E402
import torch  # noqa: E402
from demo_eval import evaluate_acceptance  # noqa: E402
from demo_export import bundle, save_model_dir  # noqa: E402
from demo_train import TrainConfig, heldout_loss, train  # noqa: E402

from speculab.engine.model import CausalLM, ModelConfig  # noqa: E402

MAX_TARGET_PARAMS, MAX_DRAFT_PARAMS = 30_000_000, 5_000_000
MAX_TOTAL_BYTES = 40_000_000
EVAL_RESERVE_S = 60.0  # final evaluation + export on an H200, kept free under --wall-minutes


@dataclass(frozen=True)
class Arch:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    head_dim: int = 64


@dataclass(frozen=True)
class Preset:
    vocab_size: int
    seq_len: int
    batch_size: int
    target: Arch
    draft: Arch
    target_lr: float
    draft_lr: float
    warmup_steps: int
    eval_windows: int  # held-out windows for the final loss / teacher-forced acceptance
    replay_prompts: int  # greedy trajectories for the speculative replay
    replay_prompt_tokens: int
    replay_new_tokens: int
    log_every_s: float
    eval_every_s: float
    eagle_lr: float = 2e-3  # the EAGLE head (one decoder layer over the target's features)
    eagle_draft_vocab: int = 2048  # the head drafts over the most frequent tokens (its LM head is most of its cost)


PRESETS = {
    # ~15.1M + 3.9M parameters, 38 MB of fp16 weights. 8192 BPE tokens: ~3.8 bytes/token on Python source, and
    # a 3.1M-parameter embedding, already 20% of the target; a larger vocabulary would eat the draft's budget.
    "demo": Preset(
        vocab_size=8192,
        seq_len=1024,
        batch_size=64,
        target=Arch(384, 8, 6, 2, 960),
        draft=Arch(256, 3, 4, 2, 512),
        target_lr=3e-3,
        draft_lr=4e-3,
        warmup_steps=100,
        eval_windows=256,
        replay_prompts=64,
        replay_prompt_tokens=256,
        replay_new_tokens=128,
        log_every_s=10.0,
        eval_every_s=30.0,
    ),
    # When no GPU is to be had: a smaller pair that learns something in ~90 minutes on 2 CPU cores
    # (~5.8M + 1.5M parameters; training runs at roughly 2k target tokens/s there). It also makes
    # `speculab demo` quicker on a laptop.
    "cpu": Preset(
        vocab_size=8192,
        seq_len=512,
        batch_size=16,
        target=Arch(256, 5, 4, 2, 704),
        draft=Arch(128, 2, 2, 1, 384),
        target_lr=2e-3,
        draft_lr=3e-3,
        warmup_steps=30,
        eval_windows=64,
        replay_prompts=32,
        replay_prompt_tokens=192,
        replay_new_tokens=96,
        log_every_s=60.0,
        eval_every_s=600.0,
    ),
    # For tests on a CPU: seconds, not minutes.
    "tiny": Preset(
        vocab_size=384,
        seq_len=64,
        batch_size=8,
        target=Arch(64, 2, 4, 2, 128, head_dim=16),
        draft=Arch(32, 1, 2, 1, 64, head_dim=16),
        target_lr=1e-2,
        draft_lr=1e-2,
        warmup_steps=5,
        eval_windows=8,
        replay_prompts=4,
        replay_prompt_tokens=32,
        replay_new_tokens=16,
        log_every_s=1.0,
        eval_every_s=5.0,
        eagle_lr=1e-2,
        eagle_draft_vocab=128,
    ),
}


def model_config(arch: Arch, vocab_size: int, seq_len: int, bos_id: int, eos_id: int) -> ModelConfig:
    return ModelConfig(
        vocab_size=vocab_size,
        hidden_size=arch.hidden_size,
        intermediate_size=arch.intermediate_size,
        num_hidden_layers=arch.num_hidden_layers,
        num_attention_heads=arch.num_attention_heads,
        num_key_value_heads=arch.num_key_value_heads,
        head_dim=arch.head_dim,
        max_position_embeddings=seq_len,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
    )


def init_weights(model: CausalLM, seed: int) -> None:
    """GPT-2 style: N(0, 0.02) everywhere, residual output projections scaled by 1/sqrt(2 * layers)."""
    gen = torch.Generator().manual_seed(seed)
    resid_std = 0.02 / math.sqrt(2 * model.config.num_hidden_layers)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() < 2:
                continue  # RMSNorm weights stay at 1
            std = resid_std if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
            p.copy_(torch.randn(p.shape, generator=gen) * std)


def evaluate(
    target: CausalLM,
    draft: CausalLM,
    heldout: torch.Tensor,
    preset: Preset,
    eos_id: int,
    device: torch.device,
    seed: int,
) -> tuple[float, float, dict]:
    """Held-out loss of both models, and acceptance of the draft and of prompt lookup (see demo_eval)."""
    windows = demo_data.fixed_windows(heldout, preset.seq_len, preset.eval_windows)  # [n, S + 1]
    t_loss = heldout_loss(target, windows, device, preset.batch_size)
    d_loss = heldout_loss(draft, windows, device, preset.batch_size)
    p = preset.replay_prompt_tokens
    starts = torch.randint(
        0, heldout.numel() - p, (preset.replay_prompts,), generator=torch.Generator().manual_seed(seed)
    )
    prompts = heldout[(starts[:, None] + torch.arange(p)).to(device)]  # [B, P]
    acceptance = evaluate_acceptance(
        target, draft, windows, prompts, preset.replay_new_tokens, eos_id, device, preset.batch_size
    )
    return t_loss, d_loss, acceptance


def log_acceptance(acceptance: dict) -> None:
    tf = acceptance["teacher_forced_heldout"]
    log(
        f"acceptance (teacher-forced, held-out): draft alpha {tf['draft_agreement_alpha']:.3f}, "
        f"n-gram hit rate {tf['ngram']['hit_rate']:.3f} (precision {tf['ngram']['precision']:.3f})"
    )
    for kind, s in acceptance["greedy_replay"].items():
        if not isinstance(s, dict):
            continue
        log(
            f"greedy replay k=4 {kind}: acceptance rate {s['acceptance_rate']:.3f}, mean acceptance length "
            f"{s['mean_acceptance_length']:.2f}, tokens per target step {s['tokens_per_target_step']:.2f}"
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="output directory (target/, draft/, train_report.json)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--minutes", type=float, default=5.0, help="training budget for both models together")
    ap.add_argument(
        "--wall-minutes",
        type=float,
        help="hard cap on the whole command: the training budget shrinks if data preparation ran long",
    )
    ap.add_argument("--target-share", type=float, default=0.7, help="fraction of the budget for the target")
    ap.add_argument(
        "--eagle-minutes",
        type=float,
        help="training budget for the EAGLE head, after the pair (default: --minutes / 4; 0: none)",
    )
    ap.add_argument("--preset", choices=sorted(PRESETS), default="demo")
    ap.add_argument("--batch-size", type=int, help="override the preset's batch size (sequences per step)")
    ap.add_argument("--eval-windows", type=int, help="override the preset's held-out windows for the final eval")
    ap.add_argument("--replay-prompts", type=int, help="override the preset's number of greedy replay prompts")
    ap.add_argument("--max-steps", type=int, help="also stop each model after this many steps (tests)")
    ap.add_argument("--stride", type=int, default=1, help="use every stride-th stdlib file (tests)")
    ap.add_argument("--max-files", type=int, help="use at most this many stdlib files (tests)")
    ap.add_argument("--heldout-fraction", type=float, default=0.02)
    ap.add_argument("--no-chat", action="store_true", help="skip the docstring->function chat examples")
    ap.add_argument("--target-dropout", type=float, default=0.1)
    ap.add_argument("--distill-kl-weight", type=float, default=1.0, help="draft loss: w*KL(target||draft)+(1-w)*CE")
    ap.add_argument("--compile", action="store_true", help="torch.compile the training forward (off: risky)")
    ap.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bundle", type=Path, help="also write OUT as demo.tar.partNN (<= 15 MiB each) here")
    return ap.parse_args(argv)


def log(msg: str) -> None:
    print(msg, flush=True)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    wall_start = time.monotonic()
    preset = PRESETS[args.preset]
    overrides = {
        "batch_size": args.batch_size,
        "eval_windows": args.eval_windows,
        "replay_prompts": args.replay_prompts,
    }
    preset = replace(preset, **{k: v for k, v in overrides.items() if v is not None})
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    # 1. corpus
    corpus = demo_data.load_corpus(heldout_fraction=args.heldout_fraction, max_files=args.max_files, stride=args.stride)
    log(
        f"corpus: Python {corpus.python_version} stdlib at {corpus.root}: {len(corpus.train)} train files "
        f"({corpus.train_bytes / 1e6:.1f} MB), {len(corpus.heldout)} held-out ({corpus.heldout_bytes / 1e6:.2f} MB)"
    )
    if not corpus.heldout:
        raise SystemExit("no held-out files: raise --heldout-fraction or use more files")
    train_docs = demo_data.documents(corpus.train, with_chat=not args.no_chat, workers=args.workers)
    heldout_docs = demo_data.documents(corpus.heldout, with_chat=False)
    n_chat = len(train_docs) - len(corpus.train)

    # 2. tokenizer
    t0 = time.monotonic()
    tok = demo_data.train_tokenizer((f.text for f in corpus.train), preset.vocab_size)
    bos_id, eos_id, pad_id = (tok.token_to_id(t) for t in (demo_data.BOS, demo_data.EOS, demo_data.PAD))
    train_stream = demo_data.encode_stream(tok, train_docs)
    heldout_stream = demo_data.encode_stream(tok, heldout_docs)
    bytes_per_token = corpus.train_bytes / max(1, train_stream.numel() - 2 * len(train_docs))
    log(
        f"tokenizer: vocab {tok.get_vocab_size()}, {train_stream.numel():,} train tokens (incl. {n_chat} chat "
        f"examples), {heldout_stream.numel():,} held-out, {bytes_per_token:.2f} bytes/token "
        f"({time.monotonic() - t0:.1f}s)"
    )
    train_stream, heldout_stream = train_stream.to(device), heldout_stream.to(device)

    # 3. models
    vocab = tok.get_vocab_size()
    tcfg = model_config(preset.target, vocab, preset.seq_len, bos_id, eos_id)
    dcfg = model_config(preset.draft, vocab, preset.seq_len, bos_id, eos_id)
    if tcfg.num_parameters > MAX_TARGET_PARAMS or dcfg.num_parameters > MAX_DRAFT_PARAMS:
        raise SystemExit(f"model too large: target {tcfg.num_parameters:,}, draft {dcfg.num_parameters:,}")
    target, draft = CausalLM(tcfg), CausalLM(dcfg)
    init_weights(target, args.seed)
    init_weights(draft, args.seed + 1)
    target.to(device)
    draft.to(device)
    log(f"target: {tcfg.num_parameters:,} parameters; draft: {dcfg.num_parameters:,}")

    # 4. training: target, then the draft distilled from it
    budget_s = args.minutes * 60
    if args.wall_minutes is not None:
        left_s = args.wall_minutes * 60 - (time.monotonic() - wall_start) - EVAL_RESERVE_S
        if left_s < budget_s:
            log(f"training budget cut from {budget_s:.0f}s to {max(left_s, 10.0):.0f}s to finish within --wall-minutes")
            budget_s = max(left_s, 10.0)
    common = dict(
        batch_size=preset.batch_size,
        seq_len=preset.seq_len,
        warmup_steps=preset.warmup_steps,
        log_every_s=preset.log_every_s,
        eval_every_s=preset.eval_every_s,
        seed=args.seed,
        max_steps=args.max_steps,
    )
    t_train_cfg = TrainConfig(
        budget_s=budget_s * args.target_share, peak_lr=preset.target_lr, dropout=args.target_dropout, **common
    )
    d_train_cfg = TrainConfig(
        budget_s=budget_s * (1 - args.target_share),
        peak_lr=preset.draft_lr,
        distill_kl_weight=args.distill_kl_weight,
        **{**common, "seed": args.seed + 1},
    )
    t_res = train(
        target, train_stream, heldout_stream, t_train_cfg, device, compile_model=args.compile, log=log, name="target"
    )
    for p in target.parameters():
        p.requires_grad_(False)
    d_res = train(
        draft,
        train_stream,
        heldout_stream,
        d_train_cfg,
        device,
        teacher=target,
        compile_model=args.compile,
        log=log,
        name="draft",
    )

    # 5. export first: a failure in evaluation must not lose the trained weights
    out: Path = args.out
    gen_cfg = {"bos_token_id": bos_id, "eos_token_id": eos_id, "pad_token_id": pad_id, "do_sample": False}
    tok_files = demo_data.tokenizer_files(tok, preset.seq_len)
    files = save_model_dir(target, out / "target", tok_files, gen_cfg)
    files += save_model_dir(draft, out / "draft", tok_files, gen_cfg)
    total_bytes = sum(f.stat().st_size for f in files)

    # 6. evaluation; on failure the report records the error and the bundle still carries the weights
    t0 = time.monotonic()
    evaluation_error = None
    t_loss = d_loss = math.nan
    acceptance: dict | None = None
    try:
        t_loss, d_loss, acceptance = evaluate(target, draft, heldout_stream, preset, eos_id, device, args.seed)
        log(f"evaluation ({time.monotonic() - t0:.1f}s): held-out loss target {t_loss:.4f}, draft {d_loss:.4f}")
    except Exception as e:  # a one-shot GPU lease: keep what was trained, report the failure, exit non-zero
        evaluation_error = f"{type(e).__name__}: {e}"
        log(f"EVALUATION FAILED: {evaluation_error}")

    def model_entry(cfg: ModelConfig, res, loss: float, tcfg_: TrainConfig) -> dict:
        return {
            "config": cfg.to_hf(),
            "parameters": cfg.num_parameters,
            "train": {
                **{k: v for k, v in asdict(tcfg_).items() if k != "betas"},
                "steps": res.steps,
                "tokens_seen": res.tokens_seen,
                "elapsed_s": res.elapsed_s,
                "tokens_per_s": res.tokens_seen / max(res.elapsed_s, 1e-9),
                "epochs": res.tokens_seen / train_stream.numel(),
                "best_step": res.best_step,
                "final_train_loss": res.log[-1]["loss"],
                "log": res.log,
            },
            "heldout_loss": loss,
            "heldout_perplexity": math.exp(loss),  # nan if evaluation failed
        }

    # 7. the EAGLE head, on the frozen target's features (its own budget, cut to what --wall-minutes leaves)
    eagle_section = None
    eagle_s = 60 * (args.minutes / 4 if args.eagle_minutes is None else args.eagle_minutes)
    if args.wall_minutes is not None:
        eagle_s = min(eagle_s, max(10.0, args.wall_minutes * 60 - (time.monotonic() - wall_start) - EVAL_RESERVE_S))
    if eagle_s > 0 and (args.eagle_minutes is None or args.eagle_minutes > 0):
        from train_eagle import eagle_stage

        try:
            eagle_section = eagle_stage(
                target, draft, train_stream, heldout_stream, preset, eagle_s, out / "eagle", eos_id, device,
                args.seed, max_steps=args.max_steps, log=log,
            )  # fmt: skip
            total_bytes += sum(eagle_section["files"].values())
        except Exception as e:  # keep the pair and its report; say what failed
            evaluation_error = (evaluation_error or "") + f" EAGLE stage: {type(e).__name__}: {e}"
            log(f"EAGLE STAGE FAILED: {e}")

    report = {
        "created_by": "scripts/train_demo.py",
        "argv": sys.argv[1:] if argv is None else argv,
        "preset": args.preset,
        "environment": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        },
        "corpus": {
            "source": "Python standard library .py files (site-packages excluded, test suites included)",
            "python_version": corpus.python_version,
            "root": corpus.root,
            "train_files": len(corpus.train),
            "heldout_files": len(corpus.heldout),
            "train_bytes": corpus.train_bytes,
            "heldout_bytes": corpus.heldout_bytes,
            "chat_examples": n_chat,
            "train_tokens": train_stream.numel(),
            "heldout_tokens": heldout_stream.numel(),
            "bytes_per_token": bytes_per_token,
        },
        "tokenizer": {
            "type": "byte-level BPE (tokenizers)",
            "vocab_size": vocab,
            "special_tokens": list(demo_data.SPECIAL_TOKENS),
        },
        "seq_len": preset.seq_len,
        "target": model_entry(tcfg, t_res, t_loss, t_train_cfg),
        "draft": model_entry(dcfg, d_res, d_loss, d_train_cfg),
        "acceptance": acceptance,
        "evaluation_error": evaluation_error,
        **({"eagle": eagle_section} if eagle_section is not None else {}),
        "files": {str(f.relative_to(out)): f.stat().st_size for f in files} | (eagle_section or {}).get("files", {}),
        "total_bytes": total_bytes,
        "wall_s": time.monotonic() - wall_start,
    }
    (out / "train_report.json").write_text(json.dumps(report, indent=2) + "\n")
    if acceptance is not None:
        log_acceptance(acceptance)
    log(f"wrote {out} ({total_bytes / 1e6:.1f} MB in {len(report['files'])} files) in {report['wall_s']:.0f}s")
    if total_bytes > MAX_TOTAL_BYTES:
        log(f"WARNING: {total_bytes:,} bytes exceeds the {MAX_TOTAL_BYTES:,}-byte budget for the shipped pair")
    if args.bundle:
        parts, digest = bundle(out, args.bundle)
        log(f"bundle: {', '.join(p.name for p in parts)} sha256 {digest}")
        log(f"restore: mkdir -p DEST && cat {args.bundle}/demo.tar.part* | tar -xf - -C DEST")
    if evaluation_error is not None:
        raise SystemExit(1)
    return report


if __name__ == "__main__":
    main()
