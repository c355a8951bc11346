"""load_model: HF checkpoints saved by transformers (single file and sharded) give transformers' logits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from tests.fakes.tiny_checkpoint import make_tiny_checkpoint

from speculab.engine import loader
from speculab.engine.loader import ModelLoadError, load_model, parse_dtype, resolve_model_path
from speculab.engine.model import BatchInput, KVCache, ModelConfig, UnsupportedModelError
from speculab.errors import UserError

transformers = pytest.importorskip("transformers")


def _hf_model(arch: str, *, tie: bool = False):
    cfg = ModelConfig(
        vocab_size=120,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        architecture=arch,
        max_position_embeddings=128,
        attention_bias=arch == "Qwen2ForCausalLM",
        tie_word_embeddings=tie,
    )
    torch.manual_seed(0)
    hf = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**cfg.to_hf())).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith("bias"):  # HF zero-initialises biases; make them matter
                p.normal_()
    return hf


def _logits(model, ids: torch.Tensor) -> torch.Tensor:
    n = ids.shape[1]
    p = next(model.parameters())
    cache = KVCache(model.config, num_slots=1, max_len=64, dtype=p.dtype, device=p.device)
    return model(BatchInput(ids, torch.arange(n)[None], torch.tensor([0]), n), cache)


@pytest.mark.parametrize("arch", ["LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"])
@pytest.mark.parametrize("sharded", [False, True])
@torch.no_grad()
def test_loaded_logits_match_transformers(tmp_path: Path, arch: str, sharded: bool):
    hf = _hf_model(arch)
    hf.save_pretrained(tmp_path, max_shard_size="40KB" if sharded else "1GB")
    assert (tmp_path / "model.safetensors.index.json").is_file() == sharded
    model = load_model(tmp_path)
    assert next(model.parameters()).dtype == torch.float32  # CPU default
    assert not any(p.requires_grad for p in model.parameters()) and not model.training
    ids = torch.randint(0, 120, (1, 30), generator=torch.Generator().manual_seed(1))
    assert (_logits(model, ids) - hf(ids).logits).abs().max().item() <= 1e-4


@torch.no_grad()
def test_tied_embeddings_share_one_tensor(tmp_path: Path):
    hf = _hf_model("LlamaForCausalLM", tie=True)
    hf.save_pretrained(tmp_path)
    model = load_model(tmp_path)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    ids = torch.randint(0, 120, (1, 12), generator=torch.Generator().manual_seed(2))
    assert (_logits(model, ids) - hf(ids).logits).abs().max().item() <= 1e-4


@torch.no_grad()
def test_cpu_weights_are_laid_out_column_major_with_the_checkpoints_values(tmp_path: Path):
    """lay_out_for_cpu: each Linear weight keeps its [out, in] shape and values, strided column-major, so that
    `F.linear` multiplies by a contiguous [in, out] matrix (bench/weight_layout.py: 1.07-1.5x quicker steps)."""
    ckpt = make_tiny_checkpoint(tmp_path, tie=True)
    state = load_file(ckpt / "model.safetensors")
    model = load_model(ckpt)
    linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert linears and all(m.weight.t().is_contiguous() for m in linears.values())
    for name, m in linears.items():
        stored = state["model.embed_tokens.weight" if name == "lm_head" else f"{name}.weight"]
        assert torch.equal(m.weight, stored.float())
    assert model.lm_head.weight is model.model.embed_tokens.weight  # still one tensor when tied
    # the same numbers as row-major weights, up to MKL's order of summation
    ids = torch.randint(0, model.config.vocab_size, (1, 9), generator=torch.Generator().manual_seed(4))
    row = load_model(ckpt)
    for m in row.modules():
        if isinstance(m, torch.nn.Linear):
            m.weight.data = m.weight.data.contiguous()
    assert row.lm_head.weight.is_contiguous()
    assert (_logits(model, ids) - _logits(row, ids)).abs().max().item() <= 1e-5


@torch.no_grad()
def test_tied_checkpoint_that_also_stores_lm_head_loads(tmp_path: Path):
    ckpt = make_tiny_checkpoint(tmp_path, tie=True)
    state = load_file(ckpt / "model.safetensors")
    state["lm_head.weight"] = state["model.embed_tokens.weight"].clone()
    save_file(state, str(ckpt / "model.safetensors"))
    model = load_model(ckpt)
    assert model.lm_head.weight is model.model.embed_tokens.weight


@torch.no_grad()
def test_bfloat16_load(tmp_path: Path):
    ckpt = make_tiny_checkpoint(tmp_path, shards=2)
    fp32 = load_model(ckpt)
    bf16 = load_model(ckpt, dtype=torch.bfloat16)
    assert {p.dtype for p in bf16.parameters()} == {torch.bfloat16}
    assert bf16.inv_freq.dtype == torch.float32  # rope frequencies stay exact
    ids = torch.randint(0, fp32.config.vocab_size, (1, 10), generator=torch.Generator().manual_seed(3))
    ref, low = _logits(fp32, ids), _logits(bf16, ids)
    assert low.dtype == torch.float32
    assert (low - ref).abs().max().item() < 0.1 * ref.abs().max().item()  # bf16 rounding, not garbage


def test_default_dtype_per_device():
    assert loader.default_dtype(torch.device("cpu")) == torch.float32
    assert loader.default_dtype(torch.device("cuda")) == torch.bfloat16


def test_parse_dtype():
    assert parse_dtype("bf16") == torch.bfloat16 and parse_dtype("float32") == torch.float32
    assert parse_dtype("auto") is None and parse_dtype(None) is None
    with pytest.raises(UserError, match="unknown dtype 'int3'"):
        parse_dtype("int3")


def test_loader_accepts_shipped_names_and_rejects_missing_ones(tmp_path: Path, monkeypatch):
    monkeypatch.setitem(loader.SHIPPED_MODELS, "demo", tmp_path / "nope")
    with pytest.raises(ModelLoadError, match="shipped 'demo' model is missing"):
        resolve_model_path("demo")
    ckpt = make_tiny_checkpoint(tmp_path / "target")
    monkeypatch.setitem(loader.SHIPPED_MODELS, "demo", ckpt)
    assert resolve_model_path("demo") == ckpt
    assert load_model("demo").config.num_hidden_layers == 2


def test_shipped_names_point_into_the_package():
    assert loader.SHIPPED_MODELS["demo"].parts[-3:] == ("assets", "demo", "target")
    assert loader.SHIPPED_MODELS["demo-draft"].parts[-3:] == ("assets", "demo", "draft")


def test_missing_directory(tmp_path: Path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_model(tmp_path / "absent")


def test_hub_name_is_refused_with_a_download_hint():
    with pytest.raises(ModelLoadError, match=r"never downloads.*huggingface-cli download meta-llama/Llama-3.2-1B"):
        resolve_model_path("meta-llama/Llama-3.2-1B")


def test_file_instead_of_directory(tmp_path: Path):
    f = tmp_path / "model.safetensors"
    f.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="is a file"):
        load_model(f)


def test_missing_config(tmp_path: Path):
    with pytest.raises(ModelLoadError, match=r"no config\.json"):
        load_model(tmp_path)


def test_missing_weights(tmp_path: Path):
    ckpt = make_tiny_checkpoint(tmp_path)
    (ckpt / "model.safetensors").unlink()
    (ckpt / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(ModelLoadError, match=r"neither model\.safetensors nor .*pytorch_model\.bin is not supported"):
        load_model(ckpt)


def test_missing_shard(tmp_path: Path):
    ckpt = make_tiny_checkpoint(tmp_path, shards=3)
    (ckpt / "model-00002-of-00003.safetensors").unlink()
    with pytest.raises(ModelLoadError, match=r"missing weight shard.*model-00002-of-00003"):
        load_model(ckpt)


def test_wrong_keys_are_listed(tmp_path: Path):
    ckpt = make_tiny_checkpoint(tmp_path)
    state = load_file(ckpt / "model.safetensors")
    state["model.layers.0.mlp.gate.weight"] = state.pop("model.layers.0.mlp.gate_proj.weight")
    del state["model.norm.weight"]
    save_file(state, str(ckpt / "model.safetensors"))
    with pytest.raises(ModelLoadError) as e:
        load_model(ckpt)
    msg = str(e.value)
    assert "missing keys: model.layers.0.mlp.gate_proj.weight, model.norm.weight" in msg
    assert "unexpected keys: model.layers.0.mlp.gate.weight" in msg


def test_wrong_shape_is_named(tmp_path: Path):
    ckpt = make_tiny_checkpoint(tmp_path)
    cfg = json.loads((ckpt / "config.json").read_text())
    cfg["intermediate_size"] = 100
    (ckpt / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match=r"mlp\.\w+_proj\.weight .* has shape .* config\.json implies"):
        load_model(ckpt)


def test_old_rotary_buffers_in_checkpoints_are_ignored(tmp_path: Path):
    ckpt = make_tiny_checkpoint(tmp_path)
    state = load_file(ckpt / "model.safetensors")
    state["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(8)
    save_file(state, str(ckpt / "model.safetensors"))
    load_model(ckpt)


def test_unsupported_architecture(tmp_path: Path):
    ckpt = make_tiny_checkpoint(tmp_path)
    cfg = json.loads((ckpt / "config.json").read_text())
    cfg["architectures"] = ["GPT2LMHeadModel"]
    (ckpt / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UnsupportedModelError, match="'GPT2LMHeadModel' is not supported") as e:
        load_model(ckpt)
    assert isinstance(e.value, UserError)


def test_malformed_config(tmp_path: Path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="not valid JSON"):
        load_model(tmp_path)


def test_model_is_built_on_meta_so_weights_exist_once(tmp_path: Path, monkeypatch):
    """Random init never touches real memory: the only real tensors are the ones read from safetensors."""
    ckpt = make_tiny_checkpoint(tmp_path)
    devices = []
    real_init = torch.nn.init.kaiming_uniform_

    def spy(tensor, *a, **kw):
        devices.append(tensor.device.type)
        return real_init(tensor, *a, **kw)

    monkeypatch.setattr(torch.nn.init, "kaiming_uniform_", spy)
    model = load_model(ckpt)
    assert devices and set(devices) == {"meta"}
    assert not any(p.is_meta for p in model.parameters())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on machines without CUDA")
def test_cuda_without_cuda_is_a_clear_error(tiny_checkpoint: Path):
    with pytest.raises(ModelLoadError, match="CUDA is not available here; use --device cpu"):
        load_model(tiny_checkpoint, device="cuda")


def test_unknown_device(tiny_checkpoint: Path):
    with pytest.raises(ModelLoadError, match="unknown device 'gpu0'"):
        load_model(tiny_checkpoint, device="gpu0")


def test_loading_a_model_builds_nothing_on_the_meta_device_that_imports_torch_dynamo():
    """The model is built on the meta device: normal_'s and arange's meta kernels import torch._dynamo, about a second
    of every server's start (the demo server was ready in 3.2 s with it, 2.0 s without). The demo pair loaded in a
    fresh process must not bring it in; its rotary frequencies are real numbers all the same."""
    import subprocess
    import sys

    code = (
        "import sys; from speculab.engine.loader import load_model; m = load_model('demo'); load_model('demo-draft');"
        "print('torch._dynamo' in sys.modules, m.inv_freq.is_meta, bool(m.inv_freq.isfinite().all()))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.split() == ["False", "False", "True"], done.stdout + done.stderr[-2000:]
