"""Plots for the HTML report: matplotlib (Agg backend) -> inline SVG text. No files, no external references.

Each function takes already-computed numbers from the Report and returns one `<svg>` element as a string (the XML
prolog, DOCTYPE and RDF metadata are stripped so the page stays self-contained). Text in the SVG is escaped by
matplotlib's SVG writer; labels here come from the report (arm labels, units), never from model output.
"""

from __future__ import annotations

import functools
import hashlib
import io
import math
import pickle
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from speculab.report.names import shorten_apart

COLORS = ("#4c566a", "#d08770", "#5e81ac", "#a3be8c", "#b48ead", "#ebcb8b", "#bf616a", "#88c0d0")

matplotlib.rcParams.update(
    {
        "svg.fonttype": "none",  # keep text as text: smaller, selectable, uses the page's font
        "svg.hashsalt": "speculab",  # stable ids: the same report renders to the same bytes
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "figure.dpi": 96,
    }
)


# a legend's longest label, in characters: arms named by long file names pushed the legend past the plot's edge
LEGEND_NAME = 32


def _legend(ax: Any, **kw: Any) -> None:
    """A legend only when something on the axes has a label (matplotlib warns into the user's terminal otherwise)."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        short = shorten_apart(labels, LEGEND_NAME)
        ax.legend(handles, [short[x] for x in labels], **kw)


def color(i: int) -> str:
    return COLORS[i % len(COLORS)]


def _subplots(*args: Any, figsize: tuple[float, float], **kw: Any) -> tuple[Figure, Any]:
    """`plt.subplots` without pyplot: a figure on the Agg canvas that no figure manager keeps (nothing to close,
    nothing global, and no pyplot import: ~0.1 s of every process that renders a report)."""
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(*args, **kw)


def to_svg(fig: Figure) -> str:
    """Render a figure; return a bare <svg> element."""
    # `tight_layout` has already placed the axes, and leaves a placeholder layout engine behind; with any engine set,
    # savefig draws the whole figure once more without output before the real draw (a saved run's render: 2.01 s of
    # CPU with that pass, 1.43 s without). The bytes are the same without it.
    fig.set_layout_engine(None)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    # Inline SVG in HTML needs no namespace URLs; dropping them keeps the file free of any http(s) reference.
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)
    return svg.replace("xlink:href", "href")


F = TypeVar("F", bound=Callable[..., str])

# Figures drawn in this process, by a digest of what they were drawn from: (function, arguments) -> SVG text.
_DRAWN: OrderedDict[bytes, str] = OrderedDict()
# enough for every figure of a few reports; an entry is the SVG text, tens to a few hundred KB
_DRAWN_MAX = 48


def drawn_once(fn: F) -> F:
    """A figure is a pure function of its numbers (the rcParams above are fixed, the ids salted): the same numbers
    drawn twice in one process are drawn once. Matplotlib takes 0.1-0.3 s of CPU a figure and a report draws a dozen;
    a process that renders the same run again (a library caller re-rendering it against another margin; the report,
    verdict and harness unit tests, whose repeated figures were 45 % of their drawing time, 2026-12-07) gets the same
    bytes without drawing. Arguments pickle cannot take are drawn every time. speculab draws its figures on one
    thread (no lock)."""

    @functools.wraps(fn)
    def figure(*args: Any, **kwargs: Any) -> str:
        try:
            key = hashlib.sha256(pickle.dumps((fn.__qualname__, args, kwargs), protocol=5)).digest()
        except (pickle.PicklingError, TypeError, AttributeError):
            return fn(*args, **kwargs)
        if (svg := _DRAWN.get(key)) is None:
            svg = _DRAWN[key] = fn(*args, **kwargs)
            while len(_DRAWN) > _DRAWN_MAX:
                _DRAWN.popitem(last=False)
        else:
            _DRAWN.move_to_end(key)
        return svg

    return figure  # type: ignore[return-value]


def _finite(xs: Sequence[float | None]) -> list[float]:
    return [float(x) for x in xs if x is not None and math.isfinite(x)]


@drawn_once
def cdf_panels(series: Mapping[str, Mapping[str, Sequence[float]]], metrics: Sequence[tuple[str, str]]) -> str:
    """One panel per metric: the empirical CDF of each arm's per-request values (milliseconds)."""
    fig, axes = _subplots(1, len(metrics), figsize=(3.6 * len(metrics), 2.6))
    axes = list(axes) if len(metrics) > 1 else [axes]
    for ax, (key, label) in zip(axes, metrics, strict=True):
        spread = 1.0
        for i, (arm, by_metric) in enumerate(series.items()):
            v = sorted(x * 1e3 for x in _finite(by_metric.get(key, ())))
            if not v:
                continue
            y = [(j + 1) / len(v) for j in range(len(v))]
            ax.step(v, y, where="post", color=color(i), label=arm, lw=1.4)
            if v[0] > 0:
                spread = max(spread, v[-1] / v[len(v) // 2])
        # A long tail (a cold request, a stall) squeezes the body of a linear plot into one corner: go log.
        log = spread > 8
        if log:
            ax.set_xscale("log")
        ax.set_xlabel(f"{label} (ms{', log scale' if log else ''})")
        ax.set_ylim(0, 1.01)
    axes[0].set_ylabel("fraction of requests ≤ x")
    _legend(axes[-1], loc="lower right", fontsize=8, frameon=False)
    fig.tight_layout()
    return to_svg(fig)


@drawn_once
def band_vs_load(
    loads: Sequence[float],
    arms: Mapping[str, tuple[Sequence[float], Sequence[float], Sequence[float]]],
    *,
    xlabel: str,
    ylabel: str,
    log_x: bool,
) -> str:
    """A line per arm (estimate) with a shaded interval band (low, high) against load."""
    fig, ax = _subplots(figsize=(4.6, 2.9))
    for i, (arm, (est, lo, hi)) in enumerate(arms.items()):
        pts = [
            (x, e, a, b) for x, e, a, b in zip(loads, est, lo, hi, strict=True) if e is not None and math.isfinite(e)
        ]
        if not pts:
            continue
        xs = [p[0] for p in pts]
        ax.plot(xs, [p[1] for p in pts], marker="o", ms=3.5, color=color(i), label=arm, lw=1.4)
        band = [(p[0], p[2], p[3]) for p in pts if math.isfinite(p[2]) and math.isfinite(p[3])]
        if band:
            ax.fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band], color=color(i), alpha=0.2)
    if log_x:
        ax.set_xscale("log", base=2)
    ax.set_xticks(list(loads), [f"{x:g}" for x in loads])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    _legend(ax, fontsize=8, frameon=False)
    fig.tight_layout()
    return to_svg(fig)


