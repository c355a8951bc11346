"""The sentences of the warnings every command gives besides the A/B verdict's: a bench run's (its numbers, the
client's health, the request options a server refused, fitting), the client workers', diagnose's, compare's and the
notes of the readers of other tools' files, one per kind, made from the record's fields when rendering.
`phrases.warning_text` is the one entry point; the verdict's warnings are worded there, its other records here
(`VERDICT_WORDS`: a metric's note, the correctness verdict, a failed check). Diagnose's findings are worded here too
(`finding_words`), from their kind and numbers the same way. The reasons and plan warnings said with them (why
acceptance is unknown, a look's open comparisons, the plan's warnings; the methods table's, from
console/method_words) are worded here too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from speculab.harness.results.warnings import FindingKind, ReportWarning, WarningKind
from speculab.harness.verdict.model import TPOT
from speculab.report.console.method_words import METHOD_WORDS

Fields = Mapping[str, Any]

LOST_ERROR_CHARS = 100  # of a lost worker's error in a sentence: Ray's run to hundreds (the manifest keeps the line)
FITTED_IDS = 5  # prompt ids named when fitting left prompts out; the rest is "..."


def _ms(s: float) -> str:
    return f"{s * 1e3:.1f} ms"


def _client_fell_behind(f: Fields) -> str:
    signs = []
    if f.get("loop_lag_p99_s") is not None:
        signs.append(f"event-loop lag p99 {_ms(f['loop_lag_p99_s'])}")
    if f.get("cpu_share") is not None:
        signs.append(f"client CPU {f['cpu_share']:.0%} of a core")
    if f.get("dispatch_lag_p99_s") is not None:
        signs.append(f"p99 dispatch lag {_ms(f['dispatch_lag_p99_s'])}")
    return (
        f"the client fell behind: {', '.join(signs)}{_in_flight(f)}; its timings carry that delay. Run the client on "
        "a less loaded or bigger machine, or lower the load per process (bench/client_overhead.py measures what one "
        "process sustains)"
    )


def _in_flight(f: Fields) -> str:
    return f" at {f['in_flight']:,.0f} streams in flight" if f.get("in_flight") is not None else ""


def _client_clock_held(f: Fields) -> str:
    return (
        f"the client's clock was held back: event-loop lag p99 {_ms(f['loop_lag_p99_s'])}{_in_flight(f)} (an idle "
        f"loop here: about {f['idle_lag_p99_s'] * 1e3:.0f} ms) while the client used {f['cpu_share']:.0%} of a core: "
        "other work on this machine (a server on the same cores?) delayed its timestamps; run the client elsewhere "
        "to time it precisely"
    )


def _worker_how(f: Fields) -> str:
    """'client worker 0 on host b (10.0.0.2) failed (...)'."""
    where = f" on host {f['host']} ({f['node_ip']})" if f.get("node_ip") is not None else ""
    err = str(f.get("error") or "")
    if err:
        cut = f"{err[:LOST_ERROR_CHARS]}{'...' if len(err) > LOST_ERROR_CHARS else ''}"
        return f"client worker {f['worker']}{where} failed ({cut})"
    return f"client worker {f['worker']}{where} exited (code {f.get('exitcode')})"


def _worker_late(f: Fields) -> str:
    unc = f.get("uncertainty_s") or 0.0
    bound = f" +- {_ms(unc)} (its clock's offset from this machine's, from round trips)" if unc > 0 else ""
    return (
        f"client worker {f['worker']} started {_ms(f['start_lag_s'])}{bound} after the common start time: its "
        "open-loop sends are that much late"
    )


def _workers_ran(f: Fields) -> str:
    worst = f", start lag up to {f['max_start_lag_s'] * 1e3:.2f} ms" if f.get("max_start_lag_s") is not None else ""
    # "(load.workers)": the words saved in notes since before load.workers was split into worker_plan, worker, pools
    # and coordinator
    where = "(load.workers)"
    if (nodes := f.get("ray_nodes")) is not None:
        unc = f.get("clock_uncertainty_s") or 0.0
        where = f"as Ray actors on {nodes} node{'s' if nodes != 1 else ''} (load.ray_pool)" + (
            f", clock offsets known to +-{unc * 1e3:.2f} ms" if unc > 0 else ""
        )
    return f"{f['workers']} client worker processes {where}{worst}"


# what each refusable request option is called in the sentence
_OPTION_NAMES = {
    "continuous_usage_stats": "stream_options.continuous_usage_stats",
    "stream_options": "stream_options",
    "logprobs": "the logprobs request",
}


def _fitted(f: Fields) -> str:
    parts = []
    if left := f.get("left_out"):
        ids = ", ".join(left[:FITTED_IDS]) + (", ..." if len(left) > FITTED_IDS else "")
        parts.append(f"{len(left)} of {f['pool']} prompts were left out ({ids})")
    if f.get("capped"):
        parts.append(f"{f['capped']} requests had max_tokens lowered to fit")
    return (
        f"{'; '.join(parts)}: too long for the {f['context']}-token context with the output they ask for "
        f"(max_tokens, default {f['max_tokens']}; --fit {f['policy']}, the same in every arm)"
    )


def _requests_failed(f: Fields) -> str:
    cats = ", ".join(f"{k} {v}" for k, v in f["by_category"].items())
    return f"{f['failed']} of {f['sent']} requests failed ({cats}); latency numbers cover successful requests only"


def _rate(x: float) -> str:
    """A rate as the bench warnings have always written it (3 significant digits); NaN when the file lacks it."""
    return f"{x:.3g}" if x is not None and math.isfinite(x) else "nan"


def _block_set_aside(f: Fields) -> str:
    records = f.get("records")
    why = "finished, but not its level's other arm" if records is None else f"interrupted after {records} records"
    return (
        f"{f['arm']} at {f['load']}, repeat {f['repeat']}: {why}; run again from the start with the same seeds; what "
        f"it recorded is kept in {f['kept_in']}"
    )


def _cache_reset_refused(f: Fields) -> str:
    need = ", ".join(f"{k}={v}" for k, v in (f.get("env") or {}).items())
    start = f"start it with {need}" if need else "check that the server allows it"
    return (
        f"the server at {f['url']} refused to reset its cache before a block ({f['detail']}); its blocks ran on a "
        f"cache warmed by the blocks before; {start}, or set `cache: {{reset: never}}` to not ask"
    )


_NOT_INTERLEAVED = "they were not interleaved, so drift between them (thermal, other tenants) is not cancelled"


def _compare_file_runs(f: Fields) -> str:
    how = f"paired per prompt by position, their {f['checked']} equal" if f["paired"] else "compared unpaired"
    return f"compare: two separate runs, A ({f['tool_a']}) then B ({f['tool_b']}); {_NOT_INTERLEAVED}; {how}"


def _why_unpaired(f: Fields) -> str:
    """Why two runs are compared unpaired: the first reason they cannot be paired, or --unpaired (a record saved before
    #48 item 3 made it a field kept the sentence, `why`)."""
    if "why" in f:
        return str(f["why"])
    return f"they cannot be paired per prompt ({f['problem']})" if f.get("problem") else "--unpaired asked for it"


def _compare_unpaired(f: Fields) -> str:
    hows = "; ".join(f.get("hows") or ())
    pair = f" To pair them, run both with the same prompts in the same order ({hows}) at the same load." if hows else ""
    return (
        f"unpaired: {_why_unpaired(f)}. Each metric compares the two runs' distributions: the two-sample "
        "Hodges-Lehmann ratio (the typical ratio of a B request to an A request) with its rank-sum interval, valid "
        "when both runs drew their prompts from one workload. Prompt-to-prompt variation is not cancelled, so the "
        "interval is wider than a paired one of as many prompts; correctness, the breakdowns and acceptance against "
        f"speedup need pairs and are not shown.{pair}"
    )


def _unpaired_repeats(f: Fields) -> str:
    if f["same_prompts"]:
        return (
            "unpaired over several runs per load: each side's runs sent the same prompts, so a prompt's runs are one "
            "value (their median), not independent requests"
        )
    return (
        "unpaired over several runs per load: a side's runs sent different prompts, so every request is its own value"
    )


# --------------------------------------------------------------------------------------------------------------
# What the readers of other tools' result files found in a file and did with it (the FILE_* kinds): each kind's frame,
# the tool's own nouns (what its files are, how it names its version and its times) from the record's fields


def _file_read(f: Fields) -> str:
    """'baseline.json: a vLLM bench serve result (vLLM 0.32.0; date 20261203-083618, backend openai)'."""
    version = f"{f['named']} {f['version']}" if f.get("version") else f["unstated"]
    told = [f"{k} {v}" if k else str(v) for k, v in f.get("said") or ()]
    told += [f"{name} ({n} run{'s' if n != 1 else ''})" for name, n in f.get("runs") or ()]
    at = f"{f['at'][0]} {f['at'][1]}, " if f.get("at") else ""
    return f"{f['file']}: {f['what']} ({version}; {at}{', '.join(told) or f.get('unsaid', '')})"


def _early_layout(f: Fields) -> str:
    """'<file>: <layout>: `timestamp_ns` read as the send, `credit_phase` as the phase'."""
    read = ", ".join(f"`{key}` {'read ' if i == 0 else ''}as {what}" for i, (key, what) in enumerate(f["renamed"]))
    return f"{f['file']}: {f['layout']}: {read}"


_FILE_WORDS: dict[WarningKind, Callable[[Fields], str]] = {
    WarningKind.FILE_READ: _file_read,
    WarningKind.FILE_ALL_AT_ONCE: lambda f: (
        f"{f['file']}: request rate inf and no max concurrency: all {f['requests']} requests were sent at once"
    ),
    WarningKind.FILE_THROUGHPUT_PROFILE: lambda f: (
        f"{f['file']}: {f['named']}'s throughput profile: up to {f['requests']} requests at once"
    ),
    WarningKind.FILE_SENDS_FROM_LOAD: lambda f: (
        f"{f['file']}: no `{f['field']}` ({f['layout']}): sends are rebuilt from the load (each request sent as one "
        "before it ended, in the file's order), so tok/s is approximate"
    ),
    WarningKind.FILE_E2E_FROM_CHUNKS: lambda f: (
        f"{f['file']}: no `{f['field']}` ({f['layout']}): E2E is the last chunk, TTFT + the sum of {f['gaps']}"
    ),
    WarningKind.FILE_SENDS_CLOSED_LOOP: lambda f: (
        f"the {f['named']} file keeps no send times: rebuilt as the closed loop of {f['streams']} streams it was, "
        "each sending as its last request ended, in the order listed (as they completed); requests in flight are "
        "approximate"
    ),
    WarningKind.FILE_EARLY_LAYOUT: _early_layout,
    WarningKind.FILE_THROUGHPUT_WINDOW: lambda f: (
        f"{f['named']}'s tok/s: over {f['window']}, not the rebuilt send times"
    ),
    WarningKind.FILE_NO_THROUGHPUT: lambda f: f"{f['lacks']}: no throughput, and no throughput comparison",
    WarningKind.FILE_RUNS_FAILED: lambda f: (
        f"{f['file']}: the sweep also wrote {', '.join(f['failed'])} (failed runs, not compared)"
    ),
}


def _run_level_side(f: Fields) -> str:
    """'plain.json: 4 run(s) summarised by vllm bench serve 0.6.3, model m' (the side, A or B, is its subject)."""
    tool = f["tool"]
    version = f"{tool} {f['version']}" if f.get("version") else f"{tool}, its version not stated in the file"
    version = f"{tool} ({f['layout']})" if not f.get("version") and f.get("layout") else version
    model = f", model {f['model']}" if f.get("model") else ""
    detail = " (it keeps per-request data too; the other side does not)" if f.get("per_request") else ""
    return f"{f['name']}: {f['runs']} run(s) summarised by {version}{model}{detail}"


def _error_gate(f: Fields) -> str:
    cats = ", ".join(f"{k} {v}" for k, v in f["by_category"].items())
    return (
        f"{f['failed']} of {f['counted']} requests failed ({f['error_rate']:.1%}: {cats}), more than --max-error-rate "
        f"{f['max_error_rate']:.0%} allows"
    )


# --- why acceptance is unknown, a look's open comparisons, the plan's warnings, the methods table's reasons --------


def _said(d: Fields | str) -> str:
    """A record kept inside another's fields (its `to_dict`), or the sentence an older file kept there, in words."""
    w = ReportWarning.from_dict(d)
    return str(w.fields["text"]) if w.kind == WarningKind.NOTE else WORDS[w.kind](w.fields)


def _gone_evidence(f: Fields) -> str:
    """What showed the server gone, as the client saw it (servers.liveness.GoneEvidence); an older file's sentence."""
    if "evidence" in f:
        return str(f["evidence"])
    return (
        f"{f['failures']} requests in a row could not connect ({f['detail']}), nor could {f['probes']} probes of "
        f"/v1/models over {f['probe_s']:.1f} s"
    )


def _counter_went_backwards(f: Fields) -> str:
    moved = f" ({f['before']:g} -> {f['after']:g})" if f.get("before") is not None else ""
    return f"{f['counter']} went backwards{moved}: the server restarted between scrapes"


_METRICS_UNREAD = {
    "absent": "no Prometheus /metrics at the endpoint",
    "disabled": "metrics scraping disabled",
    "after": "/metrics could not be read after the run",
}


def _look_open(f: Fields) -> str:
    return (
        f"{f['candidate']} at {f['at']} ({f['decision']}: {f['speedup']:.3g}× [{f['low']:.3g}–{f['high']:.3g}] against "
        f"the ±{f['margin']:.0%} margin)"
    )


# Said as lines of the plan before the run, after its description: "warning: ..." as they always were
_UNCHECKED_BECAUSE = {
    "two_url": lambda f: "in two-URL mode speculab launches no candidate",
    "whole_command": lambda f: "candidate.command is given whole",
    "no_command": lambda f: "no launch command",
    "not_askable": lambda f: f"speculab cannot ask engine {f['engine']} what it accepts",
    "unreadable": lambda f: f"{f.get('problem') or 'the engine could not be read'}; the engine will say at launch",
    "options_unreadable": lambda f: (
        f"{f['engine']}{' ' + f['release'] if f.get('release') else ''}'s speculation options could not be read"
    ),
}


def _methods_unchecked(f: Fields) -> str:
    parts = [f"speculation method {', '.join(f['methods'])}"] if f.get("methods") else []
    if f.get("options_of"):
        parts.append(f"speculation.options of {', '.join(f['options_of'])}")
    what = " and ".join(parts) + (" are" if len(parts) > 1 else " is")
    return f"warning: {what} unchecked: {_UNCHECKED_BECAUSE[f['why']](f)}"


def _few_groups(f: Fields) -> str:
    conversations = "" if f["what"] == "prompts" else " (num_prompts counts their requests)"
    return (
        f"warning: at {f['at']} the {f['n']} {f['what']} make {f['groups']} groups of {f['size']} sent together; for a "
        f"verdict they need at least {f['min_groups']} groups: use at least {f['min_groups'] * f['size']} {f['what']} "
        f"at this load{conversations}"
    )


WORDS: dict[WarningKind, Callable[[Fields], str]] = {
    # why acceptance is unknown, a look's open comparisons, the plan's warnings (the methods table's: METHOD_WORDS)
    WarningKind.NO_DRAFTED_TOKENS: lambda f: f"{f['source']} shows no drafted tokens",
    WarningKind.NO_SPEC_METRICS: lambda f: (
        f"the server exposes no speculative-decoding metrics ({', '.join(f['prefixes'][:-1])} or {f['prefixes'][-1]})"
    ),
    WarningKind.COUNTER_WENT_BACKWARDS: _counter_went_backwards,
    WarningKind.COUNTERS_INCONSISTENT: lambda f: (
        f"{f['accepted']} grew more than {f['drafted']} ({f['accepted_delta']:g} > {f['drafted_delta']:g}): the "
        "counters are inconsistent"
    ),
    WarningKind.COUNTERS_DID_NOT_MOVE: lambda f: (
        f"{f['engine']}:spec_decode counters did not move: no speculative steps during the window"
    ),
    WarningKind.GAUGES_OUT_OF_RANGE: lambda f: (
        f"{f['length_gauge']} / {f['rate_gauge']} are out of range (length {f['length']:g}, rates {f['rates']}): not "
        "trusted"
    ),
    WarningKind.GAUGE_NO_STEPS: lambda f: f"{f['length_gauge']} is {f['length']:g}: no speculative steps reported",
    WarningKind.METRICS_UNREAD: lambda f: _METRICS_UNREAD[f["how"]],
    WarningKind.LOOK_OPEN: _look_open,
    WarningKind.LOOK_STILL_OPEN: lambda f: (
        f"after repeat {f['repeat']}: still open: {', '.join(_said(o) for o in f['open'])}"
    ),
    WarningKind.METHODS_UNCHECKED: _methods_unchecked,
    WarningKind.FEW_GROUPS: _few_groups,
    WarningKind.SEARCH_FEW_PROMPTS: lambda f: (
        f"warning: a probe at {f['high']:g} needs {f['needed']} prompts for its groups and the workload has "
        f"{f['have']}: raise workload.num_prompts (or lower loads.search.high)"
    ),
    **METHOD_WORDS,
    # --- (end of the block) ---
    WarningKind.ERROR_GATE: _error_gate,
    WarningKind.RUN_LOST_REQUESTS: lambda f: f"{f['side']} at {f['at']} lost {f['lost']:.0%} of a run's requests",
    WarningKind.RUN_LEVEL_UNIT: lambda f: (
        "the unit is the run: the files keep no per-request data, so each side's figures are its tool's own "
        "aggregates, one value per run"
    ),
    WarningKind.RUN_LEVEL_FIGURES: lambda f: (
        "each figure is its tool's own: vLLM's and SGLang's ITL are the gaps between streamed chunks (a chunk may "
        "carry several tokens, so speculation lengthens them), GuideLLM's is (last token - first token) / "
        "(output tokens - 1)"
    ),
    WarningKind.RUN_LEVEL_SIDE: _run_level_side,
    WarningKind.RUN_LEVEL_NO_INTERVAL: lambda f: (
        f"{f['a']} run(s) vs {f['b']}: no per-request data: no interval, no verdict (an interval needs {f['needed']} "
        "runs a side)"
    ),
    WarningKind.COMPARE_BENCH_RUNS: lambda f: (
        f"compare: two separate `speculab bench` runs, A then B; {_NOT_INTERLEAVED}"
    ),
    WarningKind.COMPARE_FILE_RUNS: _compare_file_runs,
    WarningKind.COMPARE_UNPAIRED: _compare_unpaired,
    WarningKind.UNPAIRED_REPEATS: _unpaired_repeats,
    WarningKind.RUNS_LEFT_OUT: lambda f: (
        f"at {f['at']}: A has {f['a']} runs and B {f['b']}; the first {f['compared']} of each are compared"
    ),
    WarningKind.SAMPLING_NOT_RECORDED: lambda f: (
        f"the {f['tools']} files do not record sampling (temperature, max_tokens): outputs are compared as at a "
        "temperature above 0, not for equivalence"
    ),
    WarningKind.CACHE_RESET_REFUSED: _cache_reset_refused,
    WarningKind.PHASE_REQUESTS_FAILED: lambda f: (
        f"{f['failed']} of {f['sent']} requests failed in phase {f['phase']} (first: {f['first']})"
    ),
    WarningKind.PREFILL_NOT_LINEAR: lambda f: (
        f"TTFT is not linear in prompt length here (R² {f['r2']:.2f}): the prefill rate is an average over the sweep; "
        "see prefill.by_length"
    ),
    WarningKind.PROMPT_TOKENS_APPROXIMATE: lambda f: (
        "the server reported no prompt token counts: prefill per token uses approximate lengths"
    ),
    WarningKind.BUILTIN_PROMPTS_LEFT_OUT: lambda f: (
        f"{f['left_out']} built-in prompts too long for the {f['context']}-token context with max_tokens "
        f"{f['max_tokens']} were left out"
    ),
    WarningKind.BENCH_INTERRUPTED: lambda f: "run interrupted: the summary covers only the requests that ran",
    WarningKind.SERVER_GONE: lambda f: (
        f"the server stopped answering mid-run, and the run stopped there: {_gone_evidence(f)}"
    ),
    WarningKind.OFFERED_LOAD_NOT_ACHIEVED: lambda f: (
        f"offered load not achieved: {_rate(f['achieved_rps'])} req/s sent vs {_rate(f['scheduled_rps'])} scheduled "
        f"({_rate(f['requested_rps'])} requested; concurrency cap or client overload; see queue_s)"
    ),
    WarningKind.SCHEDULE_OFF_RATE: lambda f: (
        f"the random arrival schedule of {f['requests']} requests came out at {_rate(f['scheduled_rps'])} req/s, not "
        f"{_rate(f['requested_rps'])} (sampling noise, sent on schedule); more prompts, --duration or "
        "--arrival constant bring it closer"
    ),
    WarningKind.CLIENT_QUEUE_TIME: lambda f: (
        f"client queue time p99 {_ms(f['p99_s'])}: requests waited before being sent (reported separately)"
    ),
    WarningKind.CHUNK_TOKENS_UNKNOWN: lambda f: (
        f"per-chunk token counts unknown for {f['count']} requests: they are left out of tokens per chunk "
        "(unless no request has counts: then usage / chunks), and out of per-token ITL unless their usage shows "
        "one token per chunk; enable continuous usage stats, --logprobs or --tokenizer"
    ),
    WarningKind.OUTPUT_TOKENS_UNKNOWN: lambda f: (
        f"{f['count']} successful requests have no output token count (no usage from server)"
    ),
    WarningKind.CONNECT_LOST: lambda f: (
        f"{f['connect']} requests could not connect although {f['ok']} succeeded: the server crashed, restarted or "
        "refused connections mid-run; throughput and the acceptance delta cover a broken window"
    ),
    WarningKind.REQUESTS_FAILED: _requests_failed,
    WarningKind.CLIENT_FELL_BEHIND: _client_fell_behind,
    WarningKind.CLIENT_CLOCK_HELD: _client_clock_held,
    WarningKind.OPTION_REJECTED: lambda f: (
        f"the server rejected {_OPTION_NAMES.get(f['option'], f['option'])}: {f['fix']}"
    ),
    WarningKind.REQUESTS_INVALID: lambda f: (
        f"{f['count']} requests were rejected as invalid (HTTP 400/422); see error messages in requests.jsonl"
    ),
    WarningKind.ENDPOINT_NOT_SERVED: lambda f: (
        f"{f['count']} requests got HTTP 404/405: the server may not serve this endpoint; "
        "try the other --api (completions | chat)"
    ),
    WarningKind.WORKLOAD_FITTED: _fitted,
    WarningKind.WORKER_LOST: lambda f: f"{_worker_how(f)} before it finished; the records it sent are kept",
    WarningKind.WORKER_LATE: _worker_late,
    WarningKind.WORKERS_RAN: _workers_ran,
    WarningKind.RUN_STOPPED_ON_ERROR: lambda f: (
        f"the run stopped on an error ({f['error']}): the report covers the part that ran"
    ),
    WarningKind.RUN_INTERRUPTED: lambda f: "the run was interrupted: the report covers the part that ran",
    WarningKind.SERVER_EXITED: lambda f: f"{f['arm']} r{f['repeat']}: server exited with code {f['code']}",
    WarningKind.COLD_START_NO_TOKEN: lambda f: f"{f['arm']}: cold-start probe gave no first token ({f['why']})",
    WarningKind.ONE_URL: lambda f: (
        "baseline and candidate are one URL (one server): its /metrics counters, and so acceptance, count both "
        "arms' requests"
    ),
    WarningKind.ADAPTIVE_STOP: lambda f: (
        f"adaptive repeats: every verdict was decided after repeat {f['repeat']} of at most {f['max']} "
        f"(alpha {f['alpha']:.3g} at this look; stats.sequential)"
    ),
    WarningKind.NO_METRICS_READ: lambda f: "no Prometheus /metrics read around this level: no server-side counters",
    WarningKind.SENT_RATE: lambda f: (
        f"sent {f['achieved_rps']:.3g} req/s "
        + (f"(requested {f['value']:g})" if f["kind"] == "rate" else f"(the trace at ×{f['value']:g})")
    ),
    WarningKind.ACCEPTANCE_UNKNOWN: lambda f: f"acceptance unknown: {_said(f['why'])}",
    WarningKind.SEARCH_NO_VERDICT: lambda f: (
        "the search stopped: no probe had a verdict (see each load's gate); its answer is undetermined"
    ),
    WarningKind.SEARCH_INTERRUPTED: lambda f: (
        f"the search was interrupted after {f['probes']} probe(s), in round {f['round']} ({f['probing']}): its answer "
        "covers the probes measured before"
    ),
    WarningKind.SEARCH_PROMPTS_SHORT: lambda f: (
        f"the search's probe at {f['load']} needs {f['prompts']} prompts for its groups and the workload has "
        f"{f['have']}: it sent them all (raise workload.num_prompts)"
    ),
    WarningKind.BLOCK_SET_ASIDE: _block_set_aside,
    WarningKind.RESUMED_OTHER_VERSIONS: lambda f: (
        f"resumed under other versions than it started with ({', '.join(f['changed'])})"
    ),
    **_FILE_WORDS,  # the readers of other tools' files
}


# --------------------------------------------------------------------------------------------------------------
# The verdict's records that are not warnings: why one metric's comparison has no verdict, or what to read it with
# (`Ratio.note`), the correctness verdict (`CorrectnessComparison.verdict`) and each failed check (`ArmChecks.failures`)


def _few_groups_text(f: Fields) -> str:
    need = f["needed"]
    return (
        f"only {f['groups']} groups of {f['group_size']} prompts sent together ({f['pairs']} pairs); need at least "
        f"{need} groups: use at least {need * f['group_size']} prompts at this load"
    )


def _few_samples_text(f: Fields) -> str:
    size, need = f["group_size"], f["needed"]
    unit = f"groups of {size} requests" if size > 1 else "requests"
    return (
        f"only {f['candidate']} candidate and {f['baseline']} baseline {unit}; need at least {need} of each: send at "
        f"least {need * max(1, size)} requests in each run"
    )


def _not_compared_text(f: Fields) -> str:
    p = f.get("length_p")
    lengths = f"paired length test p = {p:.2g}" if p is not None else "too few for a length test"
    return f"not compared (temperature above 0 or not recorded, and no checks; output lengths alike: {lengths})"


def _correctness_worse_text(f: Fields) -> str:
    return (
        f"pass rate lower by more than the {f['margin'] * 100:g}-point margin ({f['estimate'] * 100:+.1f} points, "
        f"at most {f['high'] * 100:+.1f} at {f['confidence']:.0%} one-sided)"
    )


def _check_failed_text(f: Fields) -> str:
    name = f" ({f['prompt_id']})" if f.get("prompt_id") else ""
    why = f": {f['reason']}" if f.get("reason") else ""
    return f"item {f['item']}{name}: check '{f['check']}' failed{why}"


VERDICT_WORDS: dict[WarningKind, Callable[[Fields], str]] = {
    WarningKind.METRIC_FEW_PAIRS: lambda f: f"only {f['pairs']} usable pairs; need at least {f['needed']}",
    WarningKind.METRIC_FEW_GROUPS: _few_groups_text,
    WarningKind.METRIC_FEW_SAMPLES: _few_samples_text,
    WarningKind.METRIC_INTERVALS_DISAGREE: lambda f: (
        f"the geometric-mean interval {'excludes' if f['excludes'] else 'includes'} 1 but the signed-rank interval "
        "(the verdict's) does not: borderline, or a few outlying pairs"
    ),
    WarningKind.CORRECTNESS_CHECKS_LOWER: lambda f: (
        f"pass rate lower ({f['candidate_rate']:.0%} vs {f['baseline_rate']:.0%}, McNemar p = {f['p_value']:.2g})"
    ),
    WarningKind.CORRECTNESS_CONFIDENT_DIVERGENCES: lambda f: (
        f"SUSPICIOUS: {f['count']} confident divergence(s) at temperature 0 (of {f['of']} prompts)"
    ),
    WarningKind.CORRECTNESS_LENGTHS_DIFFER: lambda f: (
        f"outputs {'longer' if f['longer'] else 'shorter'} (paired length test p = {f['p_value']:.2g})"
    ),
    WarningKind.CORRECTNESS_CHECKS_HIGHER: lambda f: f"pass rate higher (McNemar p = {f['p_value']:.2g})",
    WarningKind.CORRECTNESS_IDENTICAL: lambda f: f"identical outputs for all {f['of']} prompts",
    WarningKind.CORRECTNESS_UNCLASSIFIED: lambda f: (
        f"{f['differ']} of {f['of']} outputs differ at temperature 0 ({f['unclassified']} unclassified: no logprobs)"
    ),
    WarningKind.CORRECTNESS_NEAR_TIES: lambda f: (
        f"no difference ({f['differ']} of {f['of']} outputs differ, all at near-ties)"
    ),
    WarningKind.CORRECTNESS_NOT_COMPARED: _not_compared_text,
    WarningKind.CORRECTNESS_NO_DIFFERENCE: lambda f: "no difference",
    WarningKind.CORRECTNESS_WORSE: _correctness_worse_text,
    WarningKind.CORRECTNESS_NOT_JUDGED: lambda f: (
        f"not judged: {f['failed']} of {f['sent']} prompts have no successful output in both arms (above the "
        f"{f['max_error_rate']:.0%} error gate)"
    ),
    WarningKind.CHECK_FAILED: _check_failed_text,
}


# --------------------------------------------------------------------------------------------------------------
# speculab diagnose: its findings, and the queueing check's account of the extra TTFT at load


@dataclass(frozen=True, slots=True)
class FindingWords:
    """What a finding says: its title, whom it affects, the evidence and the next step."""

    title: str
    affects: str
    evidence: str
    next_step: str


NEXT_DECODE = (
    "evaluate speculative decoding on this workload: write an experiment with `speculab init --url URL` and run "
    "`speculab run experiment.yaml` (it shortens exactly this part)"
)
NEXT_COLD = (
    "keep the server warm (at least one replica always up; a keep-alive request more often than the idle timeout) "
    "or make it load faster (weights on local disk, cached compilation / CUDA graphs, a smaller image)"
)
NEXT_QUEUE = (
    "add capacity (more replicas, or a larger batch / --max-num-seqs if memory allows) or change scheduling "
    "(admission limits, priorities) so requests do not wait for a slot"
)
_QUEUEING_UNMEASURED = {
    "no_load": "pass --concurrency N (your operating point) to measure queueing",
    "incomplete": "the workload did not complete at both concurrency 1 and the operating point",
}


def _x(ratio: float | None, digits: int) -> str:
    """A ratio of two means; a file's JSON holds null where it was not finite."""
    return f"{ratio:.{digits}f}" if ratio is not None else "nan"


def queueing_note(q: Fields) -> str:
    """The queueing check in words: what load added to TTFT and what it was weighed against (or why unmeasured)."""
    if "note" in q:  # diagnosis.json /1 saved the sentence
        return str(q["note"])
    if not q.get("measured"):
        return _QUEUEING_UNMEASURED[q["unmeasured"]]
    parts = []
    if q.get("server_queue_s") is not None:
        parts.append(f"the server reports {q['server_queue_s']:.3f} s of queue time per request")
    if q.get("prefill_bound_s") is not None:
        within = "within" if q.get("within_prefill") else "more than"
        parts.append(
            f"{within} the prefill work of the other {q['others_in_flight']:.3g} requests in flight "
            f"({q['prefill_bound_s']:.3f} s)"
        )
    else:
        parts.append("no prefill fit to compare the extra TTFT with")
    return (
        f"TTFT {q['ttft_c1_s']:.3f} s alone -> {q['ttft_load_s']:.3f} s at {q['at']} ({_x(q.get('ttft_ratio'), 1)}x); "
        f"TPOT {q['tpot_c1_s'] * 1e3:.1f} -> {q['tpot_load_s'] * 1e3:.1f} ms ({_x(q.get('tpot_ratio'), 2)}x); "
        + "; ".join(parts)
    )


def disaggregation_text(doc: Fields) -> str | None:
    """The disaggregation suggestion and its cost, only when prefill/decode interference was measured."""
    suggested = doc.get("disaggregation")
    if isinstance(suggested, str) or not suggested:  # /1 saved the sentence; /2 says whether to suggest it
        return suggested or None
    return (
        f"prefill and decode interfere under load ({queueing_note(doc.get('queueing') or {})}): prefill/decode "
        "disaggregation (separate prefill and decode servers) would keep long prefills from delaying first tokens. "
        "Its cost: the KV cache of every prompt is transferred from the prefill to the decode server (network "
        "bandwidth and latency per request) and a router must pair them; try chunked prefill first, which needs "
        "neither"
    )


def _decode_words(f: Fields) -> FindingWords:
    over = f" over {f['output_tokens']:.0f} output tokens" if f.get("output_tokens") else ""
    return FindingWords(
        "generation after the first token",
        f"every request (at {f['at']})",
        f"E2E {f['e2e_s']:.3f} s of which {f['decode_s']:.3f} s ({f['decode_share']:.0%}) after the first token; TPOT "
        f"{f[TPOT.name] * 1e3:.1f} ms{over}",
        NEXT_DECODE,
    )


def _prefill_next(prefix_caching: bool | None) -> str:
    if prefix_caching is True:
        cache = "prefix caching is already on (measured), so reuse shared prompt prefixes more (same system prompt"
        cache += " and documents first, in the same order)"
    elif prefix_caching is False:
        cache = "turn on prefix caching if your prompts share prefixes (it is off here: a repeated prefix was not"
        cache += " faster)"
    else:
        cache = "turn on prefix caching if your prompts share prefixes"
    return f"{cache}; use chunked prefill / prefill scheduling so long prompts do not stall others; shorten prompts"


def _prefill_words(f: Fields) -> FindingWords:
    return FindingWords(
        "long prompts (prefill)",
        "every request, in proportion to its prompt length",
        f"TTFT = {f['overhead_s']:.3f} s + {f['s_per_token'] * 1e3:.3f} ms x prompt tokens (prefill "
        f"{f['tokens_per_s']:,.0f} tokens/s, R² {f['r2']:.2f}); the workload's {f['prompt_tokens']:.0f}-token prompts "
        f"cost {f['prefill_s']:.3f} s of prefill",
        _prefill_next(f.get("prefix_caching")),
    )


def _queueing_words(f: Fields) -> FindingWords:
    client = f"; client-side wait {f['client_queue_s']:.3f} s" if f.get("client_queue_s") else ""
    return FindingWords(
        f"queueing at {f['at']}",
        f"requests at the operating point ({f['at']})",
        queueing_note(f) + client,
        NEXT_QUEUE,
    )


def _cold_start_words(f: Fields) -> FindingWords:
    if f.get("mode") == "launch":
        affects = "the first request after the server (re)starts: scale-from-zero, restarts, deploys"
        evidence = (
            f"process start -> ready (/health) {f.get('process_ready_s') or math.nan:.2f} s -> first token "
            f"{f.get('process_first_token_s') or math.nan:.2f} s"
        )
    else:
        idle = f.get("idle_s")
        affects = "the first request after start" + (f" or after {idle:g} s idle" if idle else "")
        warm = f.get("warm_ttft_s")
        parts = [f"warm TTFT {warm:.3f} s" if warm is not None else "no warm TTFT"]
        if f.get("first_request_ttft_s") is not None:
            parts.append(f"first request {f['first_request_ttft_s']:.3f} s")
        if f.get("after_idle_ttft_s") is not None:
            parts.append(f"after {idle:g} s idle {f['after_idle_ttft_s']:.3f} s")
        evidence = "; ".join(parts)
    return FindingWords("cold start", affects, evidence, NEXT_COLD)


FINDING_WORDS: dict[FindingKind, Callable[[Fields], FindingWords]] = {
    FindingKind.DECODE: _decode_words,
    FindingKind.PREFILL: _prefill_words,
    FindingKind.QUEUEING: _queueing_words,
    FindingKind.COLD_START: _cold_start_words,
}


def finding_words(finding: Fields) -> FindingWords:
    """A finding of diagnosis.json in words: made from its kind and fields (/2), or the sentences a /1 file saved."""
    if "fields" not in finding:
        return FindingWords(
            str(finding.get("title", "")),
            str(finding.get("affects", "")),
            str(finding.get("evidence", "")),
            str(finding.get("next_step", "")),
        )
    return FINDING_WORDS[FindingKind(finding["cause"])](finding["fields"])
