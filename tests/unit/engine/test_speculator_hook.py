"""The speculation hook: a test speculator with greedy verification leaves greedy output unchanged."""

from __future__ import annotations

import torch
from tests.fakes.engine_fakes import VOCAB, one_torch_thread, prompts, tiny_model  # noqa: F401 (autouse fixture)

from speculab.engine.engine import Engine, EngineConfig
from speculab.engine.sampling import request_probs
from speculab.engine.sequence import FinishReason, SamplingParams, Sequence


class RandomDraftGreedySpeculator:
    """Drafts are random tokens or, for some rows, the true continuation (so runs of several are accepted)."""

    def __init__(self, k: int, oracle: dict[str, list[int]]):
        self.num_speculative_tokens = k
        self.oracle = oracle
        self.g = torch.Generator().manual_seed(0)
        self.released: list[str] = []

    def propose(self, seqs: list[Sequence], max_drafts: list[int]) -> list[list[int]]:
        out = []
        for s, m in zip(seqs, max_drafts, strict=True):
            truth = self.oracle[s.request_id][s.num_output_tokens : s.num_output_tokens + m]
            n = int(torch.randint(0, m + 1, (1,), generator=self.g))
            noise = torch.randint(0, VOCAB, (m,), generator=self.g).tolist()
            out.append(truth[:n] + noise[n:m])  # ragged acceptance: the first n drafts are right
        return out

    def verify(self, seqs, drafts, target_logits, generator):
        emitted = []
        for i, (s, d) in enumerate(zip(seqs, drafts, strict=True)):
            rows = target_logits[i, : len(d) + 1]
            probs = request_probs(rows, [s] * len(rows), [s.num_output_tokens + j for j in range(len(rows))])
            best = probs.argmax(-1).tolist()
            n = 0
            while n < len(d) and d[n] == best[n]:
                n += 1
            emitted.append([*d[:n], best[n]])
            s.spec.num_drafts += 1
            s.spec.num_draft_tokens += len(d)
            s.spec.num_accepted_tokens += n
        return emitted

    def release(self, seq: Sequence) -> None:
        self.released.append(seq.request_id)


def test_speculative_hook_reproduces_plain_greedy_with_eos_and_max_tokens():
    model = tiny_model()
    ps = prompts(8, seed=11)
    cfg = EngineConfig(max_num_seqs=8, max_model_len=128, max_num_batched_tokens=256)
    free = Engine(model, cfg).generate(ps, SamplingParams(max_tokens=24, temperature=0.0))
    oracle = {f"r{i}": s.output_ids for i, s in enumerate(free)}
    eos = free[0].output_ids[10]  # appears mid-run in at least one sequence: the cut must land there
    plain = Engine(model, cfg, eos_token_ids={eos}).generate(ps, SamplingParams(max_tokens=24, temperature=0.0))
    spec = RandomDraftGreedySpeculator(4, oracle)
    eng = Engine(model, cfg, eos_token_ids={eos}, speculator=spec)
    seqs = [eng.add_request(f"r{i}", p, SamplingParams(max_tokens=24, temperature=0.0)) for i, p in enumerate(ps)]
    multi_token_events = 0
    while eng.has_unfinished():
        for out in eng.step():
            multi_token_events += len(out.new_token_ids) > 1
    assert [s.output_ids for s in seqs] == [s.output_ids for s in plain]
    assert [s.finish_reason for s in seqs] == [s.finish_reason for s in plain]
    assert any(s.finish_reason is FinishReason.STOP for s in seqs)
    assert multi_token_events > 0
    assert sorted(spec.released) == sorted(f"r{i}" for i in range(8))
    assert sum(s.spec.num_accepted_tokens for s in seqs) > 0
    assert sorted(eng.scheduler.free_slots) == list(range(8))
