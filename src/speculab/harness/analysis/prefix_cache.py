"""Pure: did speculation change the prefix-cache hit rate beyond noise?

Users see speculation silently change prefix-cache reuse (SGLang #32459: EAGLE cut multi-turn radix reuse from 97%
to 40-53%; vLLM #54360), and a TTFT difference then comes from the cache, not from speculation's own cost. Both arms
send the same prompts in the same order, so a deterministic cache gives them the same hit rate; what differs is
eviction under memory pressure (a draft model's KV takes room) and timing under concurrency.

"Beyond noise": the hit rate is a fraction of prompt tokens, but tokens are not independent trials — a request's
tokens hit or miss together, block by block, and a shared prefix makes whole requests hit together. So the test
counts requests, not tokens, as the trials: a pooled two-proportion z-test of the two arms' hit rates with n = the
number of measured requests in each arm (the conservative end of the effective sample size, which lies between the
requests and the tokens), at p < 0.01, and the difference must be at least 5 percentage points to matter.
"""

from __future__ import annotations

from dataclasses import dataclass

from speculab.harness.stats import two_proportion_p

MIN_DIFFERENCE = 0.05  # absolute hit-rate difference below which no one needs to hear about it
# A warning, not a verdict: only a change this unlikely under no difference is worth a reader's attention.
WARNING_ALPHA = 0.01


@dataclass(frozen=True, slots=True)
class HitRateChange:
    baseline_hit_rate: float
    candidate_hit_rate: float
    baseline_requests: int
    candidate_requests: int
    p_value: float  # two-proportion z-test, n = requests (see the module docstring)
    beyond_noise: bool

    @property
    def difference(self) -> float:
        return self.candidate_hit_rate - self.baseline_hit_rate


def compare_hit_rates(base_rate: float, base_requests: int, cand_rate: float, cand_requests: int) -> HitRateChange:
    p = two_proportion_p(base_rate, base_requests, cand_rate, cand_requests)
    beyond = abs(cand_rate - base_rate) >= MIN_DIFFERENCE and p < WARNING_ALPHA
    return HitRateChange(base_rate, cand_rate, base_requests, cand_requests, p, beyond)
