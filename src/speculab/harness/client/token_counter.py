"""A local tokenizer for counting tokens per chunk when the server reports neither continuous usage nor logprobs.

Counting each chunk's text on its own is an approximation (a token split across two chunks may count twice);
the record says `token_count_source = "tokenizer"` so reports can tell. Uses the `tokenizers` library only
(no torch); reads a tokenizer.json file or a directory holding one, never downloads.
"""

from __future__ import annotations

from pathlib import Path

from speculab.errors import UserError
from speculab.harness.client.endpoint import TokenCounter


def load_token_counter(spec: str) -> TokenCounter:
    """`spec`: a tokenizer.json path or a model directory containing tokenizer.json."""
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise UserError(f"--tokenizer {spec}: no tokenizer.json there; give a tokenizer.json file or a model directory")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise UserError("--tokenizer needs the 'tokenizers' package: pip install tokenizers") from None
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # the library raises a bare Exception for unreadable files
        raise UserError(f"--tokenizer {path}: cannot load ({e})") from None

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    return count
