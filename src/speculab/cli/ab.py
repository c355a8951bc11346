"""`speculab run | predict | compare | init | methods | demo | report`: their flags, each handed as one record to its
command (speculab.commands.run, predict, compare, init, methods), and the screen that shows and writes their
reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from speculab.cli.app import _max_error_rate, app
from speculab.harness.servers.adapters import askable_engines
from speculab.harness.servers.adapters.speculab import KIND as EMBEDDED_ENGINE

# --- run / compare / init / demo: the A/B lifecycle (speculab.commands.run) ----------------------------------


_ALLOW_PYTHON_HELP = "run the workload's `python` checks (they import and run the code they name); off by default"
# what --dry-run does, exactly: it sends probe requests, and in launch mode may start the baseline (issue 36)
_DRY_RUN_HELP = (
    "Print requests, launches and a duration timed by a few probe requests on the baseline (started, then stopped, "
    "when nothing answers at its URL); no run, no output written"
)


def _margin() -> Any:
    return typer.Option(None, "--margin", help="smallest change that matters, e.g. 3% (default: the run's, else 3%)")


def _guardrail_floor() -> Any:
    return typer.Option(
        None,
        "--guardrail-floor",
        help="a time guardrail's loss that holds a candidate back only above this, per request: 20ms, or "
        "ttft=20ms,e2e=50ms; 0 for the margin alone (default: the run's, else TTFT and E2E 20ms)",
    )


def _fail_on() -> Any:
    return typer.Option(
        None,
        "--fail-on",
        help="exit 5 when any headline answer is one of these, comma-separated: slower, inconclusive, equivalent, "
        "no-verdict, worse (correctness), errors (the error gate); after everything is written",
    )


def _decide_on() -> Any:
    return typer.Option(
        None,
        "--decide-on",
        help="the metric a candidate must be faster on: tpot | e2e | ttft | itl (default: the run's, else tpot)",
    )


class _Screen:
    """What `run`, `demo` and `compare` show and write, with the report package: the commands' `RunScreen` and
    `CompareScreen` (a command never renders)."""

    def __init__(self) -> None:
        self.console = Console(stderr=True, soft_wrap=True)

    def change(self, change: Any) -> None:
        from speculab.report.console.ab import print_change

        print_change(self.console, change)

    def line(self, text: Any) -> None:
        from speculab.report.phrases import warning_text

        self.console.print(text if isinstance(text, str) else warning_text(text), highlight=False)

    def progress(self) -> Any:
        from speculab.report.console.run_progress import RunProgress

        return RunProgress(self.console)

    def report(
        self, out: Path, options: Any, *, interrupted: bool = False, ship: Any = None, output: Path | None = None
    ) -> Any:
        """summary.json + report.html (+ the configuration to ship, from `ship`) from what is on disk in `out`
        (written to `output`, else to `out`), then the verdict first."""
        from speculab.report.console.ab import print_ab_report
        from speculab.report.recommendation import says_how_to_finish
        from speculab.report.render import render_run_dir
        from speculab.report.shipped import RECOMMENDED_FLAGS, RECOMMENDED_YAML

        report = render_run_dir(out, output, options, ship)
        print_ab_report(Console(soft_wrap=True), report, output or out)
        if interrupted:  # the recommendation block, when there is one, names `--resume DIR`: said once, not again
            how = (
                ""
                if says_how_to_finish(report)
                else f": the report covers the part that ran; finish it with `speculab run --resume {out}`"
            )
            self.console.print(f"[yellow]interrupted[/]{how}")
        if report.shipped is not None:
            ship_at, again = out / RECOMMENDED_FLAGS, out / RECOMMENDED_YAML
            self.console.print(f"to ship: {ship_at}  ·  re-verify: speculab run {again}", highlight=False)
        return report

    def prediction(self, prediction: Any, path: Path) -> None:
        """The prediction shown, and its page (report.html) written beside prediction.json."""
        from speculab.report.console.predict import print_prediction
        from speculab.report.html.prediction import write_prediction_html

        page = write_prediction_html(path.parent, prediction)
        print_prediction(Console(soft_wrap=True), prediction, path)
        self.console.print(f"report: {page}", highlight=False)

    def run_level(self, report: Any, out: Path | None) -> None:
        from speculab.report.console.run_level import print_run_level

        print_run_level(Console(soft_wrap=True), report, out)


def _exit_if_interrupted(outcome: Any) -> None:
    if outcome is not None and outcome.interrupted:
        raise typer.Exit(130)


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
    prediction: Path | None = typer.Option(
        None,
        "--prediction",
        help="start from `speculab predict`'s prediction.json: a search probes the predicted crossover first; fixed "
        "loads show the predicted band beside each verdict and say where a measurement fell outside it",
    ),
) -> None:
    """A/B test: the baseline vs the same server with speculation, same prompts and load; report with intervals."""
    from speculab.commands.run.run import RunFlags
    from speculab.commands.run.run import run_command as run

    flags = RunFlags(
        experiment=experiment,
        output=output,
        resume=resume,
        allow_extra_diff=allow_extra_diff,
        allow_python_checks=allow_python_checks,
        max_model_len=max_model_len,
        dry_run=dry_run,
        max_error_rate=max_error_rate,
        fail_on=fail_on,
        prediction=prediction,
    )
    _exit_if_interrupted(run(flags, _Screen()))


@app.command("predict")
def predict_command(
    experiment: Path = typer.Argument(..., help="experiment file (YAML), the one `speculab run` takes"),
    output: Path | None = typer.Option(
        None,
        "--output",
        help="directory for prediction.json and the probes' run (default speculab-runs/NAME-predict-TIME)",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="print the probes and what they cost against a full K x load sweep; run nothing"
    ),
    allow_extra_diff: bool = typer.Option(
        False, "--allow-extra-diff", help="run even if the candidate differs from the baseline in more than speculation"
    ),
    max_model_len: int | None = typer.Option(None, "--max-model-len", min=2, help="Context length (default: detected)"),
    seed: int = typer.Option(0, "--seed", help="seed of the draws behind the prediction's bands"),
    check_k: bool = typer.Option(
        False,
        "--check-k",
        help="probe each candidate's cost at a second k too (half its K), held out of the fit: checks that the step "
        "cost is linear in k",
    ),
) -> None:
    """Predict the speedup at every load and K from a few probes: acceptance on your prompts, cost at a few loads."""
    from speculab.commands.predict.predict import PredictFlags
    from speculab.commands.predict.predict import predict_command as predict

    flags = PredictFlags(experiment, output, dry_run, allow_extra_diff, max_model_len, seed, check_k)
    _exit_if_interrupted(predict(flags, _Screen()))


@app.command("compare")
def compare_command(
    a: Path = typer.Argument(..., help="the baseline: a `speculab bench` output directory or a result file"),
    b: Path | None = typer.Argument(
        None,
        help="the candidate, as A (left out: A, split into the arms by --a-row and --b-row)",
    ),
    output: Path | None = typer.Option(None, "--output", help="report directory (default: compare-A-vs-B)"),
    fmt: str | None = typer.Option(
        None,
        "--format",
        help="speculab | vllm | vllm-sweep | guidellm | aiperf | sglang | llmperf | inference-perf | genai-perf: read "
        "both as this (default: detected, docs/imports.md)",
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
    guardrail_floor: str | None = _guardrail_floor(),
    fail_on: str | None = _fail_on(),
    a_row: str | None = typer.Option(
        None,
        "--a-row",
        help="A's rows of a file of several configurations: a row's number or FIELD=VALUE[,...], e.g. draft=none",
    ),
    b_row: str | None = typer.Option(None, "--b-row", help="B's rows, as --a-row; e.g. spec_decoding=mtp"),
) -> None:
    """Pair two results per prompt (A = baseline, B = candidate) and write the A/B report: `speculab bench` output
    directories, vLLM `bench serve --save-result --save-detailed` files or `bench sweep serve` settings, GuideLLM
    benchmarks.json, AIPerf profile_export.jsonl, SGLang bench_serving JSONL or LLMPerf *_individual_responses.json
    files, any kind on either side (docs/imports.md). Runs whose prompts differ are compared unpaired, and the report
    says so; summary-only files (no per-request data) are compared run by run."""
    from speculab.commands.compare.command import CompareFlags
    from speculab.commands.compare.command import compare_command as compare

    flags = CompareFlags(
        a=a,
        b=b,
        output=output,
        fmt=fmt,
        benchmark=benchmark,
        unpaired=unpaired,
        names=names,
        allow_different_models=allow_different_models,
        allow_python_checks=allow_python_checks,
        max_error_rate=max_error_rate,
        margin=margin,
        decide_on=decide_on,
        fail_on=fail_on,
        guardrail_floor=guardrail_floor,
        a_row=a_row,
        b_row=b_row,
    )
    compare(flags, _Screen())


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
    from speculab.report.phrases import reason_text

    paths = StarterPaths(model, draft, head)
    look, size = write_starter(url, output, reason_text, force=force, target_s=minutes * 60, paths=paths)
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

    flags = MethodsFlags(url=url, engine=engine, command=command, model=model, draft=draft, head=head)
    table = methods_table(flags)
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
    from speculab.commands.run.run import DemoFlags
    from speculab.commands.run.run import demo_command as demo

    flags = DemoFlags(output=output, quick=quick, model=model, draft=draft, eagle=eagle, engine=engine)
    _exit_if_interrupted(demo(flags, _Screen()))


# --- report: re-render report.html + summary.json of a saved A/B run (speculab run / demo), partial runs too ----


@app.command("report")
def report_command(
    directory: Path = typer.Argument(..., help="output directory of `speculab run`, `demo` or `compare`"),
    output: Path | None = typer.Option(None, "--output", help="write report.html and summary.json here instead"),
    seed: int = typer.Option(0, "--seed", min=0, help="bootstrap seed (the same seed gives the same intervals)"),
    allow_python_checks: bool = typer.Option(False, "--allow-python-checks", help=_ALLOW_PYTHON_HELP),
    margin: str | None = _margin(),
    decide_on: str | None = _decide_on(),
    guardrail_floor: str | None = _guardrail_floor(),
    fail_on: str | None = _fail_on(),
) -> None:
    """Re-render report.html and summary.json from the inputs saved in DIR, and print the verdict."""
    from speculab.commands.compare.command import ReportFlags
    from speculab.commands.compare.command import report_command as report

    flags = ReportFlags(
        directory=directory,
        output=output,
        seed=seed,
        allow_python_checks=allow_python_checks,
        margin=margin,
        decide_on=decide_on,
        fail_on=fail_on,
        guardrail_floor=guardrail_floor,
    )
    report(flags, _Screen())
