"""The files a workload is read from: JSONL (one request a line), ShareGPT conversations, Spec-Bench / MT-Bench /
SPEED-Bench question sets, and timestamped traces. Each turns a file into `SourceItem`s, with file:line errors; none
knows how the items are fitted, sent or judged."""
