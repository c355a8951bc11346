"""Terminal summaries (rich). Reads summary dicts; converts seconds to milliseconds for display only.

Bench part: one latency table, then counts, throughput, server-side acceptance and warnings. Anything that
came from the server (error messages, model names) is escaped before rendering.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from speculab.harness.records import FORCED
from speculab.harness.results.warnings import ACCEPTANCE_VALIDITY, ReportWarning
from speculab.harness.verdict.model import E2E, ITL, TPOT, TTFT
from speculab.report.formatting import MISSING, ms, num
from speculab.report.phrases import reason_text, warning_lines, warning_text

# (label, distribution): the figures by their rows, beside distributions that are no figure (gaps, queue time)
_LATENCY_ROWS = (
    (TTFT.label, TTFT.name),
    (TPOT.label, TPOT.name),
    (f"{ITL.label} (per token)", ITL.name),  # pooled over every token here, not a request's mean as compared
    ("chunk gap", "chunk_gap_s"),
    (E2E.label, E2E.name),
    ("client queue", "queue_s"),
)


def ms_cell(v: Any) -> str:
    """Seconds as a millisecond table cell (the table's title carries the unit)."""
    return ms(v, unit="")


def bench_table(summary: dict[str, Any]) -> Table:
    """Latency distributions in milliseconds, one row per metric."""
    t = Table(title="latency (ms)", title_justify="left", show_edge=False, pad_edge=False)
    t.add_column("metric")
    for col in ("n", "mean", "p50", "p90", "p99", "max"):
        t.add_column(col, justify="right")
    metrics = summary.get("metrics", {})
    for label, key in _LATENCY_ROWS:
        d = metrics.get(key) or {}
        t.add_row(label, str(d.get("n", 0)), *(ms_cell(d.get(c)) for c in ("mean", "p50", "p90", "p99", "max")))
    return t


def _count_lines(c: dict[str, Any]) -> list[Text]:
    """The requests line (sent, ok, error by category, warmup, cancelled), an example per error, skipped turns."""
    errs = ", ".join(f"{escape(k)} {v}" for k, v in c.get("errors_by_category", {}).items())
    err_txt = f"[red]error {c['error']}[/] ({errs})" if c["error"] else "error 0"
    # cancelled requests (Ctrl-C) are in no count: said apart, never as errors (docs/bench.md)
    cancelled = f", cancelled {c['cancelled']}" if c.get("cancelled") else ""
    warm = c.get("warmup", 0)
    lines = [Text.from_markup(f"requests  sent {c['sent']}  ok {c['ok']}  {err_txt}  (warmup {warm}{cancelled})")]
    lines += [Text(f"  e.g. {cat}: {msg}", style="dim") for cat, msg in c.get("error_examples", {}).items()]
    if c.get("skipped_turns"):
        lines.append(Text(f"  {c['skipped_turns']} conversation turns not sent: an earlier turn of theirs failed"))
    return lines


def _speculation(sd: dict[str, Any]) -> Text:
    """`server.spec_decode` in one line: rate, length, per position (unconditional, then conditional), source."""
    pos = " ".join(f"{p:.2f}" for p in sd.get("per_position") or [])
    # a summary before the canon has no conditional rates: nothing is shown for them
    cond = " ".join(num(c, ".2f") for c in sd.get("conditional_per_position") or [])
    forced = " (forced, not measured)" if sd.get("provenance") == FORCED else ""
    return Text(
        f"speculation{forced} acceptance rate {num(sd.get('acceptance_rate'), '.3f')}"
        f"  mean acceptance length {num(sd.get('acceptance_length'), '.3f')}"
        + (f"  per position {pos}" if pos else "")
        + (f"  conditional per position {cond}" if cond else "")
        + f"  ({sd.get('source', '')})"
    )


def bench_renderable(summary: dict[str, Any], run_dir: Path | None = None) -> Group:
    c, th, m = summary["counts"], summary["throughput"], summary["metrics"]
    tpc = m.get("tokens_per_chunk") or {}
    parts: list[Any] = []
    run = summary.get("run", {})
    head = f"{escape(str(run.get('model', '')))} · {run.get('api', '')} · workload {escape(str(run.get('workload')))}"
    parts.append(Text.from_markup(f"[bold]speculab bench[/] {head}"))
    # why its acceptance is not the user's traffic's, before any number that rests on it
    records = [ReportWarning.from_dict(w) for w in summary.get("warnings", [])]
    first = [w for w in records if w.kind in ACCEPTANCE_VALIDITY]
    parts.extend(Text(line, style="bold yellow") for line in warning_lines(first))
    parts.append(bench_table(summary))
    parts.extend(_count_lines(c))
    sources = ", ".join(f"{k} {v}" for k, v in summary.get("tokens", {}).get("count_sources", {}).items())
    parts.append(
        Text(
            f"tokens    per chunk mean {num(tpc.get('mean'))} p50 {num(tpc.get('p50'), '.1f')}"
            f"  output total {summary.get('tokens', {}).get('output_total', 0):,}  (counts: {sources or '-'})"
        )
    )
    load = summary.get("load", {})
    rate = ""
    if load.get("mode") == "trace":
        rate = f"  trace replay ×{num(load.get('trace_speed'))}"
        if load.get("scheduled_rate_rps") is not None:
            rate += f" (schedule {num(load['scheduled_rate_rps'])} req/s)"
        rate += f", achieved {num(load.get('achieved_rate_rps'))}"
    elif load.get("requested_rate_rps"):
        rate = f"  offered {num(load['requested_rate_rps'])} req/s"
        if load.get("scheduled_rate_rps") is not None:
            rate += f" (schedule {num(load['scheduled_rate_rps'])})"
        rate += f", achieved {num(load.get('achieved_rate_rps'))}"
    good = f"  goodput {num(th.get('goodput_rps'))} req/s" if th.get("goodput_rps") is not None else ""
    parts.append(
        Text(
            f"throughput  {num(th.get('requests_per_s'))} req/s  {num(th.get('output_tok_s'), ',.1f')} output tok/s"
            f"  {num(th.get('total_tok_s'), ',.1f')} total tok/s  over {num(th.get('duration_s'))} s{good}{rate}"
        )
    )
    client = summary.get("client")
    if client:
        lag = client.get("loop_lag_s") or {}
        p99 = lag.get("p99")
        lag_txt = f"{p99 * 1e3:.1f} ms" if isinstance(p99, (int, float)) else MISSING
        share = client.get("cpu_share")
        share_txt = f"{share:.0%}" if isinstance(share, (int, float)) else MISSING
        parts.append(Text(f"client    CPU {share_txt} of a core, event-loop lag p99 {lag_txt} (measured phase)"))
    server = summary.get("server") or {}
    sd = server.get("spec_decode")
    if not sd and server.get("spec_decode_note"):
        # why there is no acceptance (no counters, counters that did not move, a server restart): a record (an older
        # summary.json's sentence reads back as a note)
        why = reason_text(ReportWarning.from_dict(server["spec_decode_note"]))
        parts.append(Text(f"speculation {MISSING}  ({why})", style="dim"))
    if sd:
        parts.append(_speculation(sd))
    st = summary.get("stalls", {})
    if st.get("requests_with_stalls"):
        parts.append(
            Text(
                f"stalls    {st['requests_with_stalls']} requests had gaps > {ms_cell(st.get('threshold_s'))} ms "
                f"and > {st.get('k')}x their median gap"
            )
        )
    # records with a kind (/2), or the sentences a /1 summary saved, each kept as a note
    for w in (w for w in records if w not in first):
        parts.append(Text.from_markup(f"[yellow]warning:[/] {escape(warning_text(w))}"))
    if run_dir is not None:
        parts.append(Text(f"results in {run_dir}"))
    return Group(*parts)


def print_bench_summary(console: Console, summary: dict[str, Any], run_dir: Path | None = None) -> None:
    console.print(bench_renderable(summary, run_dir))


class BenchProgress:
    """A rich progress bar for a bench run: requests done of planned (or seconds of --duration), ok/error."""

    def __init__(self, console: Console):
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task: Any = None

    def __enter__(self) -> BenchProgress:
        self._progress.__enter__()
        self._task = self._progress.add_task("starting", total=None, detail="")
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.__exit__(*exc)  # type: ignore[arg-type]

    def update(self, p: Any) -> None:
        """Takes a `speculab.harness.load.runner.Progress`."""
        if p.warmup:
            self._progress.update(self._task, description="warmup", detail="", total=None)
            return
        if p.duration_s is not None:
            total, done = p.duration_s, min(p.elapsed_s, p.duration_s)
        else:
            total, done = p.total, p.finished
        detail = f"{p.finished} done  {p.ok} ok  {p.error} err  {p.in_flight} in flight"
        self._progress.update(self._task, description="bench", completed=done, total=total, detail=detail)
