"""`opsconsole predict`: what an untried speculative setup would do on a host's traffic, from its own records.

    acceptance.py   drafts accepted per round as a process over the output (runs), fitted to the histograms (pure)
    cost.py         a decode round's cost by setup and batch, Bayesian linear regression over the records (pure)
    evidence.py     a host's benchmark records reduced to what a prediction rests on (pure)
    forecast.py     per setup and level: output tok/s, TPOT, accept length, each with a band, and a verdict (pure)

What the rest of console/ uses is imported from here; the modules are this package's own."""

from console.core.predict.acceptance import Fit, Histogram, Runs, fit_histograms, fit_means, mean_accepted
from console.core.predict.evidence import Evidence, Measured, overlap_of, workload_key
from console.core.predict.forecast import Figure, LevelForecast, Predictor, SetupForecast, Split, Unknown, Verdict

__all__ = [
    "Evidence",
    "Figure",
    "Fit",
    "Histogram",
    "LevelForecast",
    "Measured",
    "Predictor",
    "Runs",
    "SetupForecast",
    "Split",
    "Unknown",
    "Verdict",
    "fit_histograms",
    "fit_means",
    "mean_accepted",
    "overlap_of",
    "workload_key",
]
