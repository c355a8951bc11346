"""Corpus, tokenizer and packed token streams for the demo model pair (see scripts/train_demo.py).

The corpus is the running interpreter's standard library: `.py` files under `sysconfig.get_paths()["stdlib"]`,
site-packages excluded (it differs between installations), test suites included (they are ordinary, varied
Python and more than double the data, which matters for a 16M-parameter model trained over several epochs).
Files are split into train and held-out by a hash of their relative path, so the split does not depend on
which other files exist. Besides whole files, every train function with a docstring also becomes a chat
example (user asks for the function by signature and docstring, the assistant writes it), so the chat
template the demo serves is something the model has seen.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import torch

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
SYSTEM, USER, ASSISTANT = "<|system|>", "<|user|>", "<|assistant|>"
SPECIAL_TOKENS = (BOS, EOS, PAD, SYSTEM, USER, ASSISTANT)
ROLE_TOKENS = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT}

# One turn per message: <|role|>\ncontent<|eos|>\n; the generation prompt opens an assistant turn.
# No automatic BOS in the tokenizer: the template writes it, raw completions start without it (training
# windows are random slices of the packed stream, so the model is used to contexts without a BOS).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] + eos_token + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)

MAX_FILE_BYTES = 1_000_000  # a few generated tables are larger; they are not code worth learning
MAX_CHAT_SOURCE_CHARS = 3000


@dataclass(frozen=True)
class SourceFile:
    rel_path: str
    text: str


@dataclass(frozen=True)
class Corpus:
    root: str
    python_version: str
    train: tuple[SourceFile, ...]
    heldout: tuple[SourceFile, ...]

    @property
    def train_bytes(self) -> int:
        return sum(len(f.text.encode()) for f in self.train)

    @property
    def heldout_bytes(self) -> int:
        return sum(len(f.text.encode()) for f in self.heldout)


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def list_sources(root: Path) -> list[Path]:
    """Every `.py` under root except site-packages, in a deterministic (sorted relative path) order."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "dist-packages", "__pycache__"))
        found.extend(Path(dirpath) / f for f in filenames if f.endswith(".py"))
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def is_heldout(rel_path: str, heldout_fraction: float) -> bool:
    """Stable split by file: a hash of the path, independent of the other files present."""
    h = int.from_bytes(hashlib.sha256(rel_path.encode()).digest()[:8], "big")
    return h / 2**64 < heldout_fraction


def read_source(path: Path) -> str | None:
    """The file's text, or None if it is not UTF-8 (a few encoding tests) or oversized."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def load_corpus(
    root: Path | None = None, heldout_fraction: float = 0.02, max_files: int | None = None, stride: int = 1
) -> Corpus:
    """The stdlib corpus; `stride`/`max_files` take every stride-th file up to max_files (tests use a subset)."""
    root = root or stdlib_root()
    paths = list_sources(root)[::stride][:max_files]
    train, heldout = [], []
    for p in paths:
        text = read_source(p)
        if not text or not text.strip():
            continue
        rel = p.relative_to(root).as_posix()
        (heldout if is_heldout(rel, heldout_fraction) else train).append(SourceFile(rel, text))
    version = ".".join(map(str, sys.version_info[:3]))
    return Corpus(root=str(root), python_version=version, train=tuple(train), heldout=tuple(heldout))


def chat_examples(text: str) -> list[str]:
    """Chat-formatted documents, one per function/method with a docstring: the request, then the code."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):  # lib2to3 fixtures and friends hold Python 2 code
        return []
    lines = text.splitlines()
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        doc = ast.get_docstring(node)
        if not doc or node.end_lineno is None:
            continue
        first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        source = "\n".join(lines[first - 1 : node.end_lineno])
        indent = len(source) - len(source.lstrip(" "))
        source = "\n".join(line[indent:] if line[:indent].isspace() else line for line in source.split("\n"))
        if len(source) > MAX_CHAT_SOURCE_CHARS:
            continue
        summary = doc.split("\n\n")[0].strip()
        request = f"Write a Python function `{node.name}`: {summary}"
        out.append(f"{BOS}{USER}\n{request}{EOS}\n{ASSISTANT}\n{source}{EOS}\n")
    return out


def documents(files: Sequence[SourceFile], with_chat: bool, workers: int | None = None) -> list[str]:
    """Training documents: each file wrapped in BOS/EOS, then (optionally) the chat examples from all files."""
    docs = [f"{BOS}{f.text}{EOS}" for f in files]
    if with_chat:
        texts = [f.text for f in files]
        chats = None
        if workers != 1 and len(texts) >= 64:
            try:
                with ProcessPoolExecutor(max_workers=workers) as pool:
                    chats = list(pool.map(chat_examples, texts, chunksize=16))
            except (OSError, BrokenProcessPool):  # containers without /dev/shm or fork: parse serially
                chats = None
        if chats is None:
            chats = [chat_examples(t) for t in texts]
        docs.extend(d for per_file in chats for d in per_file)
    return docs


def train_tokenizer(texts: Iterable[str], vocab_size: int):
    """Byte-level BPE (GPT-2 style pre-tokenization, so runs of indentation merge into single tokens)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),  # ids 0..5, in this order
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def tokenizer_files(tok, model_max_length: int) -> dict[str, str]:
    """The tokenizer files of an HF model directory, as {file name: content}."""
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": model_max_length,
        "chat_template": CHAT_TEMPLATE,
        "additional_special_tokens": [SYSTEM, USER, ASSISTANT],
    }
    special = {
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "additional_special_tokens": [SYSTEM, USER, ASSISTANT],
    }
    return {
        "tokenizer.json": tok.to_str(),
        "tokenizer_config.json": json.dumps(config, indent=2) + "\n",
        "special_tokens_map.json": json.dumps(special, indent=2) + "\n",
    }


def encode_stream(tok, docs: Sequence[str]) -> torch.Tensor:
    """All documents tokenized and concatenated: [N] int64. Special tokens inside the text are recognised."""
    ids: list[int] = []
    batch = 512
    for i in range(0, len(docs), batch):
        for enc in tok.encode_batch(list(docs[i : i + batch]), add_special_tokens=False):
            ids.extend(enc.ids)
    return torch.tensor(ids, dtype=torch.int64)


def random_windows(stream: torch.Tensor, batch: int, length: int, gen: torch.Generator) -> torch.Tensor:
    """[batch, length + 1] windows at random offsets (inputs are [:, :-1], labels [:, 1:])."""
    starts = torch.randint(0, stream.numel() - length - 1, (batch,), generator=gen, device=gen.device)
    idx = starts[:, None] + torch.arange(length + 1, device=stream.device)
    return stream[idx]


def fixed_windows(stream: torch.Tensor, length: int, max_windows: int) -> torch.Tensor:
    """Consecutive non-overlapping [n, length + 1] windows from the start of the stream (deterministic eval)."""
    n = min(max_windows, (stream.numel() - 1) // length)
    if n < 1:
        raise ValueError(f"held-out stream of {stream.numel()} tokens is shorter than one {length}-token window")
    idx = torch.arange(n, device=stream.device)[:, None] * length + torch.arange(length + 1, device=stream.device)
    return stream[idx]
