"""The sentences of every record a command keeps instead of words, one per kind, made from the record's fields when
rendering: below the report nothing is worded (#48 item 3), and a file written when warnings were sentences still
renders what it saved (kind `note`). `phrases.warning_text` is the one entry point for a warning; the verdict's own
warnings are worded there, every other family here:

- `runs`: a bench run's warnings (its numbers, the client's health, the request options a server refused, fitting),
  the client workers', an A/B run's notes, compare's own, diagnose's;
- `files`: what the readers of other tools' result files found in a file (their frames around the tool's nouns);
- `reasons`: why acceptance is unknown, what showed a server gone, a look's open comparisons, the plan's warnings;
- `methods`: why a method can run here or cannot (`speculab methods`, init's commented entries), a draft's vocabulary;
- `verdict`: a metric's note, the correctness verdict, a failed check (`VERDICT_WORDS`), the error gate's line and a
  run-level comparison's notes;
- `findings`: diagnose's findings (`finding_words`), its queueing check and disaggregation suggestion;
- `validity`: why acceptance is not the user's traffic's (synthetic prompts, ignore_eos, forced, short outputs).
- `paired_checks`: correctness beyond equality (stream against unary, structured outputs, a lossy candidate);
- `findings`: diagnose's findings (`finding_words`), its queueing check and disaggregation suggestion.
"""

from __future__ import annotations

from collections.abc import Callable

from speculab.harness.results.warnings import WarningKind
from speculab.report.words.files import FILE_WORDS
from speculab.report.words.findings import (
    FINDING_WORDS,
    FindingWords,
    disaggregation_text,
    finding_words,
    queueing_note,
)
from speculab.report.words.methods import METHOD_WORDS, vocab_words
from speculab.report.words.paired_checks import PAIRED_CHECK_WORDS
from speculab.report.words.reasons import REASON_WORDS, Fields
from speculab.report.words.runs import RUN_WORDS
from speculab.report.words.validity import NOT_USERS_ANSWER, NOT_USERS_K, VALIDITY_WORDS
from speculab.report.words.verdict import GATE_WORDS, VERDICT_WORDS

# Every warning kind besides the verdict's own (report.phrases), one sentence each; the families share no kind
WORDS: dict[WarningKind, Callable[[Fields], str]] = {
    **RUN_WORDS,
    **FILE_WORDS,
    **REASON_WORDS,
    **METHOD_WORDS,
    **GATE_WORDS,
    **VALIDITY_WORDS,
    **PAIRED_CHECK_WORDS,
}

__all__ = [
    "FINDING_WORDS",
    "METHOD_WORDS",
    "NOT_USERS_ANSWER",
    "NOT_USERS_K",
    "VERDICT_WORDS",
    "WORDS",
    "FindingWords",
    "disaggregation_text",
    "finding_words",
    "queueing_note",
    "vocab_words",
]
