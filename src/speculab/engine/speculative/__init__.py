"""Speculative decoding for the reference engine, behind the engine's `SpeculationHook`: it never imports the harness,
the report or the engine's HTTP server, and it sees token ids, logits and hidden states, never the requests' text.

The proposers (package `proposers`) draft tokens behind one interface (`proposer`): n-gram prompt lookup
(`ngram`), a draft model (`draft_model`) and an EAGLE head over the target's hidden states (`eagle`, `eagle_head`),
the last two sharing one drafting loop (`drafting`). `verify` accepts a prefix of the drafts exactly (greedy and
rejection sampling); `speculator` joins a proposer and `verify` into the engine's `SpeculationHook`, with `adaptive`
choosing how many tokens each step drafts. `config` turns `--speculative-config` into a speculator; `metrics` exposes
its counters as a Prometheus collector.

From speculab it imports only the engine's core (model, sampling, sequence, loader) and `speculab.errors`. The
engine loop knows only the hook; the server builds the speculator and registers its metrics
(`speculab.engine.server.launch`).
"""