@drawn_once
def speedup_vs_load(
    curves: Mapping[str, tuple[Sequence[float], Sequence[float], Sequence[float], Sequence[float]]],
    crossovers: Mapping[str, tuple[float | None, float | None, float | None]],
    *,
    xlabel: str,
    log_x: bool,
    offset: int = 1,
) -> str:
    """TPOT speedup (baseline/candidate) per candidate with its interval band, the 1× line and the crossover."""
    fig, ax = _subplots(figsize=(4.6, 2.9))
    all_x: set[float] = set()
    for i, (arm, (xs, est, lo, hi)) in enumerate(curves.items()):
        c = color(i + offset)
        all_x.update(xs)
        ax.plot(xs, est, marker="o", ms=3.5, color=c, label=arm, lw=1.4)
        ax.fill_between(xs, lo, hi, color=c, alpha=0.2)
        point, low, high = crossovers.get(arm, (None, None, None))
        if point is not None:
            ax.axvline(point, color=c, ls="--", lw=1)
            if low is not None and high is not None:
                ax.axvspan(low, high, color=c, alpha=0.08)
    ax.axhline(1.0, color="black", lw=0.8)
    if log_x:
        ax.set_xscale("log", base=2)
    xs_sorted = sorted(all_x)
    ax.set_xticks(xs_sorted, [f"{x:g}" for x in xs_sorted])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("TPOT speedup (×, > 1 = faster)")
    _legend(ax, fontsize=8, frameon=False)
    fig.tight_layout()
    return to_svg(fig)


@drawn_once
def predicted_speedup(
    curves: Mapping[int, tuple[Sequence[float], Sequence[float], Sequence[float], Sequence[float]]],
    crossovers: Mapping[int, float | None],
    *,
    xlabel: str,
) -> str:
    """`speculab predict`: the predicted TPOT speedup against load for each k (a line on a fine grid with its band),
    the 1× line and each k's predicted crossover; the load on a log scale (the grid is geometric)."""
    fig, ax = _subplots(figsize=(5.2, 3.1))
    for i, (k, (xs, est, lo, hi)) in enumerate(sorted(curves.items())):
        c = color(i + 1)
        ax.plot(xs, est, color=c, label=f"k={k}", lw=1.4)
        ax.fill_between(xs, lo, hi, color=c, alpha=0.15)
        x = crossovers.get(k)
        if x is not None:
            ax.axvline(x, color=c, ls="--", lw=1)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("predicted TPOT speedup (×)")
    _legend(ax, fontsize=8, frameon=False)
    fig.tight_layout()
    return to_svg(fig)


