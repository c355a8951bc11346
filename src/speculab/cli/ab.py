"""`speculab run | compare | init | methods | demo | report`: the A/B lifecycle (speculab.commands.run), what
can run on a server (speculab.harness.servers.methods), and the report."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from speculab.cli import _check_error_gate, _max_error_rate, app
from speculab.errors import EndpointError, UserError
from speculab.harness.servers.adapters import askable_engines
from speculab.harness.servers.adapters.speculab import KIND as EMBEDDED_ENGINE

# --- run / compare / init / demo: the A/B lifecycle (speculab.commands.run) ----------------------------------


def _default_run_dir(stem: str) -> Path:
    from datetime import datetime

    return Path("speculab-runs") / f"{stem}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


_ALLOW_PYTHON_HELP = "run the workload's `python` checks (they import and run the code they name); off by default"
# what --dry-run does, exactly: it sends probe requests, and in launch mode may start the baseline (issue 36)
_DRY_RUN_HELP = (
    "Print requests, launches and a duration timed by a few probe requests on the baseline (started, then stopped, "
    "when nothing answers at its URL); no run, no output written"
)


def _margin() -> Any:
    return typer.Option(None, "--margin", help="smallest change that matters, e.g. 3% (default: the run's, else 3%)")


def _fail_on() -> Any:
    return typer.Option(
        None,
        "--fail-on",
        help="exit 5 when any headline answer is one of these, comma-separated: slower, inconclusive, equivalent, "
        "no-verdict, worse (correctness), errors (the error gate); after everything is written",
    )


def _fail_on_answers(text: str | None) -> tuple[str, ...]:
    """--fail-on's answers, checked before anything runs (a misspelt answer must not let a CI gate pass)."""
    from speculab.errors import did_you_mean
    from speculab.harness.verdict.build import FAIL_ON_ANSWERS

    asked = tuple(a.strip() for a in (text or "").split(",") if a.strip())
    for a in asked:
        if a not in FAIL_ON_ANSWERS:
            choices = ", ".join(FAIL_ON_ANSWERS)
            raise UserError(f"--fail-on: no answer {a!r} (one or more of {choices}){did_you_mean(a, FAIL_ON_ANSWERS)}")
    if text is not None and not asked:
        raise UserError(f"--fail-on: name one or more of {', '.join(FAIL_ON_ANSWERS)}, comma-separated")
    return asked


def _check_fail_on(report: Any, asked: tuple[str, ...], out: Path) -> None:
    """Exit 5 with one line naming the answers that matched (summary.json and report.html were written before)."""
    from speculab.harness.verdict.build import headline_answers

    _raise_matched(headline_answers(report), asked, out)


def _raise_matched(answers: Any, asked: tuple[str, ...], out: Path) -> None:
    """The one --fail-on line, for an A/B run's headline answers and a run-level comparison's alike."""
    from speculab.errors import AnswerMatched

    hits = [f"{where}: {answer}" for answer, where in answers if answer in asked]
    if hits:
        more = f" and {len(hits) - 3} more" if len(hits) > 3 else ""
        raise AnswerMatched(f"--fail-on {','.join(asked)}: {'; '.join(hits[:3])}{more}; the report is in {out}")


def _decide_on() -> Any:
    return typer.Option(
        None,
        "--decide-on",
        help="the metric a candidate must be faster on: tpot | e2e | ttft | itl (default: the run's, else tpot)",
    )


def _report_options(
    *,
    allow_python_checks: bool,
    max_error_rate: float | None = None,
    seed: int = 0,
    margin: str | None = None,
    decide_on: str | None = None,
) -> Any:
    from speculab.config.experiment import decide_on_metric, margins
    from speculab.harness.verdict.correctness import CorrectnessOptions
    from speculab.harness.verdict.model import ReportOptions

    try:
        given = margins(margin) if margin is not None else None
    except ValueError as e:
        raise UserError(f"--margin: {e}") from None
    try:
        decide = decide_on_metric(decide_on) if decide_on is not None else None
    except ValueError as e:
        raise UserError(f"--decide-on: {e}") from None
    correctness = CorrectnessOptions(allow_python_checks=allow_python_checks)
    rate = {} if max_error_rate is None else {"max_error_rate": max_error_rate}
    return ReportOptions(seed=seed, correctness=correctness, margin=given, decide_on=decide, **rate)


