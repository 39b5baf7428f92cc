"""How far the next measurement falls from the last: the spread a band carries beside the model's own (pure).

A run of a setup after a restart differs from what the records measured for two reasons, and each band counts both:

- **the runs**: two runs of one launch differ (a level's requests, the batch's timing; at C = 1 a run is a few
  requests, whose accept lengths differ). `Evidence.spread` measures it: the relative standard deviation pooled over
  the cells run more than once, every level's, and a level's own where it was repeated and came out wider
  (forecast._spread_at), taken at Student's t of the pooled degrees of freedom (two runs of three levels: 3);
- **the launches**: a server started again differs from the one before by more than its runs differ from each other
  (the H100's 8B: steps 2 at C = 1 ran 222 tok/s in one launch and 238 in the next, its runs 1-5 % apart; the H200's
  tiny server: steps 3 at C = 16, 2,784 and 3,730 tok/s). A record does not say which start of the server it ran in;
  a change of setup does (`evidence.launches`). The launches' variance, as a multiple of the runs' (the ratio, so
  that a host whose runs spread little is not given a launch term from a noisier host), is estimated from the cells
  the records hold in more than one launch (`Evidence.launch_ratio`), drawn towards a prior of LAUNCH_PRIOR with the
  weight of LAUNCH_PRIOR_DOF launches: the captures measured it at 0.42 (the H100's 8B, tok/s, over 9 launch degrees
  of freedom), 0.67 (its accept length), 0.26 and 0 (the H200's two sessions, tok/s), 0 (their accept length): the
  prior is the round figure above them all (tests/core/test_predict_spread.py).

A band for one run (what `predict` shows) takes both; the verdict, which asks whether a restart would pay, compares
means: a new launch's (the launches' spread) with the running setup's (its runs' spread over the square root of
their count).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# A launch differs from the next by this multiple of the variance of two runs of one launch, before the records show
# their own (console/core/predict/spread.py's docstring: what the captures measured), and how many launch degrees of
# freedom that prior weighs (the records' own estimate, from n launches of one setup, counts n - 1).
LAUNCH_PRIOR = 1.0
LAUNCH_PRIOR_DOF = 2

# Student's t at 97.5 % by degrees of freedom (the normal's 1.96 past the table): a 95 % band of the runs' spread,
# which the records estimate from few repeats (two runs of each of three levels: 3 degrees of freedom, t = 3.18).
# Before issue 46 the band took twice the median half-spread, about 1.1 standard deviations: it held three runs in
# four on the H100's and H200's captures, where it said 95 %.
_T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 12: 2.18,
         15: 2.13, 20: 2.09, 30: 2.04}  # fmt: skip


def t975(dof: int) -> float:
    """Student's t quantile at 97.5 % (the next tabulated degrees of freedom below, conservatively)."""
    if dof <= 0:
        return 1.96
    known = [d for d in _T975 if d <= dof]
    return _T975[max(known)] if dof <= 30 else 1.96


def launch_ratio(estimate: tuple[float, int] | None) -> float:
    """The launches' variance over the runs', the records' estimate (ratio, degrees of freedom) drawn towards the
    prior by their weights."""
    if estimate is None:
        return LAUNCH_PRIOR
    ratio, dof = estimate
    return (LAUNCH_PRIOR * LAUNCH_PRIOR_DOF + ratio * dof) / (LAUNCH_PRIOR_DOF + dof)


@dataclass(frozen=True, slots=True)
class Spread:
    """The runs' relative standard deviation at a level (None: no run repeated), the degrees of freedom it rests on,
    and the launches' variance as a multiple of it."""

    sd: float | None
    dof: int
    launches: float

    @property
    def t(self) -> float:
        return t975(self.dof)

    @property
    def run(self) -> float:
        """A 95 % half-width for one run of a new launch, relative."""
        return self.t * self.sd * math.sqrt(1.0 + self.launches) if self.sd is not None else 0.0

    @property
    def launch(self) -> float:
        """A 95 % half-width for the mean of a new launch (its runs averaged out), relative."""
        return self.t * self.sd * math.sqrt(self.launches) if self.sd is not None else 0.0

    def mean(self, runs: int) -> float:
        """A 95 % half-width for the mean of `runs` runs of one launch, relative."""
        return self.t * self.sd / math.sqrt(max(runs, 1)) if self.sd is not None else 0.0
