"""Whether acceptance measured on a run can be the user's traffic's: the rules, pure, one record each.

Acceptance is a property of the content and the proposer (docs/metrics.md, "Acceptance validity"). It is not the
user's when the content is not theirs or the engine did not measure it:

- synthetic prompts: random words speculab wrote (`synthetic:`, a trace's `input_length` lines), or a read file's
  random dataset (vLLM bench's `random`): drafts match such text unlike any real traffic, often far worse, sometimes
  better (a model looping on gibberish);
- `ignore_eos`: outputs run past where the model would stop, into text no user receives;
- forced acceptance: the engine accepts drafts by a draw to set rates instead of verifying them (vLLM's synthetic
  rejection sampler, SGLang's SGLANG_SIMULATE_ACC_LEN, speculab's --forced-acceptance-rates): a cost probe;
- outputs capped too short: a request of n output tokens holds about n / L verification steps, L the tokens each
  step gives (the acceptance length measured; k + 1, full acceptance, where none was), and its last step is cut by
  the limit, which ends it whatever that step would have accepted. Below `SHORT_OUTPUT_STEPS` steps a request is
  mostly its first steps and its cut one: the rule is a median output under SHORT_OUTPUT_STEPS x L tokens, where at
  least half the outputs were stopped by the length limit (outputs that end on their own this short are the
  traffic's own length, and its acceptance is theirs).

Each rule gives a record (`harness.results.warnings`, the `ACCEPTANCE_VALIDITY` kinds) or None; the verdict, bench
and the file readers gather their own inputs and call them. Knows no engine: what forced acceptance is an adapter's
to read (`servers.adapters.forced_by_launch`); here it is evidence, already in the engine's words.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from speculab.harness.results.warnings import ReportWarning, WarningKind

# verification steps a median output must hold for its acceptance to be more than its first steps and its cut one
SHORT_OUTPUT_STEPS = 4
SYNTHETIC_SOURCE = "synthetic:"  # how a synthetic workload's source line begins (workload.synthetic)


def synthesised_prompts(source: str, synthesised: int | None, prompts: int) -> int:
    """How many of a run's `prompts` speculab synthesised: as recorded (`Setup.synthesised_prompts`), else, for a run
    recorded before it, all of them where its source line is a `synthetic:` one."""
    if synthesised is not None:
        return min(synthesised, prompts)
    return prompts if source.startswith(SYNTHETIC_SOURCE) else 0


def synthetic_prompts(
    synthesised: int, of: int | None, source: str = "synthetic", subject: str = ""
) -> ReportWarning | None:
    """Acceptance measured on prompts speculab (or the tool that wrote a file) made up: `synthesised` of `of` (None:
    the file does not say how many), from `source` ("synthetic", "trace", or a file's dataset name)."""
    if synthesised <= 0:
        return None
    fields = {"prompts": synthesised, "of": of, "source": source}
    return ReportWarning(WarningKind.ACCEPTANCE_SYNTHETIC_PROMPTS, subject, fields=fields)


def ignored_eos(ignore_eos: bool, source: str = "run", subject: str = "") -> ReportWarning | None:
    """Acceptance measured with `ignore_eos` (the run's sampling, or a file's `source` setting)."""
    if not ignore_eos:
        return None
    return ReportWarning(WarningKind.ACCEPTANCE_IGNORE_EOS, subject, fields={"source": source})


def forced(configured: Sequence[str], reported: Sequence[str], subject: str = "") -> ReportWarning | None:
    """Forced acceptance, in the engine's own words: what the arm was started with or its server says it runs
    (`configured`), and what the engine reported while it was measured (`reported`: its gauge, its responses)."""
    if not configured and not reported:
        return None
    fields = {"configured": list(configured), "reported": list(reported)}
    return ReportWarning(WarningKind.ACCEPTANCE_FORCED, subject, fields=fields)


def short_outputs(
    k: int | None,
    outputs: Sequence[tuple[int | None, str | None]],
    acceptance_length: float | None = None,
    subject: str = "",
) -> ReportWarning | None:
    """Outputs capped too short to measure acceptance (the module's rule): `outputs` are the successful requests'
    (output tokens, finish reason), either None where unknown; `acceptance_length` the tokens per step measured
    (None: unknown, k + 1 is taken). None when k or every length is unknown."""
    lengths = [n for n, _ in outputs if n is not None]
    if not k or k < 1 or not lengths:
        return None
    # a length outside 1..k + 1 is no step's: full acceptance then
    measured = acceptance_length if acceptance_length is not None and 1 < acceptance_length <= k + 1 else None
    per_step = float(measured if measured is not None else k + 1)
    needed = math.ceil(SHORT_OUTPUT_STEPS * per_step)
    median = statistics.median(lengths)
    reasons = [why for _, why in outputs if why is not None]
    capped = sum(1 for why in reasons if why == "length") / len(reasons) if reasons else None
    if median >= needed or (capped is not None and capped < 0.5):
        return None
    fields = {
        "k": k,
        "tokens_per_step": per_step,
        "measured": measured is not None,  # per_step is the acceptance length measured, not k + 1
        "median_output_tokens": median,
        "needed": needed,
        "capped": capped,
        "requests": len(lengths),
    }
    return ReportWarning(WarningKind.ACCEPTANCE_SHORT_OUTPUTS, subject, fields=fields)
