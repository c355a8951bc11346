"""The sentences of the warnings of a run, one per kind: a bench run's (its numbers, the client's health, the request
options a server refused, fitting), the client workers', an A/B run's notes, compare's own, diagnose's, made from the
record's fields when rendering (`words.WORDS` merges them with the other families)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from speculab.harness.results.warnings import WarningKind
from speculab.report.words.reasons import gone_evidence, said

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


RUN_WORDS: dict[WarningKind, Callable[[Fields], str]] = {
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
        f"the server stopped answering mid-run, and the run stopped there: {gone_evidence(f)}"
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
    WarningKind.PORT_TAKEN: lambda f: (
        f"{f['arm']} r{f['repeat']}: another process took port {', '.join(map(str, f['ports_taken']))} before the "
        f"server could bind it; relaunched on port {f['port']}"
    ),
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
    WarningKind.ACCEPTANCE_UNKNOWN: lambda f: f"acceptance unknown: {said(f['why'])}",
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
}
