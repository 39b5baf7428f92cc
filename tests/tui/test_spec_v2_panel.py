"""The dashboard's server panel says spec v2 as the server runs it (issue 22, item 1): "spec v2 off  overlap off" for
SGLang 0.5.9 running EAGLE with the overlap off, even where the unit was read as spec v2."""

from __future__ import annotations

from console.core.status import UnitAsk
from console.tui.widgets.panels import render_server
from tests.core.test_spec_verdict import T0, _dashboard


def test_the_server_panel_says_spec_v2_off_where_the_server_runs_spec_v1() -> None:
    view = _dashboard(UnitAsk({}, spec_v2=True, overlap=True))
    text = render_server(view, T0, history_width=0).plain
    assert "spec v2 off  overlap off" in text and "spec v2 on" not in text
