"""Request traces (`trace:PATH[?unit=ms|s][&block=N]`): timestamped requests, replayed open-loop at their times.

One JSON object per line, the Mooncake / Azure-trace style:

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48, ...]}
    {"timestamp": 1.25, "prompt": "Summarise ...", "max_tokens": 200}

- `timestamp` (required): when the request arrived, in milliseconds (`unit=ms`, the default: Mooncake's unit) or
  seconds (`unit=s`). Only differences matter: the first request is sent at the start of the run.
- The request: `prompt` or `messages` as in a JSONL workload, or `input_length` (tokens) to have a prompt of that
  many approximate tokens synthesised (seeded words, as `synthetic:`).
- `output_length` sets `max_tokens` (and `expected_output_tokens`) unless `max_tokens` is given.
- `hash_ids` (with `input_length`): the prompt's blocks of `block` tokens (512 by default, Mooncake's), one id per
  block. Equal ids give equal text, so requests that share leading ids share that prefix, as in the original
  traffic, and a prefix cache sees the same reuse. The last block is cut to make `input_length` tokens.
- `id`, `category` as in JSONL.

Lines are sent in timestamp order (a file out of order is sorted, stably, and the source line says so). The load
runner sends request i at (timestamp_i - timestamp_0) / speed seconds after the start (`--trace-speed`, default
1); see load.runner. `--num-prompts N` takes the first N requests; a trace is never cycled.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from typing import Any

import numpy as np

from speculab.errors import UserError
from speculab.harness.workload.files.jsonl import parse_lines, read_jsonl_file, validate_messages
from speculab.harness.workload.items import MAX_CONTEXT_TOKENS, SourceItem
from speculab.harness.workload.synthetic import synthetic_text

_UNITS = {"ms": 1e-3, "s": 1.0}
DEFAULT_BLOCK_TOKENS = 512  # Mooncake's hash block
_TRACE_KEYS = frozenset(
    ("timestamp", "prompt", "messages", "input_length", "output_length", "max_tokens", "hash_ids", "id", "category")
)
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def parse_trace_arg(arg: str) -> tuple[str, float, int]:
    """PATH[?unit=ms|s][&block=N] -> (path, seconds per timestamp unit, block tokens)."""
    path, sep, query = arg.rpartition("?")
    if not sep or not all(p.partition("=")[0] in ("unit", "block") for p in query.split("&")):
        return arg, _UNITS["ms"], DEFAULT_BLOCK_TOKENS  # a "?" in a file name is part of the path
    scale, block = _UNITS["ms"], DEFAULT_BLOCK_TOKENS
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if key == "unit":
            if value not in _UNITS:
                raise UserError(f"trace:{arg}: unit must be ms or s, got {value!r}")
            scale = _UNITS[value]
        else:
            if not value.isdigit() or int(value) < 1:
                raise UserError(f"trace:{arg}: block must be a positive number of tokens, got {value!r}")
            block = int(value)
    return path, scale, block


def load_trace(arg: str, seed: int) -> tuple[str, list[SourceItem]]:
    path_str, scale, block = parse_trace_arg(arg)
    path, raw, text = read_jsonl_file(path_str)
    rows = parse_lines(text, str(path), _row)
    if not rows:
        raise UserError(f"{path}: no requests (a trace has one {{'timestamp', 'input_length' or 'prompt'}} per line)")
    order = sorted(range(len(rows)), key=lambda i: rows[i]["timestamp"])  # stable: ties keep file order
    moved = sum(1 for a, b in itertools.pairwise(rows) if b["timestamp"] < a["timestamp"])  # earlier than the last
    t0 = rows[order[0]]["timestamp"]
    blocks: dict[int, str] = {}
    items = []
    for i in order:
        r = rows[i]
        prompt, messages = r.get("prompt"), r.get("messages")
        if r.get("input_length") is not None:
            prompt = _synthesised(r["input_length"], r.get("hash_ids"), block, seed, i, blocks)
        out = r.get("max_tokens") or r.get("output_length")
        items.append(
            SourceItem(
                prompt_id=str(r.get("id", f"line{i + 1}")),
                prompt=prompt,
                messages=messages,
                max_tokens=out,
                category=r.get("category"),
                expected_output_tokens=r.get("output_length"),
                arrival_s=(r["timestamp"] - t0) * scale,
                synthesised=r.get("input_length") is not None,
            )
        )
    span = items[-1].arrival_s or 0.0
    digest = hashlib.sha256(raw).hexdigest()
    unit = "ms" if scale == _UNITS["ms"] else "s"
    note = f"; {moved} lines earlier than the line before them, sorted by timestamp" if moved else ""
    rate = f", {(len(items) - 1) / span:.3g} req/s" if span > 0 else ""
    source = (
        f"{path} (trace, sha256 {digest}; {len(items)} requests over {span:.3f} s{rate}; timestamps in {unit}, "
        f"blocks of {block} tokens{note})"
    )
    return source, items


def _row(obj: Any, default_id: str) -> dict[str, Any]:
    """Validate one trace line; ValueError names the key and the fix."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - _TRACE_KEYS)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}; a trace line has {', '.join(sorted(_TRACE_KEYS))}")
    ts = obj.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts) or ts < 0:
        raise ValueError(f"'timestamp' must be a non-negative number (ms, or s with ?unit=s), got {ts!r}")
    given = [k for k in ("prompt", "messages", "input_length") if k in obj]
    if len(given) != 1:
        raise ValueError("each line needs exactly one of 'prompt', 'messages' or 'input_length'")
    row: dict[str, Any] = {"timestamp": float(ts)}
    if "prompt" in obj:
        if not isinstance(obj["prompt"], str) or not obj["prompt"].strip():
            raise ValueError("'prompt' must be a non-empty string")
        row["prompt"] = obj["prompt"]
    elif "messages" in obj:
        row["messages"] = validate_messages(obj["messages"])
    else:
        row["input_length"] = _positive(obj, "input_length")
    for key in ("output_length", "max_tokens"):
        if obj.get(key) is not None:
            row[key] = _positive(obj, key)
    if "hash_ids" in obj:
        ids = obj["hash_ids"]
        if "input_length" not in obj:
            raise ValueError("'hash_ids' name the blocks of a synthesised prompt: give 'input_length' with them")
        if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
            raise ValueError("'hash_ids' must be a list of integers (one per block of the prompt)")
        row["hash_ids"] = tuple(ids)
    if "category" in obj:
        if not isinstance(obj["category"], str) or not obj["category"]:
            raise ValueError("'category' must be a non-empty string")
        row["category"] = obj["category"]
    item_id = obj.get("id", default_id)
    if not isinstance(item_id, (str, int)) or isinstance(item_id, bool):
        raise ValueError("'id' must be a string or an integer")
    row["id"] = item_id
    return row