@drawn_once
def acceptance_bars(per_arm: Mapping[str, Sequence[float]], offset: int = 1) -> str:
    """P(first j+1 drafted tokens accepted) by draft position, one bar group per candidate."""
    fig, ax = _subplots(figsize=(4.6, 2.7))
    n = max(1, len(per_arm))
    width = 0.8 / n
    for i, (arm, rates) in enumerate(per_arm.items()):
        xs = [j + 1 + (i - (n - 1) / 2) * width for j in range(len(rates))]
        ax.bar(xs, rates, width=width, color=color(i + offset), label=arm)
    ax.set_xticks(range(1, 1 + max((len(r) for r in per_arm.values()), default=1)))
    ax.set_xlabel("draft position")
    ax.set_ylabel("acceptance (prefix-wise)")
    ax.set_ylim(0, 1)
    _legend(ax, fontsize=8, frameon=False)
    fig.tight_layout()
    return to_svg(fig)


@drawn_once
def acceptance_vs_speedup(
    panels: Mapping[str, tuple[Sequence[tuple[float, float, str]], float, float]], xlabel: str
) -> str:
    """One panel per candidate: each prompt's acceptance length (x) against its TPOT speedup (y, baseline ÷
    candidate), coloured by workload category, with the least-squares line (slope, intercept) and the 1× line."""
    fig, axes = _subplots(1, len(panels), figsize=(4.2 * len(panels), 3.0), squeeze=False)
    cats = sorted({c for pts, _, _ in panels.values() for _, _, c in pts})
    for ax, (arm, (pts, slope, icpt)) in zip(axes[0], panels.items(), strict=True):
        for i, cat in enumerate(cats):
            sel = [(x, y) for x, y, c in pts if c == cat]
            if sel:
                ax.scatter([p[0] for p in sel], [p[1] for p in sel], s=14, color=color(i + 1), label=cat or "–")
        xs = _finite([p[0] for p in pts])
        if xs and math.isfinite(slope) and math.isfinite(icpt):
            lo, hi = min(xs), max(xs)
            ax.plot([lo, hi], [icpt + slope * lo, icpt + slope * hi], color="black", lw=1, ls="--")
        ax.axhline(1.0, color="black", lw=0.6)
        ax.set_title(arm, fontsize=9)
        ax.set_xlabel(xlabel)
    axes[0][0].set_ylabel("TPOT speedup (×, baseline ÷ candidate)")
    _legend(axes[0][-1], fontsize=7, frameon=False)
    fig.tight_layout()
    return to_svg(fig)


@drawn_once
def histograms(
    gaps_ms: Mapping[str, Sequence[float]],
    tokens_per_chunk: Mapping[str, Mapping[str, int]],
) -> str:
    """Left: chunk-gap histogram (ms) per arm; right: tokens per chunk (share of chunks) per arm."""
    fig, (a1, a2) = _subplots(1, 2, figsize=(8.4, 2.7))
    allg = [g for v in gaps_ms.values() for g in _finite(v)]
    if allg:
        # every gap 0 (a server that sends its whole answer in one burst): a 1 ms range, not 40 empty bins of width 0
        hi = sorted(allg)[int(0.99 * (len(allg) - 1))] or max(allg) or 1.0
        bins = [hi * j / 40 for j in range(41)]
        for i, (arm, v) in enumerate(gaps_ms.items()):
            vals = [min(x, hi) for x in _finite(v)]
            if vals:
                a1.hist(vals, bins=bins, histtype="step", color=color(i), label=arm, lw=1.4, density=True)
    a1.set_xlabel("chunk gap (ms; the top 1% folded into the last bin)")
    a1.set_ylabel("density")
    _legend(a1, fontsize=8, frameon=False)
    n = max(1, len(tokens_per_chunk))
    width = 0.8 / n
    for i, (arm, counts) in enumerate(tokens_per_chunk.items()):
        total = sum(counts.values())
        if not total:
            continue
        ks = sorted(int(k) for k in counts)
        a2.bar([k + (i - (n - 1) / 2) * width for k in ks], [counts[str(k)] / total for k in ks], width=width,
               color=color(i), label=arm)  # fmt: skip
    a2.set_xlabel("tokens per chunk")
    a2.set_ylabel("share of chunks")
    a2.xaxis.get_major_locator().set_params(integer=True)
    _legend(a2, fontsize=8, frameon=False, loc="upper center")
    fig.tight_layout()
    return to_svg(fig)