def _render(console: Console, out: Path, *, interrupted: bool, options: Any = None, ship: Any = None) -> Any:
    """summary.json + report.html (+ the configuration to ship, from `ship`) from what is on disk, then the verdict
    first."""
    from speculab.report.console.ab import print_ab_report
    from speculab.report.recommendation import says_how_to_finish
    from speculab.report.render import render_run_dir
    from speculab.report.shipped import RECOMMENDED_FLAGS, RECOMMENDED_YAML

    report = render_run_dir(out, None, options, ship)
    print_ab_report(Console(soft_wrap=True), report, out)
    if interrupted:  # the recommendation block, when there is one, names `--resume DIR`: said once, not again here
        how = (
            ""
            if says_how_to_finish(report)
            else f": the report covers the part that ran; finish it with `speculab run --resume {out}`"
        )
        console.print(f"[yellow]interrupted[/]{how}")
    if report.shipped is not None:
        ship_at, again = out / RECOMMENDED_FLAGS, out / RECOMMENDED_YAML
        console.print(f"to ship: {ship_at}  ·  re-verify: speculab run {again}", highlight=False)
    return report


def _run_plan(
    console: Console,
    plan: Any,
    out: Path,
    options: Any = None,
    resume: bool = False,
    ship: Any = None,
    fail_on: tuple[str, ...] = (),
) -> None:
    """Run the plan, then render its report once; `ship` adds the configuration to ship to a run that finished."""
    options = options if options is not None else _report_options(allow_python_checks=False)
    from speculab.commands.run.plan import describe_plan
    from speculab.commands.run.preflight import size_lines
    from speculab.commands.run.run import run_plan_interruptible
    from speculab.report.console.run_progress import RunProgress

    for line in [*describe_plan(plan), *size_lines(plan)]:
        console.print(line, highlight=False)
    console.print(f"results: {out}", highlight=False)
    try:
        outcome = run_plan_interruptible(plan, out, reporter=RunProgress(console), resume=resume)
    except EndpointError:
        # e.g. a launched server exited mid-run: report what finished before the one-line error (exit 3)
        if (out / "inputs.json").is_file():
            with contextlib.suppress(Exception):
                _render(console, out, interrupted=True, options=options)
        raise
    done = not outcome.interrupted
    report = _render(console, out, interrupted=outcome.interrupted, options=options, ship=ship if done else None)
    if outcome.interrupted:
        raise typer.Exit(130)
    _check_ab_error_gate(report, options, out, fail_on)


def _check_ab_error_gate(report: Any, options: Any, out: Path, fail_on: tuple[str, ...] = ()) -> None:
    from speculab.harness.verdict.build import report_error_gate

    _check_fail_on(report, fail_on, out)  # first: the user named the answers that fail their gate, errors too
    _check_error_gate(report_error_gate(report, options.max_error_rate), out)


