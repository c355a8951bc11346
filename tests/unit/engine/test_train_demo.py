"""The demo-pair training pipeline (scripts/train_demo.py) end to end on a CPU, and its pieces.

One tiny run (a stdlib subset, ~100k-parameter models, seconds of training) feeds the end-to-end checks:
the loss falls, both output directories load in transformers with logits equal to our CausalLM's, the EAGLE head
loads as an EAGLE checkpoint and drafts in the engine, and the files respect the shipping limits. The real
preset's sizes are checked against the limits arithmetically.
"""

from __future__ import annotations

import io
import json
import math
import sys
import tarfile
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import demo_data  # noqa: E402
import demo_eval  # noqa: E402
import demo_export  # noqa: E402
import demo_train  # noqa: E402
import train_demo  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from speculab.engine.model import BatchInput, CausalLM, KVCache, ModelConfig  # noqa: E402

MiB = 2**20


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    bundle_dir = tmp_path_factory.mktemp("bundle")
    argv = ["--out", str(out), "--device", "cpu", "--preset", "tiny", "--minutes", "3", "--max-steps", "40"]
    argv += [
        "--stride",
        "25",
        "--max-files",
        "50",
        "--heldout-fraction",
        "0.1",
        "--workers",
        "1",
        "--bundle",
        str(bundle_dir),
    ]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matmuls: extra threads only add contention on a loaded machine (20x slower)
    try:
        report = train_demo.main(argv)
    finally:
        torch.set_num_threads(threads)
    return out, bundle_dir, report


def _tiny_config(vocab: int = 97, layers: int = 2) -> ModelConfig:
    return ModelConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=128,
        tie_word_embeddings=True,
    )


def _our_logits(model_dir: Path, ids: torch.Tensor) -> torch.Tensor:
    cfg = ModelConfig.from_hf(json.loads((model_dir / "config.json").read_text()))
    ours = CausalLM(cfg).eval()
    sd = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        sd.update({k: v.float() for k, v in load_file(str(f)).items()})
    missing, unexpected = ours.load_state_dict(sd, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}
    cache = KVCache(cfg, 1, ids.shape[1], torch.float32, torch.device("cpu"))
    batch = BatchInput(ids, torch.arange(ids.shape[1])[None], torch.tensor([0]), ids.shape[1])
    with torch.no_grad():
        return ours(batch, cache)