@drawn_once
def memory_over_time(
    series: Mapping[str, tuple[Sequence[float], Sequence[float | None], Sequence[float | None]]], mem_label: str
) -> str:
    """Left: memory (GB) over the load level per arm; right: the engine's KV-cache usage gauge (%)."""
    fig, (a1, a2) = _subplots(1, 2, figsize=(8.4, 2.7))
    for i, (arm, (t, mem, kv)) in enumerate(series.items()):
        pts = [(x, m / 1e9) for x, m in zip(t, mem, strict=True) if m is not None]
        if pts:
            a1.plot([p[0] for p in pts], [p[1] for p in pts], color=color(i), label=arm, lw=1.4)
        kvp = [(x, k * 100) for x, k in zip(t, kv, strict=True) if k is not None]
        if kvp:
            a2.plot([p[0] for p in kvp], [p[1] for p in kvp], color=color(i), label=arm, lw=1.4)
    a1.set_xlabel("seconds into the load level")
    a1.set_ylabel(f"{mem_label} (GB)")
    a2.set_xlabel("seconds into the load level")
    a2.set_ylabel("KV cache usage (%)")
    for ax in (a1, a2):
        _legend(ax, fontsize=8, frameon=False)
    fig.tight_layout()
    return to_svg(fig)


@drawn_once
def cost_bars(labels: Sequence[str], arms: Mapping[str, tuple[Sequence[float], Sequence[float], Sequence[float]]]
              ) -> str:  # fmt: skip
    """$ per 1M output tokens per load level and arm, error bars from repeats."""
    fig, ax = _subplots(figsize=(max(4.6, 1.2 * len(labels) + 2), 2.8))
    n = max(1, len(arms))
    width = 0.8 / n
    for i, (arm, (est, lo, hi)) in enumerate(arms.items()):
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(labels))]
        e = [x if math.isfinite(x) else 0.0 for x in est]
        err_lo = [
            max(0.0, x - a) if math.isfinite(a) and math.isfinite(x) else 0.0 for x, a in zip(est, lo, strict=True)
        ]
        err_hi = [
            max(0.0, b - x) if math.isfinite(b) and math.isfinite(x) else 0.0 for x, b in zip(est, hi, strict=True)
        ]
        ax.bar(xs, e, width=width, color=color(i), label=arm, yerr=[err_lo, err_hi], capsize=2)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylabel("$ per 1M output tokens")
    _legend(ax, fontsize=8, frameon=False)
    fig.tight_layout()
    return to_svg(fig)