@app.command("run")
def run_command(
    experiment: Path | None = typer.Argument(None, help="experiment file (YAML; `speculab init --url URL` writes one)"),
    output: Path | None = typer.Option(None, "--output", help="results directory (default speculab-runs/NAME-TIME)"),
    resume: Path | None = typer.Option(None, "--resume", help="finish the killed or interrupted run in DIR"),
    allow_extra_diff: bool = typer.Option(
        False, "--allow-extra-diff", help="run even if the candidate differs from the baseline in more than speculation"
    ),
    allow_python_checks: bool = typer.Option(False, "--allow-python-checks", help=_ALLOW_PYTHON_HELP),
    max_model_len: int | None = typer.Option(None, "--max-model-len", min=2, help="Context length (default: detected)"),
    dry_run: bool = typer.Option(False, "--dry-run", help=_DRY_RUN_HELP),
    max_error_rate: float = _max_error_rate(),
    fail_on: str | None = _fail_on(),
) -> None:
    """A/B test: the baseline vs the same server with speculation, same prompts and load; report with intervals."""
    from speculab.commands.run.plan import plan_experiment
    from speculab.commands.run.resume import resume_paths
    from speculab.config import load_experiment
    from speculab.harness.results.ab_dir import check_ab_output_dir
    from speculab.report.console.ab import print_change

    console = Console(stderr=True, soft_wrap=True)
    asked = _fail_on_answers(fail_on)
    experiment, output = resume_paths(resume, experiment, output)  # --resume DIR: DIR and the file it ran
    exp = load_experiment(experiment)
    source_text = experiment.read_text(encoding="utf-8")  # now: recommended.yaml is this file, whatever happens to it
    out = output or _default_run_dir(experiment.stem)
    if resume is None and not dry_run:
        check_ab_output_dir(out)
    plan = plan_experiment(
        exp,
        allow_extra_diff=allow_extra_diff,
        on_change=lambda c: print_change(console, c),
        max_model_len=max_model_len,
    )
    if dry_run:  # only probe requests are sent (docs/experiment.md, "Before a run")
        from speculab.commands.run.preflight import dry_run_interruptible, dry_run_lines
        from speculab.report.phrases import warning_text

        for line in dry_run_lines(dry_run_interruptible(plan)):
            console.print(line if isinstance(line, str) else warning_text(line), highlight=False)
        return
    options = _report_options(
        allow_python_checks=allow_python_checks or exp.python_checks, max_error_rate=max_error_rate
    )

    def ship(report: Any) -> Any:  # the config to ship, written beside the report (docs/recommendation.md)
        from dataclasses import replace

        from speculab.commands.run.recommended import shipped_config

        return replace(report, shipped=shipped_config(report, exp, source_text))

    _run_plan(console, plan, out, options, resume=resume is not None, ship=ship, fail_on=asked)


