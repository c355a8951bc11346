"""Our decoder's logits match transformers' on tiny random checkpoints, whole-prompt and incrementally."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from speculab.engine.model import BatchInput, CausalLM, KVCache, ModelConfig, consecutive_start  # noqa: E402

LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16,
}


def _pair(arch: str, **extra):
    cfg = ModelConfig(
        vocab_size=100,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        architecture=arch,
        max_position_embeddings=256,
        attention_bias=arch == "Qwen2ForCausalLM",
        **extra,
    )
    torch.manual_seed(0)
    hf = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**cfg.to_hf())).eval()
    if cfg.attention_bias:  # HF initialises biases to zero; make them matter
        with torch.no_grad():
            for name, p in hf.named_parameters():
                if name.endswith("bias"):
                    p.normal_()
    ours = CausalLM(cfg).eval()
    missing, unexpected = ours.load_state_dict(hf.state_dict(), strict=True)
    assert not unexpected and set(missing) <= {"lm_head.weight"}
    return cfg, hf, ours


@pytest.mark.parametrize(
    "arch,extra",
    [
        ("LlamaForCausalLM", {}),
        ("LlamaForCausalLM", {"rope_scaling": LLAMA3_ROPE}),
        ("LlamaForCausalLM", {"tie_word_embeddings": True}),
        ("MistralForCausalLM", {}),
        ("Qwen2ForCausalLM", {}),
    ],
)
@torch.no_grad()
def test_logits_match_transformers(arch, extra):
    cfg, hf, ours = _pair(arch, **extra)
    ids = torch.randint(0, cfg.vocab_size, (1, 40), generator=torch.Generator().manual_seed(1))
    ref = hf(ids).logits

    cache = KVCache(cfg, num_slots=4, max_len=64, dtype=torch.float32, device=torch.device("cpu"))
    whole = ours(BatchInput(ids, torch.arange(40)[None], torch.tensor([2]), 40), cache)
    assert (whole - ref).abs().max().item() <= 1e-4

    # Prefill 25 tokens, then decode one at a time in another slot: same logits.
    cache = KVCache(cfg, num_slots=4, max_len=64, dtype=torch.float32, device=torch.device("cpu"))
    parts = [ours(BatchInput(ids[:, :25], torch.arange(25)[None], torch.tensor([1]), 25), cache)]
    for p in range(25, 40):
        parts.append(ours(BatchInput(ids[:, p : p + 1], torch.tensor([[p]]), torch.tensor([1]), p + 1), cache))
    assert (torch.cat(parts, 1) - ref).abs().max().item() <= 1e-4


@torch.no_grad()
def test_padded_batch_rows_are_independent():
    """Two sequences of different lengths in one padded forward equal each run alone."""
    cfg, _, ours = _pair("LlamaForCausalLM")
    a = torch.randint(0, 100, (1, 12))
    b = torch.randint(0, 100, (1, 7))
    cache = KVCache(cfg, 4, 64, torch.float32, torch.device("cpu"))
    alone_a = ours(BatchInput(a, torch.arange(12)[None], torch.tensor([0]), 12), cache)
    alone_b = ours(BatchInput(b, torch.arange(7)[None], torch.tensor([1]), 7), cache)
    cache = KVCache(cfg, 4, 64, torch.float32, torch.device("cpu"))
    tokens = torch.zeros(2, 12, dtype=torch.long)
    tokens[0], tokens[1, :7] = a[0], b[0]
    pos = torch.full((2, 12), -1)
    pos[0], pos[1, :7] = torch.arange(12), torch.arange(7)
    both = ours(BatchInput(tokens, pos, torch.tensor([3, 2]), 12), cache)
    assert (both[0] - alone_a[0]).abs().max() <= 1e-5
    assert (both[1, :7] - alone_b[0]).abs().max() <= 1e-5


def test_sliced_cache_slots_equal_gathered_ones():
    """Rows on consecutive slots read the cache through a view (slot_start); the result equals the gather path,
    prefill and a decode step after it alike."""
    cfg, _, ours = _pair("LlamaForCausalLM")
    assert consecutive_start([2, 3, 4]) == 2 and consecutive_start([3, 2]) is None and consecutive_start([1]) == 1
    tokens = torch.randint(0, 100, (3, 9))
    pos = torch.arange(9).repeat(3, 1)
    pos[2, 6:] = -1  # a padded row
    step = torch.randint(0, 100, (3, 1))
    step_pos = torch.tensor([[9], [9], [6]])
    out = []
    for start in (None, 1):
        cache = KVCache(cfg, 5, 32, torch.float32, torch.device("cpu"))
        slots = torch.tensor([1, 2, 3])
        first = ours(BatchInput(tokens, pos, slots, 9, slot_start=start), cache)
        out.append((first, ours(BatchInput(step, step_pos, slots, 10, slot_start=start), cache)))
    assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1])


def test_unsupported_architecture_is_a_clear_error():
    from speculab.engine.model import UnsupportedModelError

    with pytest.raises(UnsupportedModelError, match=r"GPT2LMHeadModel.*not supported"):
        ModelConfig.from_hf({"architectures": ["GPT2LMHeadModel"]})