@drawn_once
def pareto(arms: Mapping[str, Sequence[tuple[float, float, float, float, str, bool, bool]]], *, load_name: str) -> str:
    """Throughput per GPU against per-user tokens/s, one line per arm through its loads, the throughput interval as a
    faint vertical bar (clipped to the plot: a 2-repeat t-interval is wide); the recommendation's point at each load
    ringed and labelled with its load, the frontier (points no other beats on both axes) joined by a dashed line.

    arms: label -> [(per-user tok/s, tok/s per GPU, low, high, load, recommended, on frontier)], by load; the
    first arm (the baseline) has its loads labelled too."""
    fig, ax = _subplots(figsize=(6.8, 3.4))
    frontier: list[tuple[float, float]] = []
    ringed = False
    top = 0.0
    for i, (arm, pts) in enumerate(arms.items()):
        pts = [p for p in pts if math.isfinite(p[0]) and math.isfinite(p[1])]
        if not pts:
            continue
        c = color(i)
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        top = max(top, *ys)
        ax.plot(xs, ys, marker="o", ms=3.5, color=c, label=arm, lw=1.2)
        for x, y, lo, hi, load, shipped, front in pts:
            if math.isfinite(lo) and math.isfinite(hi):
                ax.vlines(x, max(0.0, lo), hi, color=c, lw=0.6, alpha=0.35)
            if shipped or i == 0:
                ax.annotate(load, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7, color=c)
            if shipped:
                ax.plot([x], [y], marker="o", ms=10, mfc="none", mec="black", mew=1.2,
                        label=None if ringed else "recommended at this load")  # fmt: skip
                ringed = True
            if front:
                frontier.append((x, y))
    if len(frontier) > 1:
        frontier.sort()
        ax.plot([p[0] for p in frontier], [p[1] for p in frontier], color="black", lw=0.8, ls="--", label="frontier")
    ax.set_xlabel("per-user speed (output tok/s = 1 / median TPOT)")
    ax.set_ylabel("output tok/s per GPU")
    ax.set_ylim(0, top * 1.35 if top > 0 else None)
    ax.set_title(f"labels: {load_name}", fontsize=8, loc="left", color="#5b6272")
    _legend(ax, fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return to_svg(fig)


@drawn_once
def search_effect(
    points: Sequence[tuple[float, float, float, float, float | None]],
    crossover: tuple[float | None, float | None, float | None],
    *,
    xlabel: str,
    ylabel: str,
    log_x: bool,
) -> str:
    """A search's answer (`loads: {search: ...}`): each probe's measured speedup (exp of its effect) with its
    interval, the monotone fit through the probed loads, 1× and the crossover's estimate (dashed) and interval
    (shaded; to the plot's edge where it is open). points: (load, speedup, low, high, fitted speedup or None)."""
    fig, ax = _subplots(figsize=(4.6, 2.9))
    c = color(1)
    measured = [p for p in points if math.isfinite(p[1])]
    if measured:
        xs = [p[0] for p in measured]
        ys = [p[1] for p in measured]
        err = [[max(0.0, p[1] - p[2]) for p in measured], [max(0.0, p[3] - p[1]) for p in measured]]
        ax.errorbar(xs, ys, yerr=err, fmt="o", ms=3.5, color=c, capsize=2, lw=1, label="probe (95% interval)")
    fit = sorted({(p[0], p[4]) for p in points if p[4] is not None and math.isfinite(p[4])})
    if fit:
        ax.plot([f[0] for f in fit], [f[1] for f in fit], color="black", lw=1.2, label="monotone fit")
    ax.axhline(1.0, color="black", lw=0.8, ls=":")
    est, low, high = crossover
    loads = sorted({p[0] for p in points})
    if est is not None:
        ax.axvline(est, color=c, ls="--", lw=1, label="crossover")
    if (low is not None or high is not None) and loads:
        ax.axvspan(low if low is not None else loads[0], high if high is not None else loads[-1], color=c, alpha=0.1)
    if log_x:
        ax.set_xscale("log", base=2)
    ax.set_xticks(loads, [f"{x:g}" for x in loads])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    _legend(ax, fontsize=8, frameon=False)
    fig.tight_layout()
    return to_svg(fig)


@drawn_once
def phase_timeline(
    latency: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    acceptance: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    k_in_use: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    load: tuple[Sequence[float], Sequence[float]],
    transitions: Sequence[tuple[float, float]],
    *,
    metric: str,
    load_name: str,
) -> str:
    """A phased load over its time axis: each arm's requests (`metric`, ms, at their send time) on top; beneath, where
    the engine reports them, each arm's acceptance and the k its steps used (per response or per counter interval);
    the offered load (a step per phase) at the bottom; the transition windows shaded in each."""
    panels = [p for p in (("acceptance", acceptance), ("k in use", k_in_use)) if p[1]]
    heights = [3.0] + [1.4] * len(panels) + [1.2]
    fig, axes = _subplots(len(heights), 1, figsize=(8.4, 1.1 * sum(heights)), sharex=True, height_ratios=heights)
    top, bottom = axes[0], axes[-1]
    order = list(latency)
    for i, (arm, (t, v)) in enumerate(latency.items()):
        top.scatter(t, [x * 1e3 for x in v], s=6, color=color(i), alpha=0.45, lw=0, label=arm)
    top.set_ylabel(f"{metric} (ms)")
    _legend(top, fontsize=8, frameon=False, markerscale=2)
    for ax, (name, series) in zip(axes[1:-1], panels, strict=True):
        for arm, (t, v) in series.items():
            c = color(order.index(arm) if arm in order else len(order))
            ax.plot(t, v, color=c, lw=1.0, marker="o", ms=2.5, alpha=0.8)
        ax.set_ylabel(name)
        if name == "acceptance":
            ax.set_ylim(0, 1.05)
    starts, values = load
    bottom.step([*starts], [*values], where="post", color="#2e3440", lw=1.4)
    bottom.set_ylabel(load_name)
    bottom.set_xlabel("seconds into the schedule (send time)")
    for ax in axes:
        for a, b in transitions:
            ax.axvspan(a, b, color="#ebcb8b", alpha=0.25, lw=0)
    fig.tight_layout()
    return to_svg(fig)