def test_training_lowers_the_loss(run):
    _, _, report = run
    for name in ("target", "draft"):
        log = report[name]["train"]["log"]
        assert report[name]["train"]["steps"] == 40
        assert log[-1]["loss"] < log[0]["loss"] - 0.3, log  # from ~ln(384) = 5.95 at init
        assert report[name]["heldout_loss"] < math.log(report["tokenizer"]["vocab_size"]) - 0.3
    assert report["draft"]["train"]["log"][-1]["kl"] < report["draft"]["train"]["log"][0]["kl"]
    assert report["evaluation_error"] is None
    assert report["corpus"]["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert report["corpus"]["heldout_files"] > 0 and report["corpus"]["train_tokens"] > 10_000


def test_eagle_head_is_trained_exported_and_evaluated(run):
    from speculab.engine.loader import load_model
    from speculab.engine.speculative.proposers.eagle_head import load_eagle_head

    out, _, report = run
    e = report["eagle"]
    log = e["train"]["log"]
    assert e["train"]["steps"] == 40 and {entry["depth"] for entry in log} == {1, 2}  # the unrolled pass joined
    assert log[-1]["token_loss"] < log[0]["token_loss"] - 0.3
    head = load_eagle_head(out / "eagle", load_model(out / "target"))
    assert head.config.num_hidden_layers == 1 and head.lm_head is None
    assert head.draft_token_ids().numel() == train_demo.PRESETS["tiny"].eagle_draft_vocab  # the frequent tokens
    tf = e["acceptance"]["teacher_forced_heldout"]
    assert 0 < tf["draft_vocab_coverage"] <= 1 and 0 <= tf["agreement_alpha_draft_vocab"] <= 1
    assert sorted(e["files"]) == ["eagle/config.json", "eagle/model.safetensors"]
    assert set(e["files"]) <= set(report["files"])
    replay = e["acceptance"]["engine_greedy_replay"]
    for kind in ("eagle", "draft", "ngram"):
        assert (
            replay[kind]["tokens_generated"] > 0
            and sum(replay[kind]["accepted_per_pos"]) == replay[kind]["num_accepted_tokens"]
        )
    assert replay["eagle"]["num_drafts"] > 0
    assert 0 <= e["acceptance"]["teacher_forced_heldout"]["agreement_alpha"] <= 1


def test_report_has_acceptance(run):
    out, _, report = run
    assert json.loads((out / "train_report.json").read_text())["acceptance"] == report["acceptance"]
    tf = report["acceptance"]["teacher_forced_heldout"]
    assert 0.0 <= tf["draft_agreement_alpha"] <= 1.0
    assert 1.0 <= tf["draft_expected_tokens_per_step_k4_iid"] <= 5.0
    assert 0.0 <= tf["ngram"]["hit_rate"] <= tf["ngram"]["proposal_rate"] <= 1.0
    for kind in ("draft", "ngram"):
        s = report["acceptance"]["greedy_replay"][kind]
        assert s["tokens_generated"] > 0 and 1.0 <= s["tokens_per_target_step"] <= 5.0
        assert sum(s["accepted_per_pos"]) == s["num_accepted_tokens"]


@pytest.mark.parametrize("name", ["target", "draft"])
def test_outputs_load_in_transformers_and_match_ours(run, name):
    out, _, _ = run
    model_dir = out / name
    tok = transformers.AutoTokenizer.from_pretrained(str(model_dir))
    assert (tok.bos_token, tok.eos_token) == (demo_data.BOS, demo_data.EOS)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|bos|><|user|>\nhi<|eos|>\n<|assistant|>\n"
    ids = torch.tensor([tok.encode("def add(a, b):\n    return a + b\n", add_special_tokens=False)])
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    with torch.no_grad():
        ref = hf(ids).logits
    assert (ref - _our_logits(model_dir, ids)).abs().max().item() <= 1e-3
    cfg = json.loads((model_dir / "config.json").read_text())
    assert cfg["torch_dtype"] == "float16" and cfg["tie_word_embeddings"] is True
    assert all(t.dtype == torch.float16 for t in load_file(str(model_dir / "model.safetensors")).values())


def test_files_respect_the_shipping_limits(run):
    out, bundle_dir, report = run
    files = [p for p in out.rglob("*") if p.is_file()]
    assert all(p.stat().st_size <= 15 * MiB for p in files)
    assert sum(report["files"].values()) == report["total_bytes"] <= train_demo.MAX_TOTAL_BYTES
    parts = sorted(bundle_dir.glob("demo.tar.part*"))
    assert 1 <= len(parts) <= 8 and all(p.stat().st_size <= 15 * MiB for p in parts)
    with tarfile.open(fileobj=io.BytesIO(b"".join(p.read_bytes() for p in parts))) as tar:
        names = set(tar.getnames())
    assert {"train_report.json", "target/model.safetensors", "draft/tokenizer.json", "eagle/model.safetensors"} <= names


def test_demo_preset_fits_the_limits():
    p = train_demo.PRESETS["demo"]
    t = train_demo.model_config(p.target, p.vocab_size, p.seq_len, 0, 1)
    d = train_demo.model_config(p.draft, p.vocab_size, p.seq_len, 0, 1)
    assert t.num_parameters <= 30_000_000 and d.num_parameters <= 5_000_000
    assert t.head_dim == d.head_dim == 64 and t.tie_word_embeddings and d.tie_word_embeddings
    tokenizer_bytes = 2 * 400_000  # tokenizer.json of an 8192-token BPE is ~0.2 MB; one copy per directory
    assert 2 * (t.num_parameters + d.num_parameters) + tokenizer_bytes <= train_demo.MAX_TOTAL_BYTES
    assert p.vocab_size * t.hidden_size * 2 <= demo_export.MAX_SHARD_BYTES  # the largest tensor fits a shard


def test_sharded_export_loads_in_transformers(tmp_path):
    torch.manual_seed(0)
    model = CausalLM(_tiny_config(layers=3)).eval()
    train_demo.init_weights(model, seed=0)
    written = demo_export.save_model_dir(model, tmp_path, {}, {"eos_token_id": 1}, max_shard_bytes=20_000)
    shards = sorted(tmp_path.glob("model-*-of-*.safetensors"))
    assert len(shards) >= 2 and all(p.stat().st_size <= 20_000 + 4096 for p in shards)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == {p.name for p in shards}
    assert tmp_path / "model.safetensors.index.json" in written
    ids = torch.randint(0, 97, (1, 20), generator=torch.Generator().manual_seed(1))
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), dtype=torch.float32).eval()
    with torch.no_grad():
        assert (hf(ids).logits - _our_logits(tmp_path, ids)).abs().max().item() <= 1e-3


