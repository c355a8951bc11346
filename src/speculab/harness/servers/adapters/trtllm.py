"""TensorRT-LLM's `trtllm-serve MODEL --host H --port P --extra_llm_api_options FILE.yaml`: speculation is the
`speculative_config` mapping of that YAML file (its LLM API's `DecodingBaseConfig`s), never a flag of its own:
`decoding_type` (NGram, DraftTarget, Eagle, MTP, or another name of the release's), `max_draft_len` (k),
`speculative_model_dir` (the draft model or EAGLE head), `max_matching_ngram_size` (NGram's n),
`num_nextn_predict_layers` (MTP's k). `options` are more keys of that mapping, verbatim.

The candidate's file is written by speculab (`candidate_files`: named by its content, so one speculation is one
file). trtllm-serve reads one options file: a baseline that passes its own has it merged, the candidate's file being
the baseline's keys plus `speculative_config` (a baseline file that already has one is refused, naming it).

Acceptance: per response, per choice, when the server reports it (off by default): `speculative_decoding`
{num_spec_steps, total_draft_tokens, total_accepted_draft_tokens, acceptance_rate, acceptance_histogram,
num_spec_tokens}, beside `avg_decoded_tokens_per_iter` (its acceptance length, bonus token included). Its Prometheus
names start `trtllm_` (`trtllm_prompt_tokens_total`, `trtllm_prompt_cached_tokens_total`, ...). docs/engines.md.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from speculab.config import KNOWN_METHODS, SpeculationConfig
from speculab.errors import UserError, user_text
from speculab.harness.records import ResponseReading
from speculab.harness.servers.adapters.base import (
    AcceptanceMetrics,
    EngineAdapter,
    PrefixCacheMetrics,
    object_at,
    unsupported,
)
from speculab.harness.servers.adapters.flags import parse_command
from speculab.harness.servers.adapters.vllm import counts_with_histogram
from speculab.protocol.chunks import EngineFields, one_line

KIND = "trtllm"
OPTIONS_FLAG = "--extra_llm_api_options"
# speculab's experiment names -> TensorRT-LLM's decoding_type
_DECODING_TYPES = {"ngram": "NGram", "draft_model": "DraftTarget", "eagle": "Eagle", "eagle3": "Eagle", "mtp": "MTP"}
_NEEDS_MODEL = frozenset({"DraftTarget", "Eagle", "Eagle3"})
# where speculab keeps the option files it writes for candidates (one per speculation, named by its content)
FILES_DIR = Path(tempfile.gettempdir()) / "speculab-trtllm"


def speculative_config(speculation: SpeculationConfig) -> dict[str, Any]:
    """The `speculative_config` mapping for this speculation, in TensorRT-LLM's keys; an option that repeats a key
    the entry's own fields set is refused, so one setting has one place."""
    decoding = _DECODING_TYPES.get(speculation.method, speculation.method)
    if speculation.method in KNOWN_METHODS and speculation.method not in _DECODING_TYPES:
        raise unsupported(KIND, speculation, "ngram, draft_model, eagle, eagle3, mtp, or a decoding_type name")
    if speculation.model is None and decoding in _NEEDS_MODEL:
        raise UserError(f"speculation.method {speculation.method} needs `model` (the draft model's or head's path)")
    # MTP's k is how many next-n layers it runs; every other type drafts up to max_draft_len
    k_key = "num_nextn_predict_layers" if decoding == "MTP" else "max_draft_len"
    config: dict[str, Any] = {"decoding_type": decoding, k_key: speculation.num_speculative_tokens}
    if speculation.model is not None:
        config["speculative_model_dir"] = str(speculation.model)
    if speculation.prompt_lookup_max is not None:  # NGram: the longest n-gram it matches
        config["max_matching_ngram_size"] = speculation.prompt_lookup_max
    for key, value in speculation.options.items():
        if key in config:
            raise UserError(f"speculation.options.{key}: speculab derives {key} from the entry; remove it from options")
        config[key] = value
    return config


def options_yaml(speculation: SpeculationConfig, baseline_cmd: Sequence[str] = ()) -> str:
    """The candidate's extra-options file: the baseline's own options file's keys, if it passes one, and
    `speculative_config`."""
    own = _baseline_options(baseline_cmd)
    return yaml.safe_dump({**own, "speculative_config": speculative_config(speculation)}, sort_keys=True)


def _baseline_options(baseline_cmd: Sequence[str]) -> dict[str, Any]:
    """The options file a plain baseline passes ({} where none): a mapping without `speculative_config`."""
    given = parse_command(baseline_cmd).flags.get(OPTIONS_FLAG)
    if not given:
        return {}
    if len(given) > 1:
        raise UserError(f"baseline.launch.command passes {OPTIONS_FLAG} {len(given)} times; trtllm-serve reads one")
    path = given[0]
    try:
        data = yaml.safe_load(user_text(Path(path).read_bytes(), path))
    except OSError as e:
        raise UserError(f"cannot read {path} ({OPTIONS_FLAG} of baseline.launch.command): {e.strerror}") from None
    except yaml.YAMLError as e:
        raise UserError(f"{path} ({OPTIONS_FLAG} of baseline.launch.command) is not YAML: {one_line(str(e))}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{path} ({OPTIONS_FLAG} of baseline.launch.command) is not a mapping of LLM API options")
    if "speculative_config" in data:
        raise UserError(
            f"{path} already has speculative_config; remove it from the baseline's options file (the baseline must be "
            "plain decoding, speculab adds speculation for the candidate)"
        )
    return data


