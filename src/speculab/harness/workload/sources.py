"""One entry point for every workload source: `load_workload(spec, seed=..., num_prompts=..., api=...)`.

    builtin:NAME                      a set shipped with speculab (`list_builtin()`; mixes grounded/open/mixed)
    PATH.jsonl | jsonl:PATH           one JSON object per line: prompt or messages, max_tokens, category, checks, id
    sharegpt:PATH[?turns=all]         ShareGPT JSON: the first human turn of each conversation (or every turn)
    specbench:PATH | mtbench:PATH     question files ({question_id, category, turns}): every turn, by category
    speedbench:PATH                   SPEED-Bench's questions: the same format, JSONL or (with pyarrow) parquet
    synthetic:input=N,output=N[,...]  seeded random-word prompts of about N tokens (see `parse_synthetic`)
    trace:PATH[?unit=ms|s][&block=N]  timestamped requests (Mooncake/Azure style), replayed at their arrival times

Every malformed input raises `UserError` naming the file, line and reason before any request is sent.
docs/workloads.md documents every format; `workload_overview` summarises a loaded workload.
"""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

from speculab.errors import UserError
from speculab.harness.records import RequestSpec
from speculab.harness.stats import describe
from speculab.harness.workload.builtin import load_builtin
from speculab.harness.workload.conversation import conversations, split_turns_option
from speculab.harness.workload.files.jsonl import load_jsonl
from speculab.harness.workload.files.questions import load_questions
from speculab.harness.workload.files.sharegpt import load_sharegpt
from speculab.harness.workload.files.trace import load_trace, parse_trace_arg
from speculab.harness.workload.items import APIS, Workload, approx_tokens, finalize, item_text
from speculab.harness.workload.synthetic import load_synthetic


def load_workload(spec: str, *, seed: int, num_prompts: int | None = None, api: str = "completions") -> Workload:
    """Parse `spec` and return the run's requests, seeded from (seed, index). Raises UserError on bad input."""
    if api not in APIS:
        raise UserError(f"api must be one of {', '.join(APIS)}, got {api!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise UserError(f"seed must be a non-negative integer, got {seed!r}")
    if num_prompts is not None and (
        not isinstance(num_prompts, int) or isinstance(num_prompts, bool) or num_prompts < 1
    ):
        raise UserError(f"num_prompts must be a positive integer, got {num_prompts!r}")
    kind, _, arg = spec.partition(":")
    if kind == "builtin":
        name = arg
        source, items = load_builtin(arg)
    elif kind == "jsonl":
        name, (source, items) = Path(arg).stem, load_jsonl(arg)
    elif kind == "sharegpt":
        name, (source, items) = Path(split_turns_option(arg, kind)[0]).stem, load_sharegpt(arg)
    elif kind in ("specbench", "mtbench", "speedbench"):
        name, (source, items) = Path(split_turns_option(arg, kind)[0]).stem, load_questions(arg, kind)
    elif kind == "trace":
        name, (source, items) = Path(parse_trace_arg(arg)[0]).stem, load_trace(arg, seed)
        if num_prompts is not None and num_prompts > len(items):
            raise UserError(
                f"the trace has {len(items)} requests; --num-prompts can take fewer, not {num_prompts} (a trace is "
                "replayed once, never cycled)"
            )
    elif kind == "synthetic":
        name, (source, items) = "synthetic", load_synthetic(arg, seed, num_prompts)
    elif spec.endswith(".jsonl"):
        name, (source, items) = Path(spec).stem, load_jsonl(spec)
    else:
        raise UserError(
            f"unknown workload {spec!r}; use builtin:NAME (`speculab workload` lists them), a .jsonl file, jsonl:PATH, "
            "sharegpt:PATH, specbench:PATH, mtbench:PATH, speedbench:PATH, trace:PATH or synthetic:input=N,output=N"
        )
    specs = finalize(items, seed, num_prompts, api)
    synthesised = {i.prompt_id for i in items if i.synthesised}
    return Workload(name, source, specs, sum(1 for s in specs if s.prompt_id in synthesised))


def _trace_overview(arrivals: list[float]) -> dict[str, Any] | None:
    if not arrivals:
        return None
    span = max(arrivals) - min(arrivals)
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    return {
        "requests": len(arrivals),
        "span_s": span,
        "rate_rps": (len(arrivals) - 1) / span if span > 0 else None,
        "gap_s": describe(gaps).to_dict(),
    }


def workload_overview(workload: Workload, show: int = 0) -> dict[str, Any]:
    """Counts and length distributions of a workload (lengths in approximate tokens, see `approx_tokens`), and its
    first `show` requests as `preview` (index, prompt id, turn, category, seed, the prompt's text)."""
    items = workload.items
    with_max = [i.max_tokens for i in items if i.max_tokens is not None]
    check_types = Counter(c.get("type") for i in items for c in i.checks)
    convs = list(conversations(items))
    return {
        "name": workload.name,
        "source": workload.source,
        "items": len(items),
        "distinct_prompts": len({(i.prompt_id, i.turn) for i in items}),
        # a single-turn item is a conversation of one turn; a multi-turn one counts once, by its number of turns
        "conversations": len(convs),
        "conversation_turns": {str(n): c for n, c in sorted(Counter(len(c) for c in convs).items())},
        "categories": dict(Counter(i.category or "(none)" for i in items)),
        "conversation_categories": dict(Counter(c[0].category or "(none)" for c in convs)),
        "prompt_tokens_approx": describe(approx_tokens(item_text(i)) for i in items).to_dict(),
        "items_with_max_tokens": len(with_max),
        "max_tokens": describe(with_max).to_dict(),
        "items_with_checks": sum(1 for i in items if i.checks),
        # structured outputs: requests sending a response_format, by its type (json_schema, json_object)
        "response_formats": dict(Counter(i.response_format.get("type") for i in items if i.response_format)),
        # a trace's arrivals: how long it lasts and its mean rate (None for workloads without arrival times)
        "trace": _trace_overview([i.arrival_s for i in items if i.arrival_s is not None]),
        "check_types": dict(check_types),
        "preview": [_preview(i) for i in items[:show]],
    }


def _preview(item: RequestSpec) -> dict[str, Any]:
    return {
        "index": item.index,
        "prompt_id": item.prompt_id,
        "turn": item.turn,
        "category": item.category,
        "seed": item.seed,
        "text": item_text(item),
    }