@app.command("compare")
def compare_command(
    a: Path = typer.Argument(..., help="the baseline: a `speculab bench` output directory or a result file"),
    b: Path = typer.Argument(..., help="the candidate: a `speculab bench` output directory or a result file"),
    output: Path | None = typer.Option(None, "--output", help="report directory (default: compare-A-vs-B)"),
    fmt: str | None = typer.Option(
        None,
        "--format",
        help="speculab | vllm | vllm-sweep | guidellm | aiperf | sglang | llmperf: read both as this (default: "
        "detected; a directory of vLLM run=N.json files is vllm-sweep, any other speculab's)",
    ),
    benchmark: int | None = typer.Option(
        None,
        "--benchmark",
        min=0,
        help="one benchmark of a GuideLLM sweep or one run (line) of an SGLang file, 0-based (default: two files of "
        "several loads are compared load by load)",
    ),
    unpaired: bool = typer.Option(
        False,
        "--unpaired",
        help="compare the two runs as two samples even where their prompts pair (default: unpaired only when they "
        "cannot be paired per prompt)",
    ),
    names: str | None = typer.Option(
        None,
        "--names",
        help="the two arms' names, A first, e.g. vllm,vllm-eagle (default: the shortest parts of the two paths that "
        "tell them apart)",
    ),
    allow_different_models: bool = typer.Option(
        False,
        "--allow-different-models",
        help="compare two results that name different target models (refused by default: not an A/B of speculation)",
    ),
    allow_python_checks: bool = typer.Option(False, "--allow-python-checks", help=_ALLOW_PYTHON_HELP),
    max_error_rate: float = _max_error_rate(),
    margin: str | None = _margin(),
    decide_on: str | None = _decide_on(),
    fail_on: str | None = _fail_on(),
) -> None:
    """Pair two results per prompt (A = baseline, B = candidate) and write the A/B report: `speculab bench` output
    directories, vLLM `bench serve --save-result --save-detailed` files or `bench sweep serve` settings, GuideLLM
    benchmarks.json, AIPerf profile_export.jsonl, SGLang bench_serving JSONL or LLMPerf *_individual_responses.json
    files, any kind on either side (docs/imports.md). Runs whose prompts differ are compared unpaired, and the report
    says so; summary-only files (no per-request data) are compared run by run."""
    from speculab.commands.compare.arms import arm_names, output_dir, parse_names
    from speculab.commands.compare.pairing import inputs_from_results
    from speculab.harness.imports.registry import result_path
    from speculab.harness.results.ab_dir import check_ab_output_dir, save_inputs

    console = Console(stderr=True, soft_wrap=True)
    asked = _fail_on_answers(fail_on)
    given = parse_names(names) if names is not None else None
    # summary-only files (no request on a side): the run is the unit; asked before a tool's directory is narrowed to
    # its one result, since a directory of summaries is a side's several runs
    picked = benchmark is not None or unpaired
    gate = _RunLevelGate(asked, decide_on, max_error_rate)
    if fmt is None and _compare_run_level(a, b, output, margin, picked, given, allow_different_models, gate):
        return
    a, b = result_path(a, fmt), result_path(b, fmt)  # a tool's output directory: the one result in it
    arms = arm_names(a, b, given)
    inputs = inputs_from_results(
        a, b, fmt, benchmark, unpaired, names=arms, allow_different_models=allow_different_models
    )
    out = output or output_dir(arms)
    check_ab_output_dir(out)
    save_inputs(out, inputs)
    options = _report_options(
        allow_python_checks=allow_python_checks, max_error_rate=max_error_rate, margin=margin, decide_on=decide_on
    )
    _check_ab_error_gate(_render(console, out, interrupted=False, options=options), options, out, asked)


def _compare_run_level(
    a: Path,
    b: Path,
    output: Path | None,
    margin: str | None,
    picked: bool,
    names: tuple[str, str] | None,
    allow_different_models: bool,
    gate: _RunLevelGate,
) -> bool:
    """`compare` of summary-only files (no per-request data on a side): compared at the run level and written to
    OUTPUT/summary.json (default: compare-A-vs-B, as the arms are named); False where both keep per-request data
    (the per-prompt A/B). `picked`: --benchmark or --unpaired was given, which choose among requests: refused here."""
    from speculab.commands.compare.arms import arm_names, output_dir
    from speculab.commands.compare.run_level import compare_summaries, save, summaries_of
    from speculab.config.experiment import margins
    from speculab.report.console.run_level import print_run_level

    runs = summaries_of(a, b)
    if runs is None:
        return False
    if picked:
        raise UserError(
            "--benchmark / --unpaired: summary-only files are compared run by run at every load, with no requests to "
            "pick or pair; leave them out"
        )
    try:
        given = margins(margin) if margin is not None else {}
    except ValueError as e:
        raise UserError(f"--margin: {e}") from None
    arms = arm_names(a, b, names)
    report = compare_summaries(a, b, runs, given, names=arms, allow_different_models=allow_different_models)
    out = output or output_dir(arms)
    save(out, report)
    print_run_level(Console(soft_wrap=True), report, out)
    gate.check(report, out)
    return True