def test_training_forward_matches_the_serving_forward():
    torch.manual_seed(0)
    model = CausalLM(_tiny_config()).eval()
    train_demo.init_weights(model, seed=3)
    ids = torch.randint(0, 97, (2, 24), generator=torch.Generator().manual_seed(2))
    cache = KVCache(model.config, 2, 24, torch.float32, torch.device("cpu"))
    batch = BatchInput(ids, torch.arange(24).expand(2, 24), torch.tensor([0, 1]), 24)
    with torch.no_grad():
        assert torch.allclose(demo_train.train_logits(model, ids), model(batch, cache), atol=1e-5)


def test_lr_schedule_warms_up_then_decays_with_the_clock():
    cfg = demo_train.TrainConfig(batch_size=1, seq_len=8, budget_s=100.0, peak_lr=1.0, warmup_steps=10)
    assert demo_train.lr_at(cfg, 0, 0.0) == pytest.approx(0.1)
    assert demo_train.lr_at(cfg, 9, 0.0) == pytest.approx(1.0)
    assert demo_train.lr_at(cfg, 500, 50.0) == pytest.approx(cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) / 2)
    assert demo_train.lr_at(cfg, 500, 100.0) == pytest.approx(cfg.min_lr_ratio)


def test_ngram_index_proposes_from_latest_earlier_longest_match():
    idx = demo_eval.NgramIndex(max_n=4, min_n=2)
    idx.extend([1, 2, 3, 9, 1, 2, 3, 8, 5, 2, 3])
    # suffix (2, 3): latest earlier occurrence ends at 7 -> proposes 8, 5, 2
    assert idx.propose(3) == [8, 5, 2]
    idx.append(8)  # suffix (2, 3, 8) occurred before, ending at 8 -> 5, 2, 3, 8
    assert idx.propose(4) == [5, 2, 3, 8]
    fresh = demo_eval.NgramIndex(4, 2)
    fresh.extend([1, 2, 3])
    assert fresh.propose(4) == []  # the suffix never matches itself


def test_replays_count_like_speculative_decoding():
    # matches: step 1 accepts 2 then corrects; step 2 accepts 4 (all) + bonus; step 3 rejects at once.
    steps, accepted, per_pos = demo_eval.replay_draft([True, True, False, True, True, True, True, True, False], k=4)
    assert (steps, accepted, per_pos) == (3, 6, [2, 2, 1, 1])
    s = demo_eval.replay_ngram(prompt=[1, 2, 3, 4, 5, 6, 1, 2], generated=[3, 4, 5, 7, 7], k=4, max_n=4, min_n=2)
    # step 1 proposes 3 4 5 6: accepts 3 4 5, target emits 7; step 2 has no match (…5 7): emits 7
    assert (s.target_steps, s.num_drafts, s.num_draft_tokens, s.num_accepted_tokens) == (2, 1, 4, 3)
    assert s.tokens_per_target_step == pytest.approx(2.5) and s.mean_acceptance_length == pytest.approx(4.0)
    assert demo_eval.expected_tokens_per_step_iid(0.5, 4) == pytest.approx(1.9375)


def test_heldout_split_is_stable_by_path():
    paths = [f"pkg/mod{i}.py" for i in range(2000)]
    held = [p for p in paths if demo_data.is_heldout(p, 0.1)]
    assert held == [p for p in paths if demo_data.is_heldout(p, 0.1)]
    assert 120 <= len(held) <= 280


