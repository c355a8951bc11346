"""The one place numbers become text, for the terminal and the HTML report alike.

Inputs are in the units the harness records (seconds, bytes, ratios); conversion happens here, for display only.
A value that is missing or not finite prints as `MISSING`, the same mark everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

MISSING = "–"


def is_number(v: Any) -> bool:
    """A finite int or float (not a bool): something worth printing."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def num(v: Any, fmt: str = ",.2f", unit: str = "") -> str:
    return (format(v, fmt) + (f" {unit}" if unit else "")) if is_number(v) else MISSING


def ms(v: Any, digits: int = 1, unit: str = " ms") -> str:
    """Seconds as milliseconds ('123.4 ms'; unit="" for table cells under a '(ms)' heading)."""
    return f"{v * 1e3:,.{digits}f}{unit}" if is_number(v) else MISSING


def seconds(v: Any) -> str:
    """Seconds for a reader: milliseconds below one second."""
    if not is_number(v):
        return MISSING
    return f"{v * 1e3:.1f} ms" if abs(v) < 1 else f"{v:.2f} s"


def ms_per_token(v: Any) -> str:
    """Seconds per token as milliseconds, four decimals (prefill costs are small)."""
    return f"{v * 1e3:.4f}" if is_number(v) else MISSING


def pct(v: Any) -> str:
    return f"{v:.0%}" if is_number(v) else MISSING


def gb(v: Any) -> str:
    return f"{v / 1e9:,.2f} GB" if is_number(v) else MISSING


def signed_bytes(b: float) -> str:
    """A memory difference: '+1.20 GB', '−35 MB', '±0 kB'."""
    sign = "+" if b > 0 else ("−" if b < 0 else "±")
    a = abs(b)
    if a >= 1e9:
        return f"{sign}{a / 1e9:.2f} GB"
    if a >= 1e6:
        return f"{sign}{a / 1e6:.0f} MB"
    return f"{sign}{a / 1e3:.0f} kB"


def usd(v: Any, digits: int = 2) -> str:
    return f"${v:,.{digits}f}" if is_number(v) else MISSING


def tok_rate(v: Any) -> str:
    """Tokens per second: '2,500 tok/s'; an infinite rate (a zero-cost fit) is '∞'."""
    if isinstance(v, float) and math.isinf(v):
        return "∞"
    return f"{v:,.0f} tok/s" if is_number(v) else MISSING


def speedup(v: float) -> str:
    """A ratio as a speedup: '1.84×'."""
    return f"{v:.2f}×" if is_number(v) else MISSING


def fine_speedup(v: float) -> str:
    """A speedup near 1 with the digit that shows it: '1.004×' (within 1 % of 1), else '1.84×'."""
    if is_number(v) and abs(v - 1.0) < 0.01:
        return f"{v:.3f}×"
    return speedup(v)


def margin_pct(m: float) -> str:
    """A relative margin: 0.03 -> '±3%', 0.025 -> '±2.5%'."""
    return f"±{m * 100:.3g}%" if is_number(m) else MISSING


def speedup_range(lo: float, hi: float) -> str:
    """An interval of speedups: '[1.71–1.97]'."""
    if not (is_number(lo) and is_number(hi)):
        return "[no interval]"
    return f"[{lo:.2f}–{hi:.2f}]"


def relative_change(ratio: float) -> str:
    """A ratio as a change: 0.62 -> '−38%', 1.05 -> '+5%'."""
    d = (ratio - 1.0) * 100
    return f"{'+' if d >= 0 else '−'}{abs(d):.0f}%"


def ci_suffix(pair: Any, fmt: Callable[[Any], str]) -> str:
    """' [low – high]' for a (low, high) pair, each formatted with `fmt`; '' when there is none."""
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
        return ""
    return f" [{fmt(pair[0])} – {fmt(pair[1])}]"


def interval(
    iv: Any, fmt: str = ",.1f", unit: str = "", floor: float | None = None, ceiling: float | None = None
) -> str:
    """'123.4 [118.0–129.1] tok/s', or the estimate alone with '(no interval)'. `floor`: a rate cannot go below 0,
    so a t-interval from 2-3 repeats that reaches below it is shown clipped ('≤' marks the clip); `ceiling` likewise
    ('≥': a fraction cannot exceed 1)."""
    if iv is None or not is_number(iv.estimate):
        return MISSING
    u = f" {unit}" if unit else ""
    if is_number(iv.low) and is_number(iv.high):
        low, high = format(iv.low, fmt), format(iv.high, fmt)
        if floor is not None and iv.low < floor:
            low = "≤" + format(floor, fmt)
        if ceiling is not None and iv.high > ceiling:
            high = "≥" + format(ceiling, fmt)
        return f"{format(iv.estimate, fmt)} [{low}–{high}]{u}"
    return f"{format(iv.estimate, fmt)}{u} (no interval: n = {iv.n})"


def money_interval(iv: Any) -> str:
    """'$7.91 [$7.82–$8.00]' with as many decimals as small prices need."""
    if iv is None or not is_number(iv.estimate):
        return MISSING
    d = 2 if iv.estimate >= 0.1 else 4
    if is_number(iv.low) and (is_number(iv.high) or iv.high == math.inf):
        # an unbounded upper end: the throughput interval reached 0 tok/s (too few or too noisy repeats)
        high = usd(iv.high, d) if is_number(iv.high) else "∞"
        return f"{usd(iv.estimate, d)} [{usd(iv.low, d)}–{high}]"
    return f"{usd(iv.estimate, d)} (no interval: n = {iv.n})"


def pvalue(p: Any) -> str:
    if not is_number(p):
        return MISSING
    return "< 0.001" if p < 0.001 else f"{p:.3f}"
