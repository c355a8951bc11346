"""The diagnosis in HTML: `diagnosis_view` (the dict the A/B report's diagnosis slot renders: `findings` as
label -> text cards, other scalar keys as rows) and `render_diagnosis_page` (DIR/diagnosis.html, self-contained).
Input is diagnosis.json as written by `speculab diagnose`; all arithmetic was done there, this only formats.
Every string is escaped (jinja2 autoescape): server error messages end up in warnings. The findings', warnings' and
queueing check's sentences come from `words` / `phrases` (a /1 file's saved sentences render as they were).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from speculab.harness.results.atomic_file import write_atomic
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.verdict.model import TPOT
from speculab.report.formatting import ci_suffix, ms_per_token, pct, seconds, tok_rate
from speculab.report.phrases import warning_text
from speculab.report.words import disaggregation_text, finding_words, queueing_note


def headline_rows(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """The measured quantities, formatted, in reading order."""
    pre, cs, q, dec, pc = (doc.get(k) or {} for k in ("prefill", "cold_start", "queueing", "decode", "prefix_caching"))
    rows = [
        ("prefill", _prefill_text(pre)),
        ("cold start", _cold_text(cs)),
        ("prefix caching", _prefix_text(pc)),
        ("queueing", _queue_text(q)),
        (
            "decode share",
            f"{pct(dec.get('decode_share'))} of E2E ({seconds(dec.get('decode_s'))} of {seconds(dec.get('e2e_s'))}) at "
            f"{dec.get('at') or 'concurrency ' + str(dec.get('at_concurrency'))}; TPOT {seconds(dec.get(TPOT.name))}"
            if dec
            else "not measured",
        ),
    ]
    if disaggregation := disaggregation_text(doc):
        rows.append(("disaggregation", disaggregation))
    return rows


def diagnosis_warnings(doc: dict[str, Any]) -> list[str]:
    """The warnings' sentences: records (/2) worded by kind, a /1 file's sentences as notes."""
    return [warning_text(ReportWarning.from_dict(w)) for w in doc.get("warnings", [])]


def _prefill_text(pre: dict[str, Any]) -> str:
    if not pre or pre.get("s_per_token") is None:
        return "not measured"
    r2 = pre.get("r2")
    return (
        f"{tok_rate(pre.get('tokens_per_s'))}{ci_suffix(pre.get('tokens_per_s_ci'), tok_rate)}; "
        f"{ms_per_token(pre['s_per_token'])}{ci_suffix(pre.get('s_per_token_ci'), ms_per_token)} ms per prompt token; "
        f"fixed overhead {seconds(pre.get('overhead_s'))}{ci_suffix(pre.get('overhead_s_ci'), seconds)}"
        + (f"; R² {r2:.3f}" if isinstance(r2, (int, float)) else "")
    )


def _cold_text(cs: dict[str, Any]) -> str:
    if not cs:
        return "not measured"
    if cs.get("mode") == "launch":
        return (
            f"process start → ready {seconds(cs.get('process_ready_s'))} → first token "
            f"{seconds(cs.get('process_first_token_s'))}"
            f"; first request {seconds(cs.get('first_request_ttft_s'))} vs warm {seconds(cs.get('warm_ttft_s'))}"
        )
    text = f"first request {seconds(cs.get('first_request_ttft_s'))} vs warm {seconds(cs.get('warm_ttft_s'))}"
    if cs.get("idle_s"):
        text += f"; after {cs['idle_s']:g} s idle {seconds(cs.get('after_idle_ttft_s'))}"
    return text + ("" if cs.get("detected") else " (no cold start detected)")


def _prefix_text(pc: dict[str, Any]) -> str:
    if not pc:
        return "not measured"
    state = {True: "on", False: "off", None: "undetermined"}[pc.get("enabled")]
    d = pc.get("saving_s")
    # a shared prefix that came out slower saves nothing: "saves -5.0 ms" read as a typo
    saved = f"{seconds(-d)} slower, no saving" if isinstance(d, (int, float)) and d < 0 else f"saves {seconds(d)}"
    return (
        f"{state}: {pc.get('prefix_tokens')}-token shared prefix {seconds(pc.get('shared_ttft_s'))} vs fresh "
        f"{seconds(pc.get('control_ttft_s'))} ({saved}; a full hit would save {seconds(pc.get('expected_saving_s'))})"
    )


def _queue_text(q: dict[str, Any]) -> str:
    if not q:
        return "not measured"
    if not q.get("measured"):
        return queueing_note(q) or "not measured"
    text = (
        f"TTFT {seconds(q.get('ttft_c1_s'))} at concurrency 1 → {seconds(q.get('ttft_load_s'))} "
        f"at {q.get('at') or q.get('concurrency')}: "
        f"+{seconds(q.get('wait_s'))}{ci_suffix(q.get('wait_s_ci'), seconds)}"
    )
    if q.get("server_queue_s") is not None:
        text += f"; server queue {seconds(q['server_queue_s'])}"
    if q.get("client_queue_s"):
        text += f"; client wait {seconds(q['client_queue_s'])}"
    return text + f"; TPOT {seconds(q.get('tpot_c1_s'))} → {seconds(q.get('tpot_load_s'))}"


def finding_card(f: dict[str, Any]) -> dict[str, str]:
    words = finding_words(f)
    return {
        "finding": f"#{f.get('rank')} {words.title}",
        "explains": f"{seconds(f.get('explained_s'))} ({pct(f.get('share'))} of the affected request's latency)",
        "affects": words.affects,
        "evidence": words.evidence,
        "next step": words.next_step,
    }


def diagnosis_view(doc: dict[str, Any]) -> dict[str, Any]:
    """For the A/B report's diagnosis slot: `findings` (cards of label -> text) and scalar rows (label -> text)."""
    view: dict[str, Any] = {"findings": [finding_card(f) for f in doc.get("findings", [])]}
    for k, v in headline_rows(doc):
        view[k] = v
    if not view["findings"]:
        view["verdict"] = "no cause stands out above the thresholds"
    return view


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>speculab diagnosis: {{ title }}</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.4em}.card{border:1px solid #ccd;border-radius:6px;padding:.6em .9em;margin:.6em 0;background:#fafaff}
.card h3{margin:.1em 0 .3em;font-size:1.05em}.muted{color:#667}table{border-collapse:collapse;width:100%}
th,td{text-align:left;vertical-align:top;padding:.3em .5em;border-bottom:1px solid #eee}th{width:11em}
.warn{color:#8a4b00}
</style></head><body>
<h1>Diagnosis of {{ title }}</h1>
<p class="muted">{{ when }}{% if interrupted %} · <b>interrupted: partial diagnosis</b>{% endif %}</p>
<h2>Findings, most latency first</h2>
{% for f in findings %}
<div class="card"><h3>#{{ f.rank }} {{ f.title }}: {{ f.explains }}</h3>
<div><span class="muted">affects:</span> {{ f.affects }}</div>
<div><span class="muted">evidence:</span> {{ f.evidence }}</div>
<div><span class="muted">next step:</span> {{ f.next_step }}</div></div>
{% else %}
<p>No cause explains a noticeable share of latency above the thresholds.</p>
{% endfor %}
{% if checked %}<p class="muted">Checked and below the thresholds: {{ checked }}</p>{% endif %}
<h2>Measurements</h2>
<table>{% for k, v in rows %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>{% endfor %}</table>
{% if by_length %}
<h2>TTFT by prompt length (concurrency 1)</h2>
<table><tr><th>prompt tokens</th><th>n</th><th>mean TTFT</th><th>min – max</th></tr>
{% for r in by_length %}
<tr><td>{{ r.tokens }}</td><td>{{ r.n }}</td><td>{{ r.mean }}</td><td>{{ r.range }}</td></tr>
{% endfor %}
</table>{% endif %}
{% if warnings %}<h2>Warnings</h2><ul>{% for w in warnings %}<li class="warn">{{ w }}</li>{% endfor %}</ul>{% endif %}
<p class="muted">Every number is in diagnosis.json (seconds); every request in requests.jsonl.</p>
</body></html>
"""

_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render_diagnosis_page(doc: dict[str, Any]) -> str:
    """A self-contained HTML page (no scripts, no external resources) of a diagnosis.json document."""
    run = doc.get("run") or {}
    findings = [
        {
            "rank": f.get("rank"),
            "title": words.title,
            "explains": f"{seconds(f.get('explained_s'))} ({pct(f.get('share'))} of the affected request's latency)",
            "affects": words.affects,
            "evidence": words.evidence,
            "next_step": words.next_step,
        }
        for f in doc.get("findings", [])
        for words in (finding_words(f),)
    ]
    checked = "; ".join(f"{finding_words(f).title} ({seconds(f.get('explained_s'))})" for f in doc.get("checked", []))
    by_length = [
        {
            "tokens": r.get("prompt_tokens"),
            "n": r.get("n"),
            "mean": seconds(r.get("ttft_mean_s")),
            "range": f"{seconds(r.get('ttft_min_s'))} – {seconds(r.get('ttft_max_s'))}",
        }
        for r in (doc.get("prefill") or {}).get("by_length", [])
    ]
    return _ENV.from_string(_PAGE).render(
        title=f"{run.get('model', '?')} at {run.get('base_url', '?')}",
        when=f"{run.get('started_at', '')} → {run.get('finished_at', '')}",
        interrupted=bool(doc.get("interrupted")),
        findings=findings,
        checked=checked,
        rows=headline_rows(doc),
        by_length=by_length,
        warnings=diagnosis_warnings(doc),
    )


DIAGNOSIS_HTML = "diagnosis.html"


def write_diagnosis_page(run_dir: Path, doc: dict[str, Any]) -> Path:
    """DIR/diagnosis.html beside the diagnosis.json `speculab diagnose` wrote."""
    path = run_dir / DIAGNOSIS_HTML
    write_atomic(path, render_diagnosis_page(doc))
    return path
