"""The engine step: schedule -> (propose) -> forward -> (verify) -> append -> events.

`Engine` is synchronous and single-threaded; `speculab.engine.async_engine` runs it in a background
thread for the server. It knows token ids only: text comes from an injected detokenizer factory
(needed for stop strings), so the core is testable with a tiny random model and a fake tokenizer.

Speculative decoding plugs in through `SpeculationHook` (implemented by `speculab.engine.speculative.speculator`):
before the decode forward it proposes draft tokens per sequence; the forward runs each decode row as
[last token, draft_1..draft_k] and returns logits at every position; the speculator's `verify` turns
those into the tokens to emit (ragged, 1..k+1 per row); appending applies eos / stop / max_tokens token
by token, exactly as plain decoding would, and the KV cache keeps only the verified prefix.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from speculab.engine.model import CausalLM
from speculab.engine.model_runner import ModelRunner, Row
from speculab.engine.recovery import contained, run_isolated
from speculab.engine.sampling import ban_tokens, request_probs, sample, token_logprobs
from speculab.engine.scheduler import PrefillChunk, Scheduler, SchedulerConfig
from speculab.engine.sequence import Detokenizer, FinishReason, SamplingParams, Sequence, SequenceOutput, TokenLogprob


class InvalidRequest(ValueError):
    """A request this engine cannot run; `param` names the offending request field."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


class SpeculationHook(Protocol):
    """Speculative decoding as the engine sees it. `num_speculative_tokens` bounds the drafts per row."""

    num_speculative_tokens: int

    def propose(self, seqs: list[Sequence], max_drafts: list[int]) -> list[list[int]]:
        """Draft tokens per sequence (0..max_drafts[i] of them), continuing seq.token_ids.

        A draft model catches its own cache up here (it sees each sequence's full token list).
        """
        ...

    def verify(
        self,
        seqs: list[Sequence],
        drafts: list[list[int]],
        target_logits: torch.Tensor,  # [B, 1 + max k, V] float32; row i position j scores the token after draft j
        generator: torch.Generator,  # for requests without a seed
    ) -> list[list[int]]:
        """Tokens to emit per sequence: the accepted draft prefix plus one target token (1..k+1 each).

        Use `speculab.engine.sampling.request_probs` for the target's p and the draft's q alike; update
        each `seq.spec` (drafts, draft tokens, accepted tokens).
        """
        ...

    def release(self, seq: Sequence) -> None:
        """The sequence finished or was aborted: free whatever the speculator holds for it."""
        ...


@runtime_checkable
class TargetHiddenHook(Protocol):
    """A speculator that drafts from the target's hidden states (EAGLE): the engine hands it the final-norm
    hidden states of every position whose target KV it keeps (prompt chunks, and the verified prefix of each
    decode row), in order, before that sequence's next `propose`."""

    @property
    def wants_target_hidden(self) -> bool: ...

    def record_target_hidden(
        self,
        seqs: list[Sequence],
        starts: list[int],  # [B] absolute position of hidden[b, 0]
        hidden: torch.Tensor,  # [B, S, H]
        counts: list[int],  # [B] leading positions of row b to keep
    ) -> None: ...


@runtime_checkable
class CalibratedHook(Protocol):
    """A speculator that times the target's forward at a grid of batch shapes before serving (the adaptive
    policy's cost table): `run_forward(rows, width)` runs one forward of rows x width tokens to completion."""

    def calibrate(self, run_forward: Callable[[int, int], None], max_rows: int) -> None: ...


@dataclass(frozen=True, slots=True)
class EngineConfig:
    max_num_seqs: int = 8
    max_model_len: int = 2048
    max_num_batched_tokens: int = 2048  # per-step token budget (prefill chunks + decode rows)
    max_waiting: int = 256  # waiting-queue bound; past it requests are refused (HTTP 429)
    seed: int = 0  # engine RNG for requests without their own seed

    def scheduler_config(self) -> SchedulerConfig:
        return SchedulerConfig(self.max_num_seqs, self.max_model_len, self.max_num_batched_tokens, self.max_waiting)


