"""`opsconsole tune`: the search space, the search, the run and its report, and the Tune screen's form.

    run.py      plan_tune -> PendingTune and the typed events it reports through: the stages and their trials
    host.py     what a tune does to what it tunes (TuneTarget): on a host, a trial's unit applied, a restart, health,
                a benchmark, the unit put back
    deployment.py  plan_deployment_tune: `tune DEPLOYMENT`, each trial the deployment's change, benchmarked through
                its front door, every member's original unit put back
    conclusions.py  what the measurements conclude: recommendations, capacities, crossovers, the setup to apply (pure)
    space.py    which speculative setups to try, pruned and merged by the version rules (pure)
    search.py   successive halving over candidates x cells (pure)
    timing.py   how long a planned tune takes: its starts and levels as it runs them, and its pace as it runs (pure)
    report.py   the objective, the standings, crossovers and the recommendation (pure)
    predict.py  `opsconsole predict`: each setup of the space forecast from the host's records (console.core.predict)
    form.py     the request as the Tune screen's fields ask for it (pure)

What the rest of console/ uses is imported from here; the modules are this package's own."""

from console.core.tune.deployment import (
    DeploymentTuneHost,
    plan_deployment_tune,
    reference_member,
)
from console.core.tune.form import (
    FIELDS,
    Estimate,
    FormError,
    afterwards,
    best_at_problem,
    dataset_sampling,
    estimate,
    form_defaults,
    meaning,
    request_from_form,
    space_from_axes,
)
from console.core.tune.predict import (
    PD_SCOPE,
    Foresight,
    PredictPlan,
    PredictRequest,
    PredictResult,
    bench_running,
    foresight,
    plan_predict,
    predict,
)
from console.core.tune.run import (
    LevelProgress,
    PendingTune,
    Restoring,
    SetupsPredicted,
    StageStarted,
    TrialApplied,
    TrialApplyEvent,
    TrialBenchEvent,
    TrialBenchmarked,
    TrialFailed,
    TrialRef,
    TrialSkipped,
    TrialStarted,
    TuneEvent,
    TuneFinished,
    TuneRequest,
    TuneResult,
    TuneStarted,
    plan_tune,
)
from console.core.tune.search import (
    Cell,
    ranges_overlap,
)
from console.core.tune.space import (
    Space,
    SpaceRequest,
    UnitSpeculation,
    build_space,
    space_from_file,
    unit_speculation,
)

__all__ = [
    "FIELDS",
    "PD_SCOPE",
    "Cell",
    "DeploymentTuneHost",
    "Estimate",
    "Foresight",
    "FormError",
    "LevelProgress",
    "PendingTune",
    "PredictPlan",
    "PredictRequest",
    "PredictResult",
    "Restoring",
    "SetupsPredicted",
    "Space",
    "SpaceRequest",
    "StageStarted",
    "TrialApplied",
    "TrialApplyEvent",
    "TrialBenchEvent",
    "TrialBenchmarked",
    "TrialFailed",
    "TrialRef",
    "TrialSkipped",
    "TrialStarted",
    "TuneEvent",
    "TuneFinished",
    "TuneRequest",
    "TuneResult",
    "TuneStarted",
    "UnitSpeculation",
    "afterwards",
    "bench_running",
    "best_at_problem",
    "build_space",
    "dataset_sampling",
    "estimate",
    "foresight",
    "form_defaults",
    "meaning",
    "plan_deployment_tune",
    "plan_predict",
    "plan_tune",
    "predict",
    "ranges_overlap",
    "reference_member",
    "request_from_form",
    "space_from_axes",
    "space_from_file",
    "unit_speculation",
]
