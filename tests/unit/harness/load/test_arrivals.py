import numpy as np
import pytest

from speculab.errors import UserError
from speculab.harness.load.arrivals import ArrivalConfig, schedule


def test_constant():
    assert schedule(ArrivalConfig(4.0, "constant"), 4, np.random.default_rng(0)) == (0.0, 0.25, 0.5, 0.75)


@pytest.mark.parametrize("kind,burst", [("poisson", 1.0), ("gamma", 0.25), ("gamma", 4.0)])
def test_mean_rate_and_seeded(kind, burst):
    cfg = ArrivalConfig(10.0, kind, burst)
    a = schedule(cfg, 20_000, np.random.default_rng(1))
    assert a == schedule(cfg, 20_000, np.random.default_rng(1))
    gaps = np.diff(a)
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    # coefficient of variation of gamma(k) inter-arrivals is 1/sqrt(k): burstiness changes spread, not rate
    assert gaps.std() / gaps.mean() == pytest.approx(1 / np.sqrt(burst), rel=0.1)


@pytest.mark.parametrize(
    "kw",
    [
        dict(rate_rps=0),
        dict(rate_rps=-1),
        dict(rate_rps=1, kind="x"),
        dict(rate_rps=1, burstiness=0),
        dict(rate_rps=1, burstiness=0.5),  # a Poisson load would silently ignore it
        dict(rate_rps=1, kind="constant", burstiness=2.0),
    ],
)
def test_bad_config(kw):
    with pytest.raises(UserError):
        ArrivalConfig(**kw)
