"""A tiny, real Hugging Face-format checkpoint written in-process: config, safetensors weights, a trained
byte-level BPE tokenizer with special tokens, and a ChatML-style chat template.

Everything is deterministic for a given seed, and it takes well under a second, so tests can build one per
case. transformers can load the result (`AutoModelForCausalLM.from_pretrained`), and so can our loader.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from speculab.engine.model import CausalLM, ModelConfig

CORPUS_PATH = Path(__file__).with_name("corpus.txt")

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (BOS, EOS, PAD, IM_START, IM_END)  # ids 0..4 in this order

# ChatML-style: the same shape real Qwen/Llama-3 templates have (loop, role header, generation prompt, bos).
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('unknown role: ' + message['role']) }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def train_tokenizer(vocab_size: int = 400) -> Tokenizer:
    """A byte-level BPE trained on the in-repo corpus, with <|bos|> prepended by the post-processor."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte is a token: any text encodes
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS_PATH.read_text(encoding="utf-8").splitlines(), trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    return tok


def train_sentencepiece_style_tokenizer(vocab_size: int = 300) -> Tokenizer:
    """A Llama-2/Mistral-shaped tokenizer: '▁' for spaces, a prepended '▁', <0xNN> byte fallback, <s> BOS.

    Characters outside the trained alphabet (most CJK and emoji) become byte tokens, so multi-byte
    characters split across tokens the way they do in real sentencepiece models.
    """
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=80, show_progress=False
    )
    base = Tokenizer(models.BPE(unk_token="<unk>"))
    base.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    base.train_from_iterator(CORPUS_PATH.read_text(encoding="utf-8").splitlines(), trainer=trainer)
    trained = base.get_vocab()
    specials = ["<unk>", "<s>", "</s>"]
    ordered = specials + [f"<0x{b:02X}>" for b in range(256)]
    ordered += sorted((t for t in trained if t not in specials), key=trained.__getitem__)
    vocab = {t: i for i, t in enumerate(ordered)}
    with tempfile.TemporaryDirectory() as tmp:
        _, merges_file = base.model.save(tmp)
        lines = Path(merges_file).read_text(encoding="utf-8").splitlines()
    merges = [tuple(line.split(" ")) for line in lines if line and not line.startswith("#version")]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.add_special_tokens(specials)
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]
    )
    return tok


def make_tiny_checkpoint(
    path: str | Path,
    *,
    arch: str = "LlamaForCausalLM",
    seed: int = 0,
    vocab_size: int | None = None,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate: int | None = None,
    tie: bool = False,
    shards: int = 1,
    chat_template: bool = True,
    max_position_embeddings: int = 512,
) -> Path:
    """Write a random-weight checkpoint + real tokenizer into `path` (created) and return it.

    vocab_size defaults to the trained tokenizer's size; a larger value pads the embedding like real models do.
    """
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer()
    n_tok = tok.get_vocab_size()
    vocab = vocab_size if vocab_size is not None else n_tok
    if vocab < n_tok:
        raise ValueError(f"vocab_size {vocab} is smaller than the tokenizer's {n_tok} tokens")
    bos_id, eos_id, im_end_id = tok.token_to_id(BOS), tok.token_to_id(EOS), tok.token_to_id(IM_END)

    cfg = ModelConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=intermediate or 2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=hidden // heads,
        max_position_embeddings=max_position_embeddings,
        attention_bias=arch == "Qwen2ForCausalLM",
        tie_word_embeddings=tie,
        architecture=arch,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
    )
    torch.manual_seed(seed)
    model = CausalLM(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):  # nn.Linear's bias init is tiny; make Qwen2's biases matter
                p.normal_(std=0.5)
            elif name.endswith("embed_tokens.weight"):
                p.normal_(std=1.0)
    _write_weights(out, model, tie=tie, shards=shards)

    (out / "config.json").write_text(json.dumps({**cfg.to_hf(), "torch_dtype": "float32"}, indent=2))
    gen = {"bos_token_id": bos_id, "eos_token_id": [eos_id, im_end_id]}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2))
    tok.save(str(out / "tokenizer.json"))
    tok_cfg: dict = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "model_max_length": max_position_embeddings,
        "clean_up_tokenization_spaces": False,
        "added_tokens_decoder": {
            str(tok.token_to_id(t)): {"content": t, "special": True, "lstrip": False, "rstrip": False}
            for t in SPECIAL_TOKENS
        },
    }
    if chat_template:
        tok_cfg["chat_template"] = CHAT_TEMPLATE
    (out / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=2))
    return out


def _write_weights(out: Path, model: CausalLM, *, tie: bool, shards: int) -> None:
    """model.safetensors, or `shards` files plus model.safetensors.index.json, as save_pretrained writes them."""
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if tie:
        del state["lm_head.weight"]  # tied checkpoints store the embedding once
    if shards <= 1:
        save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
        return
    names = list(state)
    weight_map: dict[str, str] = {}
    for i in range(shards):
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {k: state[k] for k in names[i::shards]}
        save_file(part, str(out / fname), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, fname))
    total = sum(t.numel() * t.element_size() for t in state.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