def _without_options(baseline_cmd: Sequence[str]) -> list[str]:
    """The baseline less its options file (`--extra_llm_api_options F` or `=F`): the candidate passes the merged one."""
    out: list[str] = []
    skip = False
    for word in baseline_cmd:
        if skip or word.startswith(OPTIONS_FLAG + "="):
            skip = False
            continue
        skip = word == OPTIONS_FLAG
        if not skip:
            out.append(word)
    return out


def options_path(text: str) -> Path:
    return FILES_DIR / f"speculation-{hashlib.sha256(text.encode()).hexdigest()[:16]}.yaml"


def _candidate(adapter: EngineAdapter, baseline_cmd: Sequence[str], speculation: SpeculationConfig) -> list[str]:
    path = str(options_path(options_yaml(speculation, baseline_cmd)))
    return [*_without_options(baseline_cmd), OPTIONS_FLAG, path, *speculation.engine_args]


def _files(baseline_cmd: Sequence[str], speculation: SpeculationConfig) -> Mapping[str, str]:
    text = options_yaml(speculation, baseline_cmd)
    return {str(options_path(text)): text}


SOURCE = "trtllm choices[].speculative_decoding"
# choice 0's fields of its own that a record keeps: the counts, and its acceptance length as it said it
_CHOICE_KEPT = ("speculative_decoding", "avg_decoded_tokens_per_iter")


def _read_response(said: EngineFields) -> ResponseReading | None:
    """Choice 0's `speculative_decoding`: vLLM's counts under its own names, the same histogram."""
    kept = {k: said.choice[k] for k in _CHOICE_KEPT if k in said.choice}
    if not kept:
        return None
    sd = object_at(said.choice, "speculative_decoding")
    spec = None
    if sd is not None:
        counts = (sd.get("num_spec_steps"), sd.get("total_draft_tokens"), sd.get("total_accepted_draft_tokens"))
        spec = counts_with_histogram(counts, sd.get("acceptance_histogram"), SOURCE)
    return ResponseReading(spec, {"choice": kept})


RELAXED = "use_relaxed_acceptance_for_thinking"


def _lossy_launch(command: Sequence[str]) -> tuple[str, ...]:
    """MTP's relaxed acceptance for thinking (`speculative_config.use_relaxed_acceptance_for_thinking: true` in the
    options file the command names): inside a thinking span a draft is accepted when it is among the target's
    `relaxed_topk` tokens within `relaxed_delta` of the best, not only the target's own token. A file that cannot be
    read says nothing (the engine would not start on it)."""
    paths = [p for p in parse_command(command).flags.get(OPTIONS_FLAG, ()) if p]
    for path in paths:
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        spec = data.get("speculative_config") if isinstance(data, dict) else None
        if isinstance(spec, dict) and spec.get(RELAXED) is True:
            return (f"speculative_config.{RELAXED}: true",)
    return ()


def _launch(model: str, port: int, context: int | None) -> list[str] | None:
    ctx = ["--max_seq_len", str(context)] if context is not None else []
    return ["trtllm-serve", model, "--host", "127.0.0.1", "--port", str(port), *ctx]


ADAPTER = EngineAdapter(
    kind=KIND,
    metric_prefix="trtllm_",
    acceptance=AcceptanceMetrics(
        kind="per_response",
        response_fields={
            "drafts": "choices.speculative_decoding.num_spec_steps",
            "draft_tokens": "choices.speculative_decoding.total_draft_tokens",
            "accepted_tokens": "choices.speculative_decoding.total_accepted_draft_tokens",
        },
    ),
    # prompt tokens served from the KV cache / all prompt tokens (its metrics collector's names; not seen here)
    prefix_cache=PrefixCacheMetrics("trtllm_prompt_cached_tokens_total", "trtllm_prompt_tokens_total"),
    # its speculation lives in the options file: the file is the one speculation flag (a plain baseline has none)
    speculation_flags=frozenset({OPTIONS_FLAG}),
    merged_flags=frozenset({OPTIONS_FLAG}),  # a baseline's own options file: merged into the candidate's
    context_flags=("--max_seq_len",),
    executable="trtllm-serve",
    starter_grid=(
        "  - {method: ngram, num_speculative_tokens: 2}    # speculative_config: {decoding_type: NGram}\n"
        "  - {method: ngram, num_speculative_tokens: 4}\n"
        "  # - {method: eagle3, num_speculative_tokens: 3, model: /path/to/eagle3-head}   # or draft_model, mtp\n"
    ),
    experiment_names={v: k for k, v in _DECODING_TYPES.items() if k != "eagle3"},
    candidate=_candidate,
    candidate_files=_files,
    launch=_launch,
    read_response=_read_response,
    lossy_launch=_lossy_launch,
)
