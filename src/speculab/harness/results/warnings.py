"""What a reader of an A/B report must be warned of, as records: a kind from a closed set, whom it is about, and the
numbers; the sentence is made when rendering (`speculab.report.phrases.warning_text`), never stored here.

The verdict (`harness.verdict`) produces them; summary.json saves them (with the sentence beside, for people reading
the file). They live with the results, below the verdict, so that the verdict's correctness and its model both use
one type. Notes the lifecycle and the readers of other tools' files wrote as their own words (`ABRun.notes`)
are carried as kind `note`, and so is every warning of a summary.json written when warnings were sentences.
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
    CHANGE_UNVERIFIED = "change_unverified"  # the single change could not be verified: note
    NO_VERDICT = "no_verdict"  # a gate withheld the verdict: reason (subject: every candidate it withheld)
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
    # the TPOT speedup (the per-prompt effect) and the ratio of the arms' p50 TPOTs differ by more than the margin,
    # once for the run: where [{subject, load, speedup, medians_speedup, pairs, faster, slower, quartiles, split}]
    EFFECT_NOT_MEDIANS = "effect_not_medians"
    WHAT_IF_SKIPPED = "what_if_skipped"  # the what-if model refused the acceptance: error
    CHECK_ERROR = "check_error"  # an item's check could not run: item, error
    CONTEXT_DIFFERS = "context_differs"  # conversation turns not compared for identical output: count
    PYTHON_CHECKS_SKIPPED = "python_checks_skipped"  # count, flag (the opt-in)
    PYTHON_CHECKS_RAN = "python_checks_ran"  # count, flag
    UNCLASSIFIED_DIVERGENCES = "unclassified_divergences"  # outputs differ at temperature 0, no logprobs: count
    BASELINE_SELF_DIFFERS = "baseline_self_differs"  # the baseline disagreed with itself at temperature 0: rate
    NOTE = "note"  # words a note or an older summary.json wrote: text


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

    def key(self) -> tuple[Any, ...]:
        """What makes two warnings the same warning (records holding a mapping are not hashable)."""
        return (self.kind, self.subject, self.load, tuple(sorted((k, repr(v)) for k, v in self.fields.items())))


def distinct(warnings: Iterable[ReportWarning]) -> list[ReportWarning]:
    """Each warning once, in first-seen order."""
    seen: dict[tuple[Any, ...], ReportWarning] = {}
    for w in warnings:
        seen.setdefault(w.key(), w)
    return list(seen.values())