class Engine:
    def __init__(
        self,
        model: CausalLM,
        cfg: EngineConfig,
        *,
        eos_token_ids: frozenset[int] | set[int] = frozenset(),
        detokenizer_factory: Callable[[list[int]], Detokenizer] | None = None,
        speculator: SpeculationHook | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        if cfg.max_model_len > model.config.max_position_embeddings:
            n_pos = model.config.max_position_embeddings
            raise ValueError(f"max_model_len {cfg.max_model_len} exceeds the model's {n_pos} positions")
        self.cfg = cfg
        self.model = model
        self.runner = ModelRunner(model, cfg.max_num_seqs, cfg.max_model_len)
        self.scheduler = Scheduler(cfg.scheduler_config())
        self.eos_token_ids = frozenset(eos_token_ids)
        self.detokenizer_factory = detokenizer_factory
        self.speculator = speculator
        # An EAGLE speculator drafts from the target's features: forwards then return hidden states too.
        self._record_hidden = isinstance(speculator, TargetHiddenHook) and speculator.wants_target_hidden
        self.clock = clock
        if isinstance(speculator, CalibratedHook):
            speculator.calibrate(self._calibration_forward, cfg.max_num_seqs)
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.num_prompt_tokens_total = 0  # prompt tokens prefilled (counters for /metrics)
        self.num_generation_tokens_total = 0  # output tokens emitted
        self._generate_count = 0

    def _calibration_forward(self, rows: int, width: int) -> None:
        """One decode forward of rows x width tokens on slots 0.. (all free before serving), finished on return.

        It writes the free slots' caches past position 0, which nothing reads: a request's prefill overwrites
        them before its queries can see them. The context (128 positions) is a typical one; the adaptive policy
        refines its figures with every real step's own timing.
        """
        start = max(0, min(128, self.cfg.max_model_len - width - 1))
        self.runner.forward([Row(slot, [0] * width, start) for slot in range(rows)], "all", hidden=self._record_hidden)
        if self.runner.device.type == "cuda":
            torch.cuda.synchronize()  # kernels are asynchronous: the caller times their completion, not their launch

    # --- requests ----------------------------------------------------------------------------------
    def validate(self, prompt_ids: list[int], params: SamplingParams) -> None:
        """Raise ValueError naming the problem if this request cannot run on this engine."""
        n, limit = len(prompt_ids), self.cfg.max_model_len
        if n == 0:
            raise InvalidRequest("prompt is empty", "prompt")
        if n >= limit:
            raise InvalidRequest(
                f"prompt has {n} tokens; this model's context is {limit} tokens (max_model_len)", "prompt"
            )
        if n + params.max_tokens > limit:
            raise InvalidRequest(
                f"max_tokens {params.max_tokens} + prompt {n} tokens exceeds the context of {limit} tokens (the "
                f"server setting --max-model-len); use max_tokens <= {limit - n}",
                "max_tokens",
            )
        v = self.model.config.vocab_size
        bad = [t for t in prompt_ids if not 0 <= t < v]
        if bad:
            raise InvalidRequest(f"prompt token id {bad[0]} is outside the vocabulary [0, {v})", "prompt")
        bad = [t for t in params.stop_token_ids if not 0 <= t < v]
        if bad:  # an id past the vocabulary would index past the logits (min_tokens bans); a negative one, wrap
            raise InvalidRequest(f"stop token id {bad[0]} is outside the vocabulary [0, {v})", "stop_token_ids")

    def add_request(self, request_id: str, prompt_ids: list[int], params: SamplingParams) -> Sequence:
        """Queue a request; raises ValueError (bad request) or QueueFull (retry later)."""
        self.validate(prompt_ids, params)
        seq = Sequence(
            request_id=request_id,
            prompt_ids=list(prompt_ids),
            params=params,
            eos_token_ids=self.eos_token_ids,
            detokenizer=self.detokenizer_factory(list(prompt_ids)) if self.detokenizer_factory else None,
            arrival_s=self.clock(),
        )
        self.scheduler.add(seq)
        return seq

    def abort(self, request_id: str) -> SequenceOutput | None:
        """Cancel a request and free its cache slot; its final event, or None if it already finished."""
        seq = self.scheduler.abort(request_id)
        if seq is None:
            return None
        if self.speculator is not None:
            self.speculator.release(seq)
        return seq.take_output()

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    def reset(self) -> list[str]:
        """Drop every request, after a failure that no single request explains; returns their ids.

        The engine is empty and usable afterwards: a fresh scheduler hands out every slot again, and stale KV
        is never read (a new sequence overwrites its slot's positions before reading them).
        """
        seqs = [*self.scheduler.waiting, *self.scheduler.running]
        for seq in seqs:
            if self.speculator is not None:
                with contained(seq):
                    self.speculator.release(seq)
        self.scheduler = Scheduler(self.cfg.scheduler_config())
        return [s.request_id for s in seqs]

    @property
    def num_running(self) -> int:
        return self.scheduler.num_running

    @property
    def num_waiting(self) -> int:
        return self.scheduler.num_waiting

    def kv_usage(self) -> float:
        return self.scheduler.kv_usage()

    # --- the step ----------------------------------------------------------------------------------
    def step(self) -> list[SequenceOutput]:
        """Run one scheduling step; an event for every sequence that produced tokens or finished.

        A request whose share of the step raises finishes with FinishReason.ERROR; the others go on (recovery.py).
        """
        width = 1 + (self.speculator.num_speculative_tokens if self.speculator else 0)
        plan = self.scheduler.schedule(decode_width=width)
        now = self.clock()
        for c in plan.prefill:
            if c.seq.scheduled_s is None:
                c.seq.scheduled_s = now
        touched: list[Sequence] = []
        if plan.decode:
            touched += run_isolated(self, plan.decode, self._decode, lambda s: s)
        if plan.prefill:
            touched += run_isolated(self, plan.prefill, self._prefill, lambda c: c.seq)
        outputs = []
        for seq in touched:
            if seq.is_finished:
                self.scheduler.free(seq)
                if self.speculator is not None:
                    with contained(seq):
                        self.speculator.release(seq)
            outputs.append(seq.take_output())
        return outputs

    def _prefill(self, chunks: list[PrefillChunk]) -> list[Sequence]:
        rows = [Row(c.seq.slot, c.seq.prompt_ids[c.start : c.start + c.length], c.start) for c in chunks]  # type: ignore[arg-type]
        done = [i for i, c in enumerate(chunks) if c.completes_prompt]
        out = self.runner.forward(rows, "last" if done else "none", hidden=self._record_hidden)
        if out.hidden is not None:
            self._record([c.seq for c in chunks], [c.start for c in chunks], out.hidden, [c.length for c in chunks])
        seqs = [chunks[i].seq for i in done]
        if done:
            self._sample_and_append(seqs, out.logits[done])  # type: ignore[index]  # [D, V]
        for c in chunks:  # after sampling: a failed batch leaves every cache length as it was
            c.seq.num_cached += c.length
            self.num_prompt_tokens_total += c.length
        return seqs

    def _decode(self, seqs: list[Sequence]) -> list[Sequence]:
        if self.speculator is None:
            rows = [Row(s.slot, [s.output_ids[-1]], s.num_cached) for s in seqs]  # type: ignore[arg-type]
            self._sample_and_append(seqs, self.runner.last_logits(rows))
            for s in seqs:
                s.num_cached += 1
            return seqs
        return self._decode_speculative(seqs)

    def _sample_and_append(self, seqs: list[Sequence], logits: torch.Tensor) -> None:
        """One new token per sequence from logits [B, V] at its last cached position."""
        out_index = [s.num_output_tokens for s in seqs]
        if all(s.params.greedy for s in seqs):  # the argmax of processed_probs' one-hot, without building it
            tokens = ban_tokens(logits, seqs, out_index).argmax(-1).tolist()
        else:
            tokens = sample(request_probs(logits, seqs, out_index), seqs, self.generator)
        lps = token_logprobs(logits, tokens, [s.params.logprobs for s in seqs])
        now = self.clock()
        for s, tok, lp in zip(seqs, tokens, lps, strict=True):
            with contained(s):
                self.num_generation_tokens_total += s.append([tok], [lp] if lp is not None else None, now_s=now)

    def _decode_speculative(self, seqs: list[Sequence]) -> list[Sequence]:
        spec = self.speculator
        assert spec is not None
        # Never draft past max_tokens: the last emitted token is always the target's own.
        max_drafts = [max(0, min(spec.num_speculative_tokens, s.remaining_tokens - 1)) for s in seqs]
        drafts = spec.propose(seqs, max_drafts)
        drafts = [d[:m] for d, m in zip(drafts, max_drafts, strict=True)]
        rows = [Row(s.slot, [s.output_ids[-1], *d], s.num_cached) for s, d in zip(seqs, drafts, strict=True)]  # type: ignore[arg-type]
        out = self.runner.forward(rows, "all", hidden=self._record_hidden)
        logits = out.logits  # [B, 1 + max k, V]
        assert logits is not None
        emitted = spec.verify(seqs, drafts, logits, self.generator)
        if out.hidden is not None:  # the features of the previous last token and the accepted drafts
            self._record(seqs, [s.num_cached for s in seqs], out.hidden, [len(t) for t in emitted])
        now = self.clock()
        for i, (s, toks) in enumerate(zip(seqs, emitted, strict=True)):
            with contained(s):
                if not 1 <= len(toks) <= len(drafts[i]) + 1:
                    raise RuntimeError(f"verify returned {len(toks)} tokens for {len(drafts[i])} drafts")
                lps = self._logprobs_along(s, logits[i, : len(toks)], toks)
                # KV is valid for the previous last token and the accepted drafts: old length + len(toks).
                s.num_cached += len(toks)
                self.num_generation_tokens_total += s.append(toks, lps, now_s=now)
        return seqs

    def _record(self, seqs: list[Sequence], starts: list[int], hidden: torch.Tensor, counts: list[int]) -> None:
        """Hand the target's hidden states [B, S, H] of the positions whose KV is kept to an EAGLE speculator."""
        hook: TargetHiddenHook = self.speculator  # type: ignore[assignment]
        hook.record_target_hidden(seqs, starts, hidden, counts)

    @staticmethod
    def _logprobs_along(seq: Sequence, logits: torch.Tensor, toks: list[int]) -> list[TokenLogprob] | None:
        if seq.params.logprobs is None:
            return None
        return token_logprobs(logits, toks, [seq.params.logprobs] * len(toks))  # type: ignore[return-value]

    # --- convenience for tests and offline use -----------------------------------------------------
    def generate(self, prompts: list[list[int]], params: SamplingParams | list[SamplingParams]) -> list[Sequence]:
        """Run prompts to completion (all submitted at once) and return their finished sequences."""
        plist = params if isinstance(params, list) else [params] * len(prompts)
        seqs = []
        for p, sp in zip(prompts, plist, strict=True):
            self._generate_count += 1
            seqs.append(self.add_request(f"generate-{self._generate_count}", p, sp))
        while self.has_unfinished():
            self.step()
        return seqs


__all__ = [
    "CalibratedHook",
    "Engine",
    "EngineConfig",
    "FinishReason",
    "InvalidRequest",
    "SamplingParams",
    "SpeculationHook",
    "TargetHiddenHook",
]
