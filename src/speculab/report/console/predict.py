"""`speculab predict` in the terminal: per candidate, the predicted speedup at a few loads for each k with its band,
the crossover, the best k per load band, the cost model's fit, and what the probes cost against a sweep."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from speculab.harness.verdict.model import Crossover, KPrediction, Prediction, WidthCheck
from speculab.report.formatting import MISSING
from speculab.report.phrases import positions_phrase, warning_text

SHOWN_LOADS = 5  # columns: the curve's loads are a fine grid; the table shows this many, evenly spread


def crossover_text(x: Crossover, low: float, high: float) -> str:
    """'crosses at 11.8 [9.4–14.9]', or 'beyond 64 [40–>64]' (faster throughout the range), or 'below 1 [...]';
    an interval end beyond the range says so."""
    lo = f"{x.low:.3g}" if x.low is not None else f"<{low:g}"
    hi = f"{x.high:.3g}" if x.high is not None else f">{high:g}"
    if x.estimate is not None:
        return f"crosses at {x.estimate:.3g} [{lo}–{hi}]"
    if x.above_range:
        return f"beyond {high:g} [{lo}–{hi}]"
    return f"below {low:g} [{lo}–{hi}]"


def _cells(p: KPrediction, picks: list[int]) -> list[str]:
    out = []
    for i in picks:
        s = p.curve[i].speedup
        if s.estimate != s.estimate:  # the cost fit's step time is <= 0 there: no engine, no prediction
            out.append("—")
            continue
        out.append(f"{s.estimate:.2f}× [{s.low:.2f}–{s.high:.2f}]" if s.low == s.low else f"{s.estimate:.2f}×")
    return out


def prediction_renderable(pred: Prediction, path: Path | None = None) -> Group:
    parts: list[object] = [
        Text(
            f"prediction over concurrency {pred.low:g}–{pred.high:g}: TPOT speedup of each candidate at each k "
            "(plain TPOT / speculative TPOT; 95% band from the acceptance and cost intervals)",
            style="bold",
        )
    ]
    for c in pred.candidates:
        loads = [pt.load for pt in c.per_k[0].curve]
        picks = sorted({round(i * (len(loads) - 1) / (SHOWN_LOADS - 1)) for i in range(SHOWN_LOADS)})
        t = Table(title=escape(c.label), title_justify="left")
        t.add_column("k")
        t.add_column("tokens/step", justify="right")
        for i in picks:
            t.add_column(f"c={loads[i]:.3g}", justify="right")
        t.add_column("crossover")
        for p in c.per_k:
            t.add_row(str(p.k), f"{p.tokens_per_step:.2f}", *_cells(p, picks),
                      crossover_text(p.crossover, pred.low, pred.high))  # fmt: skip
        parts.append(t)
        bands = ", ".join(f"{b.low:.3g}–{b.high:.3g}: " + (f"k={b.k}" if b.k else "plain decoding") for b in c.schedule)
        parts.append(Text(f"  best k by load: {bands}"))
        if c.engine_form is not None and c.engine_form.flags:
            flags = " ".join(c.engine_form.flags)
            parts.append(Text(f"  in the engine's words ({c.engine_form.form}): {flags}"))
        parts.append(Text(f"  acceptance at the lowest load: {positions_phrase(c.acceptance)}"))
        if not c.chain:
            parts.append(
                Text(
                    f"  {c.method or 'this method'} is not known to be a chain proposer: only its measured k "
                    f"({c.measured_k}) is predicted",
                    style="yellow",
                )
            )
        coef = ", ".join(f"{x.name} {x.estimate * 1e3:.3f} ms" for x in c.fit.coefficients if x.name in c.fit.terms)
        sd = f"{c.fit.residual_sd_s * 1e3:.2f} ms" if c.fit.dof > 0 else MISSING
        parts.append(
            Text(
                f"  step cost: {coef} (least squares over {len(c.fit.probes)} probes, residual sd {sd}, "
                f"{c.fit.dof} degrees of freedom)",
                style="dim",
            )
        )
        if c.width_check is not None:
            parts.append(Text(f"  {width_phrase(c.width_check)}", style="dim" if c.width_check.linear else "yellow"))
    for w in (*pred.warnings, *pred.skipped):
        parts.append(Text(f"warning: {warning_text(w)}", style="yellow"))
    share = pred.requests_sent / pred.sweep_requests if pred.sweep_requests else float("nan")
    wall = f", {pred.probe_wall_s:.0f} s" if pred.probe_wall_s is not None else ""
    parts.append(
        Text(
            f"probes: {pred.requests_sent:,} requests{wall}; a fixed K × load sweep of the same candidates: "
            f"{pred.sweep_requests:,} requests ({share:.0%})"
        )
    )
    if path is not None:
        parts.append(Text(f"prediction: {path}"))
    return Group(*parts)


def width_phrase(w: WidthCheck) -> str:
    """`--check-k`: the held-out probes at the second k against the fit."""
    each = "; ".join(
        f"at batch {p.batch:.3g} {p.measured_s * 1e3:.3g} ms, fitted {p.predicted_s * 1e3:.3g} ms"
        + (f" [{p.low_s * 1e3:.3g}–{p.high_s * 1e3:.3g}]" if p.inside is not None else "")
        for p in w.probes
    )
    verdict = {True: "linear in k", False: "NOT linear in k", None: "no interval to check it against"}[w.linear]
    return f"cost at k={w.k}, not fitted on: {each}: {verdict}"


def print_prediction(console: Console, pred: Prediction, path: Path | None = None) -> None:
    console.print(prediction_renderable(pred, path))