@dataclass(frozen=True)
class _RunLevelGate:
    """--fail-on / --decide-on / --max-error-rate for a run-level comparison (summary-only files): the deciding
    metric's median figure at each load and each run's lost requests are its answers; correctness ("worse") is not in
    such files, so asking for it is refused rather than passing a gate that could never fail."""

    asked: tuple[str, ...]
    decide_on: str | None
    max_error_rate: float

    def __post_init__(self) -> None:  # a misspelt --decide-on is one line before anything is written
        from speculab.config.experiment import decide_on_metric

        try:
            decide_on_metric(self.decide_on) if self.decide_on is not None else None
        except ValueError as e:
            raise UserError(f"--decide-on: {e}") from None

    def check(self, report: Any, out: Path) -> None:
        from speculab.config.experiment import DEFAULT_DECIDE_ON, decide_on_metric
        from speculab.harness.verdict.run_level import RUN_LEVEL_UNANSWERABLE, run_level_answers

        if not self.asked:
            return
        if cannot := [a for a in self.asked if a in RUN_LEVEL_UNANSWERABLE]:
            raise UserError(
                f"--fail-on {','.join(cannot)}: summary-only files hold no outputs, so correctness cannot be checked "
                "run by run; leave it out, or compare files with per-request outputs"
            )
        deciding = decide_on_metric(self.decide_on) if self.decide_on is not None else DEFAULT_DECIDE_ON
        _raise_matched(run_level_answers(report, deciding, self.max_error_rate), self.asked, out)


