"""SGLang's own renamings on the dashboard (issue 36): a unit asking `--speculative-algorithm NEXTN` runs the EAGLE
worker by SGLang's design (NEXTN is MTP, an alias resolved before anything else). The server panel says so,
"NEXTN (runs as EAGLE)", without the mark of a silent change, which stays for values SGLang really runs otherwise."""

from __future__ import annotations

from console.core.status import Monitor, SetupValue, UnitAsk
from console.host.ssh import ConnectionState
from console.sglang.vocabulary import runs_as
from console.tui.widgets.panels import render_server
from tests.tui.support import NOW, status


def _panel(asked: str, resolved: str) -> str:
    scripted = status("gpu-a")
    sglang = scripted.sglang.model_copy(update={"speculative_algorithm": resolved})
    running = scripted.model_copy(update={"sglang": sglang})
    view = Monitor("gpu-a").refreshed(
        running,
        histograms={},
        asked=UnitAsk({"speculative_algorithm": asked, "speculative_num_steps": 2}, True),
        connection=ConnectionState("connected"),
        at=NOW,
        clock=0.0,
    )
    line = next(line for line in render_server(view, NOW, history_width=0, width=60).plain.splitlines()
                if "speculative" in line)  # fmt: skip
    return line.split("speculative", 1)[1].strip()


def test_nextn_reads_as_what_the_unit_asks_and_what_sglang_runs_it_as_without_the_drift_mark() -> None:
    assert _panel("NEXTN", "EAGLE") == "NEXTN (runs as EAGLE)"


def test_a_real_difference_keeps_its_mark() -> None:
    assert _panel("EAGLE3", "EAGLE") == "EAGLE* (unit asks EAGLE3)"  # not an alias: SGLang runs another worker
    assert _panel("NEXTN", "EAGLE3") == "EAGLE3* (unit asks NEXTN)"  # NEXTN is EAGLE's alias, not EAGLE3's
    assert _panel("EAGLE3", "EAGLE3") == "EAGLE3"


def test_an_alias_is_neither_a_change_nor_counted_where_the_unit_leaves_the_value_to_sglang() -> None:
    assert runs_as("speculative_algorithm", "NEXTN") == "EAGLE" and runs_as("speculative_algorithm", "EAGLE") is None
    assert runs_as("speculative_num_steps", "NEXTN") is None and runs_as("speculative_algorithm", 3) is None
    aliased = SetupValue("speculative_algorithm", "NEXTN", "EAGLE", explicit=True)
    assert aliased.aliased and not aliased.changed
    drift = SetupValue("speculative_algorithm", "EAGLE3", "EAGLE", explicit=True)
    assert drift.changed and not drift.aliased
    unset = SetupValue("speculative_algorithm", None, "EAGLE", explicit=False)
    assert not unset.aliased and not unset.changed
