"""Fill the generated section of docs/demo-models.md from a train_report.json written by scripts/train_demo.py.

    python scripts/model_card.py src/speculab/engine/assets/demo/train_report.json [--card docs/demo-models.md]

Everything between the `<!-- card:begin -->` and `<!-- card:end -->` markers is replaced; the prose around
them is kept, so the script can be rerun after every training run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

BEGIN, END = "<!-- card:begin -->", "<!-- card:end -->"


def _table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _f(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}f}"


def render(report: dict) -> str:
    """The card's generated section (markdown) for one training report."""
    c, tk, env = report["corpus"], report["tokenizer"], report["environment"]
    out = [
        f"Trained with `python scripts/train_demo.py {' '.join(report['argv'])}` on {env['device']} "
        f"(torch {env['torch']}, Python {env['python']}); the whole command took {report['wall_s']:.0f} s.",
        "",
        "### Data",
        f"Python {c['python_version']} standard library: {c['train_files']} train files "
        f"({c['train_bytes'] / 1e6:.1f} MB) plus {c['chat_examples']:,} docstring-to-function chat examples, "
        f"{c['train_tokens']:,} tokens; held out by file: {c['heldout_files']} files "
        f"({c['heldout_bytes'] / 1e6:.2f} MB, {c['heldout_tokens']:,} tokens). "
        f"{c['bytes_per_token']:.2f} bytes of source per token.",
        "",
        "### Tokenizer",
        f"{tk['type']}, vocabulary {tk['vocab_size']}, special tokens "
        + ", ".join(f"`{t}`" for t in tk["special_tokens"])
        + ".",
        "",
        "### Architectures (Llama, tied embeddings, fp16 safetensors)",
    ]
    rows = []
    for name in ("target", "draft"):
        cfg = report[name]["config"]
        rows.append(
            [
                name,
                f"{report[name]['parameters']:,}",
                cfg["hidden_size"],
                cfg["num_hidden_layers"],
                cfg["num_attention_heads"],
                cfg["num_key_value_heads"],
                cfg["head_dim"],
                cfg["intermediate_size"],
                cfg["max_position_embeddings"],
            ]
        )
    out.append(
        _table(["model", "parameters", "hidden", "layers", "heads", "KV heads", "head dim", "MLP", "context"], rows)
    )
    out += ["", "### Training"]
    rows = []
    for name in ("target", "draft"):
        t = report[name]["train"]
        w = t["distill_kl_weight"]
        objective = (
            "cross-entropy" if name == "target" else "KL(target‖draft)" if w == 1 else f"{w:g}·KL + {1 - w:g}·CE"
        )
        rows.append(
            [
                name,
                objective,
                f"{t['steps']:,}",
                f"{t['batch_size']}×{t['seq_len']}",
                f"{t['tokens_seen'] / 1e6:.1f}M",
                _f(t["epochs"], 1),
                f"{t['elapsed_s']:.0f}",
                f"{t['tokens_per_s']:,.0f}",
                f"{t['peak_lr']:g}",
                _f(t["final_train_loss"]),
                _f(report[name]["heldout_loss"]),
                _f(report[name]["heldout_perplexity"], 2),
            ]
        )
    header = ["model", "objective", "steps", "batch", "tokens seen", "epochs", "seconds", "tokens/s", "peak lr"]
    out.append(_table([*header, "final train loss", "held-out loss", "held-out ppl"], rows))
    out += ["", "### Acceptance (greedy)"]
    acc = report.get("acceptance")
    if acc is None:
        out.append(f"Evaluation failed: {report.get('evaluation_error')}")
    else:
        tf, rp = acc["teacher_forced_heldout"], acc["greedy_replay"]
        ng = tf["ngram"]
        out += [
            f"Teacher-forced on {tf['positions']:,} held-out positions: target top-1 accuracy "
            f"{_f(tf['target_top1_accuracy'])}, draft top-1 {_f(tf['draft_top1_accuracy'])}; the draft's argmax equals "
            f"the target's at **{_f(tf['draft_agreement_alpha'])}** of positions (i.i.d. estimate for k=4: "
            f"{_f(tf['draft_expected_tokens_per_step_k4_iid'], 2)} tokens per target step). Prompt lookup (n 4..2, "
            f"context = the {report['seq_len']}-token window so far) proposes at "
            f"{_f(ng['proposal_rate'])} of positions and predicts "
            f"the target's token at **{_f(ng['hit_rate'])}** of all positions (precision {_f(ng['precision'])}).",
            "",
            "Greedy speculative decoding replayed exactly on the target's own continuations of "
            f"{rp['prompts']} held-out prompts ({rp['prompt_tokens']} prompt tokens, "
            f"up to {rp['max_new_tokens']} new), k = 4:",
            "",
        ]
        rows = _replay_rows(rp, ("draft", "ngram"))
        header = ["proposer", "drafts", "draft tokens", "accepted", "acceptance rate", "mean acceptance length"]
        out.append(_table([*header, "tokens per target step", "accepted per position"], rows))
    if report.get("eagle"):
        out += ["", *render_eagle(report["eagle"])]
    out += ["", "### Files", f"{report['total_bytes'] / 1e6:.1f} MB in {len(report['files'])} files:", ""]
    out.append(_table(["file", "bytes"], [[f"`{k}`", f"{v:,}"] for k, v in sorted(report["files"].items())]))
    return "\n".join(out)