@app.command("init")
def init_command(
    url: str = typer.Option(..., "--url", help="base URL of the running server to look at, e.g. http://host:8000"),
    output: Path = typer.Option(Path("experiment.yaml"), "--output", help="file to write"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing file"),
    minutes: float = typer.Option(10.0, "--minutes", min=0.5, help="size the run to about this long on this server"),
    model: str | None = typer.Option(None, "--model", help="the served model's checkpoint directory (MTP layers)"),
    draft: str | None = typer.Option(None, "--draft", help="a draft model's directory (its vocabulary is checked)"),
    head: str | None = typer.Option(None, "--head", help="an EAGLE / EAGLE-3 / Medusa head's directory"),
) -> None:
    """Detect the engine behind URL and write a commented starter experiment file with the methods that can run."""
    from speculab.commands.init.starter import StarterPaths, write_starter

    paths = StarterPaths(model, draft, head)
    look, size = write_starter(url, output, force=force, target_s=minutes * 60, paths=paths)
    console = Console(stderr=True)
    console.print(f"engine: [bold]{look.engine}[/]; wrote {output}", highlight=False)
    if size.estimate_s is not None:
        console.print(f"about {size.estimate_s / 60:.0f} min here ({size.num_prompts} prompts)", highlight=False)
    console.print(f"next: edit it (see the comments), then `speculab run {output}`", highlight=False)


@app.command("methods")
def methods_command(
    url: str | None = typer.Option(None, "--url", help="base URL of a running server (its engine is detected)"),
    engine: str | None = typer.Option(None, "--engine", help=" | ".join(askable_engines())),
    command: str | None = typer.Option(
        None, "--command", help="the engine's launch command or executable, e.g. 'vllm serve' or a llama-server path"
    ),
    model: str | None = typer.Option(None, "--model", help="the target's local checkpoint directory"),
    draft: str | None = typer.Option(None, "--draft", help="a draft model's checkpoint directory"),
    head: str | None = typer.Option(None, "--head", help="an EAGLE / EAGLE-3 / Medusa head's directory"),
) -> None:
    """Which speculation methods can run here: read from the engine's release and the checkpoints (docs/methods.md)."""
    from speculab.commands.methods.command import MethodsFlags, methods_table
    from speculab.report.console.methods import print_methods

    table = methods_table(MethodsFlags(url, engine, command, model, draft, head))
    print_methods(Console(soft_wrap=True), table)


@app.command("demo")
def demo_command(
    output: Path | None = typer.Option(None, "--output", help="results directory (default speculab-runs/demo-TIME)"),
    quick: bool = typer.Option(
        False, "--quick", help="8 prompts of at most 48 tokens: a smoke run, too few for a verdict at concurrency 4"
    ),
    model: str = typer.Option(
        "demo", "--model", help="target model: 'demo' (shipped) or a model directory (a .gguf file for llamacpp)"
    ),
    draft: str = typer.Option(
        "demo-draft", "--draft", help="draft model: 'demo-draft', a directory (.gguf for llamacpp), or 'none'"
    ),
    eagle: str = typer.Option(
        "demo-eagle", "--eagle", help="EAGLE head (speculab's engine): 'demo-eagle', a directory, or 'none'"
    ),
    engine: str = typer.Option(
        EMBEDDED_ENGINE,
        "--engine",
        help="speculab (the embedded engine) or llamacpp (llama-server from scripts/install_llama_server.sh)",
    ),
) -> None:
    """The whole A/B job on the demo models: plain vs n-gram vs draft model vs EAGLE head (speculab or llama.cpp)."""
    from speculab.commands.run.demo import DemoConfig, demo_plan
    from speculab.harness.results.ab_dir import check_ab_output_dir
    from speculab.report.console.ab import print_change

    console = Console(stderr=True, soft_wrap=True)
    out = output or _default_run_dir("demo")
    check_ab_output_dir(out)
    none = {"none": None}
    cfg = DemoConfig(
        model=model, draft=none.get(draft, draft), eagle=none.get(eagle, eagle), engine=engine, quick=quick
    )
    plan = demo_plan(cfg)
    for change in plan.changes:
        print_change(console, change)
    _run_plan(console, plan, out)


# --- report: re-render report.html + summary.json of a saved A/B run (speculab run / demo), partial runs too ----


@app.command("report")
def report_command(
    directory: Path = typer.Argument(..., help="output directory of `speculab run`, `demo` or `compare`"),
    output: Path | None = typer.Option(None, "--output", help="write report.html and summary.json here instead"),
    seed: int = typer.Option(0, "--seed", min=0, help="bootstrap seed (the same seed gives the same intervals)"),
    allow_python_checks: bool = typer.Option(False, "--allow-python-checks", help=_ALLOW_PYTHON_HELP),
    margin: str | None = _margin(),
    decide_on: str | None = _decide_on(),
    fail_on: str | None = _fail_on(),
) -> None:
    """Re-render report.html and summary.json from the inputs saved in DIR, and print the verdict."""
    from speculab.harness.analysis.metrics import DEFAULT_MAX_ERROR_RATE
    from speculab.report.console.ab import print_ab_report
    from speculab.report.render import render_run_dir

    asked = _fail_on_answers(fail_on)
    if _report_run_level(directory, output, margin, _RunLevelGate(asked, decide_on, DEFAULT_MAX_ERROR_RATE)):
        return
    options = _report_options(allow_python_checks=allow_python_checks, seed=seed, margin=margin, decide_on=decide_on)
    report = render_run_dir(directory, output, options)
    print_ab_report(Console(soft_wrap=True), report, output or directory)
    _check_fail_on(report, asked, output or directory)


def _report_run_level(directory: Path, output: Path | None, margin: str | None, gate: _RunLevelGate) -> bool:
    """`speculab report DIR` of a run-level comparison (`compare` of summary-only files: DIR/summary.json only):
    re-printed, re-decided with --margin and written back (or to --output); False for an A/B run's directory."""
    from speculab.commands.compare.run_level import save, saved_run_level
    from speculab.config.experiment import margins
    from speculab.harness.verdict.run_level import redecide
    from speculab.report.console.run_level import print_run_level

    report = saved_run_level(directory)
    if report is None:
        return False
    if margin is not None:
        try:
            report = redecide(report, margins(margin))
        except ValueError as e:
            raise UserError(f"--margin: {e}") from None
    written = None
    if output is not None or margin is not None:
        written = save(output or directory, report, again=output is None).parent
    print_run_level(Console(soft_wrap=True), report, written)
    gate.check(report, written or directory)
    return True
