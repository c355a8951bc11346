"""What a reader must be warned of, in every command, as records: a kind from a closed set, whom it is about, and
the numbers; the sentence is made when rendering (`speculab.report.phrases.warning_text`), never stored here.

The verdict (`harness.verdict`) produces them for the A/B report, `speculab bench` for its summary.json (the run's
numbers, the client's health, the workers, the request options a server refused), and the load coordinator for an
A/B repeat's client workers. They live with the results, below every command, so that all of them use one type.
The readers of other tools' files note what they found in a file as records too (the FILE_* kinds); what a reader
says of all its tool's files (its `NOTE`) is carried as kind `note`, and so is every warning of a file written when
warnings were sentences (bench summary.json /1, A/B summary.json before records).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class WarningKind(str, Enum):
    """Every kind of warning the A/B report gives; adding one adds its sentence in `report.phrases`."""

    INTERRUPTED = "interrupted"  # the run stopped early
    NOT_SINGLE_CHANGE = "not_single_change"  # the arms' commands differ in more than speculation: diff_lines
    CHANGE_UNVERIFIED = "change_unverified"  # the single change could not be verified: note (a CHANGE_* record)
    NO_VERDICT = "no_verdict"  # a gate withheld the verdict: reason (a GATE_* record; subject: whom it withheld)
    # Why a gate withheld a load's verdict (`LevelComparison.gate_reason`, NO_VERDICT's `reason`, a crossover's loads
    # left out), about one side: `side` is "baseline" or the candidate's label
    GATE_NO_RUNS = "gate_no_runs"  # side, at (the load's label)
    GATE_ERROR_RATE = "gate_error_rate"  # side, error_rate, failed, counted, max_error_rate, first (first error; "")
    GATE_NO_DRAFTS = "gate_no_drafts"  # drafts (None: no count reported), source (the acceptance source)
    GATE_LOAD_NOT_ACHIEVED = "gate_load_not_achieved"  # side, open_loop, kind, value, achieved, fraction, min_fraction
    GATE_CLIENT_BEHIND = "gate_client_behind"  # side, cpu_share, loop_lag_p99_s
    TOO_FEW_PAIRS = "too_few_pairs"  # a load left out of the crossover: not enough paired TPOT data
    # What an A/B run lacks (`Report.missing`): an arm (subject) at a load
    NO_RUNS = "no_runs"
    REPEATS_MISSING = "repeats_missing"  # repeats (their numbers)
    REPEATS_CUT = "repeats_cut"  # repeats interrupted: partial records, no counters
    # Why one metric's comparison at a load has no verdict, or what to read it with (`Ratio.note`; None: nothing)
    METRIC_FEW_PAIRS = "metric_few_pairs"  # pairs (usable in both arms), needed (MIN_PAIRS)
    METRIC_FEW_GROUPS = "metric_few_groups"  # groups (of group_size prompts sent together), group_size, pairs, needed
    METRIC_FEW_SAMPLES = "metric_few_samples"  # unpaired: candidate, baseline (their units), group_size, needed
    METRIC_INTERVALS_DISAGREE = "metric_intervals_disagree"  # the geometric mean's interval decides otherwise: excludes
    PREFIX_CACHE_MOVED = "prefix_cache_moved"  # hit rates differ beyond noise: rates, p_value, requests per arm
    ONE_TOKEN_PER_CHUNK = "one_token_per_chunk"  # per-chunk token counts unknown
    NO_ACCEPTANCE = "no_acceptance"  # the engine reported none: tokens_per_chunk when it streamed like the baseline
    REPEATS_WITHOUT_DRAFTS = "repeats_without_drafts"  # inactive_repeats of repeats made no drafts
    # The three below say how to get more repeats, once each for the whole run (`where` lists every candidate and
    # load it is about), in the words of the command that made the run (`command`: run | demo | compare).
    LAUNCH_SPREAD = "launch_spread"  # launch pairs' TPOT effects differ beyond the margin: where, launches, margin
    NEAR_MARGIN = "near_margin"  # a TPOT interval ends near a margin bound, launch effect unmeasured: where
    FEW_REPEATS = "few_repeats"  # below `needed` repeats throughput and cost have no interval: repeats, needed
    ONE_REPEAT = "one_repeat"  # throughput and cost have no interval (a summary.json before few_repeats)
    EFFECT_NOT_MEDIANS = "effect_not_medians"  # the per-prompt effect and the p50s' ratio differ: where (docs/results)
    # a time guardrail worse (or leaning worse) beyond its margin that does not hold the candidate back: its loss is
    # within the floor, or the candidate is within its SLO (verdict.recommendation; subject: the candidate, at its
    # load). metric, answer (worse | leans worse), speedup, low, high, margin, loss_s (None: unknown), and floor_s, or
    # slo_limit_s, within_slo and target (the SLO's share)
    GUARDRAIL_TOLERATED = "guardrail_tolerated"
    WHAT_IF_SKIPPED = "what_if_skipped"  # the what-if model refused the acceptance: error
    ACCEPTANCE_RATE_ACROSS_K = "acceptance_rate_across_k"  # candidates of different K by rate: candidates[]
    ACCEPTANCE_OUTLIERS = "acceptance_outliers"  # per-request rates near 0 or 1: outliers[] with their checks
    # `speculab predict` (fields: docs/predict.md): no positions at the lowest load, too few cost probes, its plan
    PREDICT_NO_POSITIONS = "predict_no_positions"
    PREDICT_FEW_PROBES = "predict_few_probes"
    PREDICT_PLAN = "predict_plan"
    PREDICT_FORCING_REFUSED = "predict_forcing_refused"  # the engine refused forced acceptance: error (its first line)
    # `predict --check-k`: a probe at the second k outside the cost fit's prediction interval: k, batch, measured_s,
    # predicted_s, low_s, high_s (the probe furthest from the line)
    PREDICT_COST_NOT_LINEAR_IN_K = "predict_cost_not_linear_in_k"
    PREDICTION_MISSED = "prediction_missed"  # measured outside the predicted band: predicted, measured, causes
    # the what-if model's notes on its step cost (WhatIf.notes)
    STEP_COST_CLIPPED = "step_cost_clipped"  # step_cost (the fitted, negative value), clipped to 0
    STEP_COST_FITTED = "step_cost_fitted"  # fitted to the observed speedup: the prediction at the observed k matches
    # The correctness verdict (`CorrectnessComparison.verdict`): the worst finding first
    CORRECTNESS_CHECKS_LOWER = "correctness_checks_lower"  # candidate_rate, baseline_rate (pass rates), p_value
    CORRECTNESS_CONFIDENT_DIVERGENCES = "correctness_confident_divergences"  # count at temperature 0, of (prompts)
    CORRECTNESS_LENGTHS_DIFFER = "correctness_lengths_differ"  # longer (the candidate's), p_value (paired length test)
    CORRECTNESS_CHECKS_HIGHER = "correctness_checks_higher"  # p_value (McNemar)
    CORRECTNESS_IDENTICAL = "correctness_identical"  # of (prompts, every output identical)
    CORRECTNESS_UNCLASSIFIED = "correctness_unclassified"  # differ, of, unclassified (no logprobs) at temperature 0
    CORRECTNESS_NEAR_TIES = "correctness_near_ties"  # differ, of: every divergence at a near-tie
    # above temperature 0 or not recorded, no checks: length_p (the paired length test's; None: too few for one)
    CORRECTNESS_NOT_COMPARED = "correctness_not_compared"
    CORRECTNESS_NO_DIFFERENCE = "correctness_no_difference"
    # the checks' pass rate lower beyond the non-inferiority margin: margin, estimate, high (its one-sided bound),
    # confidence (all as fractions)
    CORRECTNESS_WORSE = "correctness_worse"
    # above the error gate: failed (prompts without a successful output in both arms), sent, max_error_rate
    CORRECTNESS_NOT_JUDGED = "correctness_not_judged"
    # Degeneration (`DegenerationComparison.verdict`; the correctness verdict too when worse): candidate, baseline
    # (outputs that loop or repeat), of (prompts judged), candidate_only, baseline_only (McNemar's discordant pairs),
    # estimate, low, high (the paired difference of the rates), confidence, p_value (McNemar)
    DEGENERATION_WORSE = "degeneration_worse"  # the candidate degenerates where the baseline does not, beyond noise
    DEGENERATION_NOT_WORSE = "degeneration_not_worse"
    CHECK_FAILED = "check_failed"  # a failed check (`ArmChecks.failures`): item, prompt_id ("": none), check, reason
    CHECK_ERROR = "check_error"  # an item's check could not run: item, error
    STREAM_DIFFERS = "stream_differs"  # item, prompt_id, position, kind (dropped|duplicated|replaced), *_tokens
    STREAMING_DEFECT = "streaming_defect"  # side (baseline | candidate), count, of, first (its STREAM_DIFFERS fields)
    STREAM_UNARY_ALIKE = "stream_unary_alike"  # of: every sampled prompt streamed as unary in both arms
    STREAM_UNARY_NOT_JUDGED = "stream_unary_not_judged"  # temperature (above 0: a stream may differ by design)
    STRUCTURED_INVALID = "structured_invalid"  # output invalid against its response_format: item, prompt_id, reason
    STRUCTURED_OUTPUT = "structured_output"  # candidate_rate, baseline_rate, of, p_value (McNemar), lower (at alpha)
    LOSSY_ACCEPTANCE = "lossy_acceptance"  # by (the engine's words), checked (the checks found no difference)
    CONTEXT_DIFFERS = "context_differs"  # conversation turns not compared for identical output: count
    PYTHON_CHECKS_SKIPPED = "python_checks_skipped"  # count, flag (the opt-in)
    PYTHON_CHECKS_RAN = "python_checks_ran"  # count, flag
    UNCLASSIFIED_DIVERGENCES = "unclassified_divergences"  # outputs differ at temperature 0, no logprobs: count
    BASELINE_SELF_DIFFERS = "baseline_self_differs"  # the baseline disagreed with itself at temperature 0: rate
    # Acceptance that cannot be the user's traffic's (workload.validity; `ACCEPTANCE_VALIDITY`): said first, in the
    # A/B report's headline, bench's and a read file's warnings; a candidate they are about (subject: its label; "":
    # every candidate) is never chosen by the recommendation. Stable names: scripts read them.
    # prompts synthesised, of (the run's prompts; None: unknown), source ("synthetic" | "trace" | a read file's
    # dataset name, e.g. vLLM bench's "random")
    ACCEPTANCE_SYNTHETIC_PROMPTS = "acceptance_synthetic_prompts"
    ACCEPTANCE_IGNORE_EOS = "acceptance_ignore_eos"  # outputs ran past the model's own end: source ("run" | a file's)
    # acceptance drawn to set rates, not verified: seen_in ["launch" | "server" | "metrics" | "responses"], evidence
    # (what said so, in the engine's own words: a flag, an environment variable, a gauge)
    ACCEPTANCE_FORCED = "acceptance_forced"
    # outputs capped too short to measure acceptance: k, tokens_per_step (the acceptance length, or k + 1), measured
    # (it is the acceptance length), median_output_tokens, needed (SHORT_OUTPUT_STEPS x tokens_per_step), capped
    # (share stopped by the length limit; None: no finish reason known), requests
    ACCEPTANCE_SHORT_OUTPUTS = "acceptance_short_outputs"
    # speculab bench (its summary.json `warnings`), each about the whole run
    BENCH_INTERRUPTED = "bench_interrupted"  # the summary covers only the requests that ran
    # the server stopped answering and the run stopped there: failures, detail, probes, probe_s (what the client saw,
    # servers.liveness.GoneEvidence; a file written before: evidence, in words)
    SERVER_GONE = "server_gone"
    OFFERED_LOAD_NOT_ACHIEVED = "offered_load_not_achieved"  # achieved_rps < 95% of scheduled_rps; requested_rps
    SCHEDULE_OFF_RATE = "schedule_off_rate"  # a seeded schedule of `requests` came out at scheduled_rps, not requested
    CLIENT_QUEUE_TIME = "client_queue_time"  # p99_s of scheduled -> sent
    CHUNK_TOKENS_UNKNOWN = "chunk_tokens_unknown"  # count requests without per-chunk token counts
    OUTPUT_TOKENS_UNKNOWN = "output_tokens_unknown"  # count successful requests without an output token count
    CONNECT_LOST = "connect_lost"  # connect requests could not connect although ok succeeded
    REQUESTS_FAILED = "requests_failed"  # failed of sent, by_category {category: count}
    # The client's health (load.client_health): the signs past their thresholds (None: not a sign), in_flight streams
    CLIENT_FELL_BEHIND = "client_fell_behind"  # loop_lag_p99_s, cpu_share, dispatch_lag_p99_s, in_flight
    CLIENT_CLOCK_HELD = "client_clock_held"  # loop lag alone while the client was nearly idle: + idle_lag_p99_s
    # Request options a server refused (analysis.rejections)
    OPTION_REJECTED = "option_rejected"  # option (continuous_usage_stats | stream_options | logprobs), fix (the flag)
    REQUESTS_INVALID = "requests_invalid"  # count rejected with HTTP 400/422 naming no option we sent
    ENDPOINT_NOT_SERVED = "endpoint_not_served"  # count answered HTTP 404/405
    WORKLOAD_FITTED = "workload_fitted"  # left_out (ids), pool, capped, context, max_tokens, policy (workload.fit)
    # Client workers (load.coordinator): one that ended early, one that started late; how many ran an A/B repeat
    WORKER_LOST = "worker_lost"  # worker, host, node_ip (Ray; else None), error, exitcode
    WORKER_LATE = "worker_late"  # worker, start_lag_s, uncertainty_s (0: none known)
    WORKERS_RAN = "workers_ran"  # workers, ray_nodes (None: local processes), clock_uncertainty_s, max_start_lag_s
    # An A/B run's notes (`ABRun.notes`, a repeat's `RepeatRun.notes`), said to the reader among the warnings
    RUN_STOPPED_ON_ERROR = "run_stopped_on_error"  # error (its first line, shortened)
    RUN_INTERRUPTED = "run_interrupted"  # the report covers the part that ran
    SERVER_EXITED = "server_exited"  # arm, repeat, code: a launched server's exit code after stopping
    COLD_START_NO_TOKEN = "cold_start_no_token"  # arm, why (the probe's error message, or none streamed)
    # another process took the port speculab chose for a launch before the server bound it: it was relaunched on
    # another; arm, repeat, ports_taken (each port it moved off, in order), port (where it listens)
    PORT_TAKEN = "port_taken"
    ONE_URL = "one_url"  # baseline and candidate are one server: its counters count both arms
    ADAPTIVE_STOP = "adaptive_stop"  # repeat, max, alpha: every verdict decided before the last repeat
    NO_METRICS_READ = "no_metrics_read"  # no /metrics around this level: no server-side counters
    SENT_RATE = "sent_rate"  # achieved_rps, kind (rate | trace), value (requested rate or trace speed)
    ACCEPTANCE_UNKNOWN = "acceptance_unknown"  # why (the acceptance reader's reason)
    SEARCH_NO_VERDICT = "search_no_verdict"  # no probe had a verdict: the search's answer is undetermined
    SEARCH_INTERRUPTED = "search_interrupted"  # probes (measured before), round, probing (the round's loads, said)
    SEARCH_PROMPTS_SHORT = "search_prompts_short"  # load (label), prompts (needed), have (the workload's)
    RESUMED = "resumed"  # at, done, total (blocks), stopped (the record of how it had stopped; None: no word)
    BLOCK_SET_ASIDE = "block_set_aside"  # arm, load (labels), repeat, records (None: it finished), kept_in
    RESUMED_OTHER_VERSIONS = "resumed_other_versions"  # changed (the versions' names)
    # a server refused to empty its caches before a block (subject: the arm): url, detail (what it said), env (what
    # the server must be started with to allow it; {}: unknown)
    CACHE_RESET_REFUSED = "cache_reset_refused"
    # speculab diagnose (diagnosis.json `warnings`)
    PHASE_REQUESTS_FAILED = "phase_requests_failed"  # phase, failed, sent, first (the first error, shortened)
    PREFILL_NOT_LINEAR = "prefill_not_linear"  # r2 of the TTFT-against-prompt-tokens fit
    PROMPT_TOKENS_APPROXIMATE = "prompt_tokens_approximate"  # no usage: prefill per token uses speculab's counts
    BUILTIN_PROMPTS_LEFT_OUT = "builtin_prompts_left_out"  # left_out, context, max_tokens (the default workload)
    # speculab compare's own notes (ABRun.notes of a comparison of two separate runs)
    COMPARE_BENCH_RUNS = "compare_bench_runs"  # two bench runs, A then B: not interleaved, drift not cancelled
    # two runs of any tools, A then B: tool_a, tool_b, paired (per prompt by position), checked (what was verified
    # equal: "prompts" | "prompt lengths")
    COMPARE_FILE_RUNS = "compare_file_runs"
    # problem (the first reason the runs cannot be paired, in the pairing check's words; None: --unpaired asked for
    # it; a record before #48 item 3 kept the sentence: why), hows (each tool's way to pair its runs)
    COMPARE_UNPAIRED = "compare_unpaired"
    UNPAIRED_REPEATS = "unpaired_repeats"  # same_prompts: each side's runs at a load sent the same prompts
    RUNS_LEFT_OUT = "runs_left_out"  # at (the load), a, b (runs each side holds there), compared (the first n of each)
    SAMPLING_NOT_RECORDED = "sampling_not_recorded"  # tools (their names, "A and B")
    # What the readers of other tools' result files (harness.imports) found in a file and did with it
    # (`ImportedRun.notes`), about `file` (the file or run folder as the report names it) of `tool` (the reader's
    # FORMAT). The tool's own nouns (what its files are, how it names its version) come from the reader, in fields;
    # the report frames them, so that a new reader brings its nouns and no words
    # what the file is: file, tool, what (the reader's name for it), named (how the tool names its version), version
    # (as the file states it; None), unstated (what is said instead), at ([key, value]: which run of several; None),
    # said [[key, value]] (what the file says of its run; key "": the value alone), unsaid (said when that is
    # nothing), runs [[name, count]] (a sweep's loads and their runs)
    FILE_READ = "file_read"
    FILE_ALL_AT_ONCE = "file_all_at_once"  # request rate inf, no max concurrency: file, tool, requests (all at once)
    FILE_THROUGHPUT_PROFILE = "file_throughput_profile"  # file, tool, named (the tool), requests (up to, at once)
    # an older layout keeps no send times (`field`: its later one's key): rebuilt from the load; file, tool, layout
    FILE_SENDS_FROM_LOAD = "file_sends_from_load"
    # an older layout keeps no E2E: the last chunk, TTFT + the sum of the gaps; file, tool, field, layout, gaps (key)
    FILE_E2E_FROM_CHUNKS = "file_e2e_from_chunks"
    FILE_SENDS_CLOSED_LOOP = "file_sends_closed_loop"  # the tool keeps no send times: tool, named, streams
    FILE_EARLY_LAYOUT = "file_early_layout"  # read as the later layout: file, tool, layout, renamed [[key, read as]]
    FILE_THROUGHPUT_WINDOW = "file_throughput_window"  # tok/s over the tool's own time: tool, named, window (the time)
    FILE_NO_THROUGHPUT = "file_no_throughput"  # no measured time, no send times: tool, lacks (what, in its nouns)
    # the file does not state its load (`LevelSpec` kind unknown): file, named (the tool), where (what of the tool's
    # states it, e.g. LLMPerf's summary), sends (how its send times were rebuilt without it)
    FILE_LOAD_UNSTATED = "file_load_unstated"
    FILE_RUNS_FAILED = "file_runs_failed"  # a sweep's failed runs beside the compared: file, tool, failed (names)
    # The error gate (`--max-error-rate`, exit 4; an A/B run's `errors` answer for --fail-on): failed and counted
    # requests (those the user cancelled in neither), error_rate (failed / counted), by_category {category: count,
    # cancelled left out}, max_error_rate; subject and load: the arm and load that failed it ("": bench, diagnose)
    ERROR_GATE = "error_gate"
    # a run-level comparison's `errors` answer: side (its name), at (the load's label), lost (the largest share of a
    # run's requests lost)
    RUN_LOST_REQUESTS = "run_lost_requests"
    # a comparison whose unit is the run (`RunLevelReport.notes`, summary-only files)
    RUN_LEVEL_UNIT = "run_level_unit"  # the unit is the run: each side's figures are its tool's own aggregates
    RUN_LEVEL_FIGURES = "run_level_figures"  # each figure is its tool's own (how vLLM, SGLang and GuideLLM define ITL)
    # one side (subject "A" or "B"): name, runs, tool, version (None: not stated), layout (a directory's, None), model
    # (None: not named), per_request (it keeps per-request data too; the other side does not), rows (the numbers of
    # its file's rows it is, None: the file is one configuration), configuration ([[field, value]] of those rows
    # where they differ from the other side's),
    # acceptance ([{kind, value, weighting, source, load}]: what its file states, None: nothing), measured_load (the
    # file's key its load was measured from, the file keeping no asked load; None)
    RUN_LEVEL_SIDE = "run_level_side"
    RUN_LEVEL_NO_INTERVAL = "run_level_no_interval"  # at `load`: a, b (runs a side), needed (runs a side for one)
    # the error gate applied to each run's own counts: max_error_rate, runs (every run, both sides), counted (those
    # whose files state completed and failed requests; the rest cannot fail it)
    RUN_LEVEL_ERROR_GATE = "run_level_error_gate"
    # one arm picked by --a-row / --b-row (subject "A" or "B") had rows at loads the other has none at: loads (their
    # labels), left out
    RUN_LEVEL_ROWS_UNMATCHED = "run_level_rows_unmatched"
    # --- why acceptance is unknown, a look's open comparisons, the plan's warnings, the methods table's reasons (their
    # words: report/words/: reasons.py, methods.py) ---
    # Why a window's acceptance is unknown or shows no speculation (servers.acceptance.acceptance_with_reason): an A/B
    # repeat's ACCEPTANCE_UNKNOWN `why`, bench summary.json's server.spec_decode_note
    NO_DRAFTED_TOKENS = "no_drafted_tokens"  # source (the acceptance source whose counts show no drafted token)
    NO_SPEC_METRICS = "no_spec_metrics"  # prefixes (the engines' metric prefixes looked for, none exposed)
    COUNTER_WENT_BACKWARDS = "counter_went_backwards"  # counter, before, after (None: a per-position counter)
    COUNTERS_INCONSISTENT = "counters_inconsistent"  # accepted, drafted (the counters), accepted_delta, drafted_delta
    COUNTERS_DID_NOT_MOVE = "counters_did_not_move"  # engine (whose spec_decode counters saw no speculative step)
    GAUGES_OUT_OF_RANGE = "gauges_out_of_range"  # length_gauge, rate_gauge, length (mean over ranks), rates
    GAUGE_NO_STEPS = "gauge_no_steps"  # length_gauge, length
    METRICS_UNREAD = "metrics_unread"  # bench: how (absent: no /metrics | disabled | after: unread after the run)
    # A look of adaptive repeats (commands.run.looks): a TPOT comparison still open (inputs.json's looks[].undecided):
    # candidate, at (the load), decision, speedup, low, high (its interval), margin
    LOOK_OPEN = "look_open"
    LOOK_STILL_OPEN = "look_still_open"  # repeat, open (the first LOOK_OPEN records): the line said after a look
    # The plan's warnings, said before the run (RunPlan.notes, describe_plan, the search's size)
    # methods (speculation.method names), options_of (entries' labels), why (two_url | whole_command | no_command |
    # not_askable | unreadable | options_unreadable), engine, release ("" unknown), problem (the engine's reader's)
    METHODS_UNCHECKED = "methods_unchecked"
    FEW_GROUPS = "few_groups"  # at, n, what (prompts | conversations), groups, size (sent together), min_groups
    SEARCH_FEW_PROMPTS = "search_few_prompts"  # high (the search's highest load), needed, have (prompts)
    # Why a method can or cannot run here (`speculab methods`' MethodRow.why; init's commented entries): `name` is a
    # checkpoint directory's, `head` a head kind (eagle3 | eagle | medusa | mlp_speculator | dflash | dspark),
    # `engine_name` the engine's own name for itself (an adapter's HeadsFromTarget.name)
    METHOD_FROM_PROMPT = "method_from_prompt"  # gpu (a GPU implementation)
    METHOD_NEEDS_DRAFT = "method_needs_draft"  # no --draft given
    METHOD_DRAFT_IS_HEAD = "method_draft_is_head"  # name, head: a head given as --draft
    METHOD_DRAFT_NEEDS_TARGET = "method_draft_needs_target"  # no --model to compare the draft's vocabulary with
    # name (the draft's), engine, accepts (the engine's own rule for a prefix vocabulary; None: it needs equal ones),
    # vocab {kind (identical | prefix | mapping | different | unknown), target_tokens, draft_tokens, shared, same_id}
    METHOD_DRAFT_VOCAB = "method_draft_vocab"
    METHOD_NEEDS_HEAD = "method_needs_head"  # head: no --head given
    METHOD_NOT_A_HEAD = "method_not_a_head"  # name, architecture
    METHOD_OTHER_HEAD = "method_other_head"  # name, head (the kind it is)
    METHOD_HEAD_NEEDS_TARGET = "method_head_needs_target"  # no --model to match the head against
    METHOD_HEAD_OTHER_BASE = "method_head_other_base"  # name, base_model, target
    METHOD_HEAD_MISMATCH = "method_head_mismatch"  # name, key (hidden_size | vocab_size), head_value, target_value
    METHOD_HEAD_MATCHES = "method_head_matches"  # name, hidden_size, base_model (None), heads, heads_key (None)
    METHOD_DSPARK_IN_TARGET = "method_dspark_in_target"  # name (the target's)
    METHOD_HEADS_NO_BASE = "method_heads_no_base"  # name, engine_name
    # name, head, base_model, k_flag, heads, heads_key (None: unsaid), plain (the baseline's plain flags)
    METHOD_HEADS_IN_TARGET = "method_heads_in_target"
    METHOD_HEAD_SERVED_ONLY = "method_head_served_only"  # engine_name, head, name, model_flag
    METHOD_HEAD_NOT_SHIPPED = "method_head_not_shipped"  # engine_name, head, key (what the checkpoint would say)
    METHOD_NGRAM_BESIDE_HEADS = "method_ngram_beside_heads"  # name, head, engine_name, k_flag, gpu
    METHOD_MTP_NEEDS_TARGET = "method_mtp_needs_target"  # no --model to read MTP layers from
    METHOD_NO_MTP = "method_no_mtp"  # name
    METHOD_MTP_OTHER_FAMILY = "method_mtp_other_family"  # family, model_type
    METHOD_MTP = "method_mtp"  # name, layers, key, model_type
    METHOD_CUSTOM_CLASS = "method_custom_class"  # a proposer class of the user's own
    METHOD_EXTRACTS_STATES = "method_extracts_states"  # extract_hidden_states drafts nothing
    METHOD_NEEDS_UNKNOWN = "method_needs_unknown"  # method, engine
    METHOD_UNAVAILABLE = "method_unavailable"  # method, why (the engine reader's words: this install cannot start it)
    # The single-change check's note (`ChangeCheck.note`, `CandidateReport.change_note`, CHANGE_UNVERIFIED's `note`)
    # differs (what differs beyond speculation, each as the command diff or the environment says it; []: the commands
    # are identical), allowed (run anyway because of --allow-extra-diff)
    CHANGE_NOT_SPECULATION = "change_not_speculation"
    # why the change could not be checked: engine_other (its speculation flags unknown) | two_url (both servers already
    # running) | separate_bench_runs | separate_runs (compare of two bench runs / of other tools' runs, neither server
    # said what it runs) | not_recorded (the inputs hold no comparison for the candidate)
    CHANGE_NOT_CHECKED = "change_not_checked"
    CHANGE_SAID = "change_said"  # checked from what both servers said they run (/version server_args), not commands
    NOTE = "note"  # words a note or an older file wrote: text


@dataclass(frozen=True, slots=True)
class ReportWarning:
    """One warning: its kind, the arm(s) it is about (labels; "" for the whole run), the load's label ("" for none),
    and the numbers and names its sentence needs (fractions as fractions, seconds as seconds)."""

    kind: WarningKind
    subject: str = ""
    load: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_text(cls, text: str) -> ReportWarning:
        """A warning saved as its sentence (notes; a summary.json from before warnings were records)."""
        return cls(WarningKind.NOTE, fields={"text": text})

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | str) -> ReportWarning:
        """A record as `to_dict` wrote it, or a sentence an older file saved in its place (kept as a note)."""
        if isinstance(d, str):
            return cls.from_text(d)
        return cls(WarningKind(d["kind"]), d.get("subject", ""), d.get("load", ""), dict(d.get("fields") or {}))

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data, the shape the A/B summary.json writes (without its `text`)."""
        return {"kind": self.kind.value, "subject": self.subject, "load": self.load, "fields": dict(self.fields)}

    def key(self) -> tuple[Any, ...]:
        """What makes two warnings the same warning (records holding a mapping are not hashable)."""
        return (self.kind, self.subject, self.load, tuple(sorted((k, repr(v)) for k, v in self.fields.items())))


