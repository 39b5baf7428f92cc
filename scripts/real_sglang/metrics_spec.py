"""Write the stand-in's /metrics family table from a real SGLang server's /metrics capture.

    python3 scripts/real_sglang/metrics_spec.py CAPTURE.txt VERSION > console/sim/metricdata/sglang-VERSION.json

For every family: name, type, help, label names, histogram buckets, and the label values of the children a
server has from its start (startup phases, graph phases, CUDA-graph modes, routing-key buckets, components,
request stages). Children whose labels depend on traffic (is_streaming, endpoint, method, status_code,
cache_source) are made by the stand-in as requests arrive. The label values of model, ranks and pid are the
server's own and are not recorded.
"""

from __future__ import annotations

import json
import sys

from prometheus_client.parser import text_string_to_metric_families

OWN = {"engine_type", "model_name", "tp_rank", "pp_rank", "moe_ep_rank", "pid", "le", "quantile"}
TRAFFIC = {"is_streaming", "endpoint", "method", "status_code", "cache_source"}


def main() -> None:
    with open(sys.argv[1]) as f:
        text = f.read()
    helps = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, doc = line[7:].partition(" ")
            helps[name] = doc
    families = []
    for fam in text_string_to_metric_families(text):
        labels: set[str] = set()
        buckets: list[float] = []
        static: list[dict[str, str]] = []
        for sample in fam.samples:
            labels |= {k for k in sample.labels if k not in ("le", "quantile")}
            if sample.name.endswith("_bucket") and float(sample.labels["le"]) not in buckets:
                buckets.append(float(sample.labels["le"]))
            child = {k: v for k, v in sample.labels.items() if k not in OWN}
            if child and not (set(child) & TRAFFIC) and child not in static:
                static.append(child)
        exposed = fam.name + ("_total" if fam.type == "counter" else "")
        families.append(
            {
                "name": fam.name,
                "type": fam.type,
                "help": helps.get(exposed, helps.get(fam.name, "")),
                "labels": sorted(labels),
                "buckets": [b for b in buckets if b != float("inf")] if fam.type == "histogram" else None,
                "static_children": static,
            }
        )
    json.dump({"version": sys.argv[2], "families": families}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
