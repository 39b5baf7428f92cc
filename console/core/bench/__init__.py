"""Benchmarks from the console and the CLI: a sweep on a host session or a URL, the form and queue of them,
and comparisons written out.

    host.py     bench_host / run_bench: a sweep on an open host session (its forward, GPUs, unit) or on a URL
    deployment.py  bench_deployment: a deployment through its front door (rank 0, or smg with each level's figures
                side by side)
    queue.py    the console's benchmark form (kept in the workspace), the sweeps it makes, the queue that runs them
    export.py   a comparison of runs written out as Markdown and JSON
    tokens.py   a dataset's lengths in the model's tokens (the server's /tokenize, the host's tokenizer files, words)
    traffic_shape.py  `bench --shape-from-server`: the server's own traffic observed for a window, the sweep drawn
                from it

What the rest of console/ uses is imported from here; the modules are this package's own."""

from console.core.bench.deployment import (
    PdLevelSides,
    bench_deployment,
)
from console.core.bench.export import (
    export_comparison,
)
from console.core.bench.host import (
    API_KEY_ENV,
    bench_host,
    bench_url,
    default_label,
    parse_float_list,
    parse_int_list,
    run_bench,
)
from console.core.bench.queue import (
    CAPACITY_CHOICES,
    WORKLOAD_CHOICES,
    BenchForm,
    FormErrors,
    PlannedSweep,
    SweepQueued,
    bench_queue,
    dataset_files,
    load_form,
    plan_sweeps,
    proposed_label,
    save_form,
    slo_text,
)
from console.core.bench.tokens import LengthsCounted
from console.core.bench.traffic_shape import (
    ShapeAsk,
    ShapeObserved,
    ShapeObserving,
    shape_the_sweep,
    shaped_sweep,
)

__all__ = [
    "API_KEY_ENV",
    "CAPACITY_CHOICES",
    "WORKLOAD_CHOICES",
    "BenchForm",
    "FormErrors",
    "LengthsCounted",
    "PdLevelSides",
    "PlannedSweep",
    "ShapeAsk",
    "ShapeObserved",
    "ShapeObserving",
    "SweepQueued",
    "bench_deployment",
    "bench_host",
    "bench_queue",
    "bench_url",
    "dataset_files",
    "default_label",
    "export_comparison",
    "load_form",
    "parse_float_list",
    "parse_int_list",
    "plan_sweeps",
    "proposed_label",
    "run_bench",
    "save_form",
    "shape_the_sweep",
    "shaped_sweep",
    "slo_text",
]