class FindingKind(str, Enum):
    """What `speculab diagnose` found to cost latency, a closed set like `WarningKind`: a finding is this kind, the
    seconds it explains and the numbers its title, evidence and next step are made from when rendering
    (`speculab.report.words.finding_words`)."""

    DECODE = "decode"  # generation after the first token: at, e2e_s, decode_s, decode_share, tpot_s, output_tokens
    PREFILL = "prefill"  # long prompts: the fit (overhead_s, s_per_token, tokens_per_s, r2), prompt_tokens,
    # prefill_s (of such a prompt), prefix_caching (True | False | None: the next step depends on it)
    QUEUEING = "queueing"  # load adds TTFT: the queueing check's numbers (`queueing` in diagnosis.json)
    COLD_START = "cold_start"  # the cold-start check's numbers (`cold_start` in diagnosis.json)


# The kinds that say acceptance cannot be the user's: the report says them first, and the recommendation chooses no
# candidate they are about
ACCEPTANCE_VALIDITY = frozenset(
    {
        WarningKind.ACCEPTANCE_SYNTHETIC_PROMPTS,
        WarningKind.ACCEPTANCE_IGNORE_EOS,
        WarningKind.ACCEPTANCE_FORCED,
        WarningKind.ACCEPTANCE_SHORT_OUTPUTS,
    }
)


def distinct(warnings: Iterable[ReportWarning]) -> list[ReportWarning]:
    """Each warning once, in first-seen order."""
    seen: dict[tuple[Any, ...], ReportWarning] = {}
    for w in warnings:
        seen.setdefault(w.key(), w)
    return list(seen.values())