def test_chat_examples_pair_docstring_requests_with_code():
    src = (
        'class A:\n    @staticmethod\n    def twice(x):\n        """Return x doubled.\n\n        More."""\n'
        "        return 2 * x\n"
    )
    (doc,) = demo_data.chat_examples(src)
    assert doc.startswith("<|bos|><|user|>\nWrite a Python function `twice`: Return x doubled.<|eos|>\n<|assistant|>\n")
    assert "@staticmethod\ndef twice(x):\n" in doc and doc.endswith("return 2 * x<|eos|>\n")
    assert demo_data.chat_examples("print 'python 2'") == []


def test_model_card_is_filled_from_the_report(run, tmp_path):
    import model_card

    out, _, report = run
    card = tmp_path / "card.md"
    card.write_text((SCRIPTS.parent / "docs" / "demo-models.md").read_text())
    model_card.main([str(out / "train_report.json"), "--card", str(card)])
    text = card.read_text()
    assert "Filled in after the GPU run" not in text and "## Limitations" in text
    assert f"{report['target']['parameters']:,}" in text and f"{report['target']['heldout_loss']:.3f}" in text
    assert f"{report['acceptance']['teacher_forced_heldout']['draft_agreement_alpha']:.3f}" in text
    assert "### EAGLE head (`demo-eagle`)" in text
    assert f"{report['eagle']['acceptance']['teacher_forced_heldout']['agreement_alpha']:.3f}" in text
    model_card.main([str(out / "train_report.json"), "--card", str(card)])  # idempotent: refills the same section
    assert card.read_text() == text


SHIPPED = SCRIPTS.parent / "src" / "speculab" / "engine" / "assets" / "demo"


@pytest.mark.skipif(not (SHIPPED / "target" / "config.json").exists(), reason="demo pair not trained yet")
def test_shipped_demo_pair_loads_matches_and_fits():
    files = [p for p in SHIPPED.rglob("*") if p.is_file()]
    weights = [p for p in files if p.suffix == ".safetensors"]
    assert all(p.stat().st_size <= 15 * MiB for p in files)
    assert sum(p.stat().st_size for p in files if p.name != "train_report.json") <= train_demo.MAX_TOTAL_BYTES
    assert {p.parent.name for p in weights} <= {"target", "draft", "eagle"}
    configs = {name: json.loads((SHIPPED / name / "config.json").read_text()) for name in ("target", "draft")}
    assert configs["target"]["vocab_size"] == configs["draft"]["vocab_size"]
    assert (SHIPPED / "target" / "tokenizer.json").read_bytes() == (SHIPPED / "draft" / "tokenizer.json").read_bytes()
    params = {}
    for name in ("target", "draft"):
        model_dir = SHIPPED / name
        tok = transformers.AutoTokenizer.from_pretrained(str(model_dir))
        ids = torch.tensor([tok.encode("import os\n\n\ndef main(argv):\n    return", add_special_tokens=False)])
        hf = transformers.AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
        params[name] = sum(p.numel() for p in hf.parameters())
        with torch.no_grad():
            assert (hf(ids).logits - _our_logits(model_dir, ids)).abs().max().item() <= 1e-3
    assert params["target"] <= 30_000_000 and params["draft"] <= 5_000_000


@pytest.mark.skipif(not (SHIPPED / "eagle" / "config.json").exists(), reason="demo EAGLE head not trained yet")
def test_shipped_eagle_head_loads_for_the_shipped_target():
    from speculab.engine.loader import load_model
    from speculab.engine.speculative.proposers.eagle_head import load_eagle_head

    head = load_eagle_head("demo-eagle", load_model("demo"))
    assert head.config.hidden_size == json.loads((SHIPPED / "target" / "config.json").read_text())["hidden_size"]
    assert sum(p.numel() for p in head.parameters()) <= 2_000_000  # small: one layer and fc
    assert all(p.stat().st_size <= 15 * MiB for p in (SHIPPED / "eagle").iterdir())