def _positive(obj: dict[str, Any], key: str) -> int:
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_CONTEXT_TOKENS:
        raise ValueError(f"'{key}' must be a positive integer up to {MAX_CONTEXT_TOKENS} (2^24), got {v!r}")
    return v


def _synthesised(
    n_tokens: int, hash_ids: tuple[int, ...] | None, block: int, seed: int, line: int, cache: dict[int, str]
) -> str:
    """A prompt of `n_tokens` approximate tokens: the blocks of `hash_ids` (equal id, equal text), the last cut to
    fit; past the listed blocks, or without any, text seeded by the line."""
    parts: list[str] = []
    left = n_tokens
    for h in hash_ids or ():
        if left <= 0:
            break
        if h not in cache:
            cache[h] = synthetic_text(np.random.default_rng(np.random.SeedSequence([seed, 0x7AC3, h])), block)
        take = min(block, left)
        parts.append(cache[h] if take == block else _first_tokens(cache[h], take))
        left -= take
    if left > 0:
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7AC4, line]))
        parts.append(synthetic_text(rng, left))
    return " ".join(parts)


def _first_tokens(text: str, n: int) -> str:
    """The prefix of `text` holding its first n approximate tokens."""
    for k, m in enumerate(_TOKEN_RE.finditer(text), start=1):
        if k == n:
            return text[: m.end()]
    return text