def _replay_rows(replay: dict, kinds: tuple[str, ...]) -> list[list[object]]:
    rows = []
    for kind in kinds:
        if kind not in replay:
            continue
        s = replay[kind]
        rows.append(
            [
                kind,
                f"{s['num_drafts']:,}",
                f"{s['num_draft_tokens']:,}",
                f"{s['num_accepted_tokens']:,}",
                _f(s["acceptance_rate"]),
                _f(s["mean_acceptance_length"], 2),
                _f(s["tokens_per_target_step"], 2),
                " / ".join(str(x) for x in s["accepted_per_pos"]),
            ]
        )
    return rows


def render_eagle(e: dict) -> list[str]:
    """The EAGLE head's part of the card: architecture, training, acceptance."""
    cfg, t, loss = e["config"], e["train"], e["loss"]
    reused = t.get("reused_by")
    vocab = cfg.get("draft_vocab_size")
    out = [
        "### EAGLE head (`demo-eagle`)",
        f"Trained with `python {e.get('created_by', 'scripts/train_demo.py')} {' '.join(e.get('argv', []))}`".rstrip()
        + f" on {e.get('environment', {}).get('device', 'the same device')}"
        + (
            f" (draft vocabulary, export and evaluation redone by `python scripts/train_eagle.py {' '.join(reused)}`)"
            if reused
            else ""
        )
        + ": one decoder layer of the target's shape over fc(concat(embed(token), target feature)), the target's "
        f"embedding and LM head shared (not stored), {e['parameters']:,} parameters, fc bias "
        f"{'yes' if cfg.get('bias') else 'no'}"
        + (
            f"; it drafts over the {vocab:,} most frequent training tokens (a draft vocabulary, `d2t`)."
            if vocab
            else "; it drafts over the whole vocabulary."
        ),
        "",
    ]
    depth = loss.get("depth", 1)
    objective = f"{loss['feature_weight']:g}·smooth-L1(feature) + {loss['token_weight']:g}·CE(target‖head)"
    if depth > 1:
        objective += f", {depth} passes after {loss.get('depth_after', 0):.0%} of the budget"
    final = t["final"]
    header = ["objective", "steps", "batch", "tokens seen", "epochs", "seconds", "tokens/s", "peak lr"]
    header += ["final feature loss", "final token loss", "held-out token loss", "held-out agreement"]
    row = [
        objective,
        f"{t['steps']:,}",
        f"{t['batch_size']}×{t['seq_len']}",
        f"{t['tokens_seen'] / 1e6:.1f}M",
        _f(t["epochs"], 2),
        f"{t['elapsed_s']:.0f}",
        f"{t['tokens_per_s']:,.0f}",
        f"{t['peak_lr']:g}",
        _f(final["feature_loss"]),
        _f(final["token_loss"]),
        _f(final.get("heldout_token_loss", float("nan"))),
        _f(final.get("heldout_agreement", float("nan"))),
    ]
    out.append(_table(header, [row]))
    if t.get("note"):
        out += ["", f"The training record was {t['note']}."]
    acc = e["acceptance"]
    tf, rp = acc["teacher_forced_heldout"], acc["engine_greedy_replay"]
    out += [
        "",
        f"Teacher-forced on {tf['positions']:,} held-out positions (the first draft's situation: true target "
        f"features up to the position), the head's argmax equals the target's next-token argmax at "
        f"**{_f(tf['agreement_alpha'])}** of positions (i.i.d. estimate for k=4: "
        f"{_f(tf['expected_tokens_per_step_k4_iid'], 2)} tokens per target step)"
        + (
            f"; restricted to the draft vocabulary (which holds {_f(tf['draft_vocab_coverage'])} of held-out tokens) "
            f"it agrees at **{_f(tf['agreement_alpha_draft_vocab'])}**."
            if "agreement_alpha_draft_vocab" in tf
            else "."
        ),
        "",
        f"Greedy speculative decoding run in speculab's engine (float32, k = 4) on {rp['prompts']} held-out prompts "
        f"({rp['prompt_tokens']} tokens, up to {rp['max_new_tokens']} new, stopping at EOS), every proposer on the "
        "same prompts; a request's prefill emits its first token without drafts, so tokens per target step count "
        "that forward too:",
        "",
    ]
    header = ["proposer", "drafts", "draft tokens", "accepted", "acceptance rate", "mean acceptance length"]
    out.append(
        _table(
            [*header, "tokens per target step", "accepted per position"], _replay_rows(rp, ("eagle", "draft", "ngram"))
        )
    )
    return out


def fill(card: str, report: dict) -> str:
    if BEGIN not in card or END not in card:
        raise ValueError(f"the card has no {BEGIN} ... {END} section to fill")
    head, rest = card.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{render(report)}\n{END}{tail}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--card", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "demo-models.md")
    args = ap.parse_args(argv)
    report = json.loads(args.report.read_text())
    args.card.write_text(fill(args.card.read_text(), report))
    print(f"filled {args.card} from {args.report}")


if __name__ == "__main__":
    main()
