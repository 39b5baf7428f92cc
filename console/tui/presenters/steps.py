"""What each step of an apply is called where the console shows it."""

from __future__ import annotations

from console.core.change import ApplyState

# What each step of an apply (or a restart, a freeze) is called, on the progress screen and the roll board.
STEP_WORDS = {
    ApplyState.VALIDATED: "checked",
    ApplyState.BACKED_UP: "unit backed up",
    ApplyState.WRITTEN: "new unit written",
    ApplyState.DAEMON_RELOADED: "daemon-reload done",
    ApplyState.RESTARTING: "restarting",
    ApplyState.STARTING: "starting",
    ApplyState.HEALTHY: "healthy",
    ApplyState.VERIFIED: "verified",
    ApplyState.MISMATCH: "running, but not as predicted",
    ApplyState.FAILED: "the new unit did not come up",
    ApplyState.ROLLING_BACK: "rolling back",
    ApplyState.RESTORED: "previous unit restored",
    ApplyState.HEALTHY_ON_OLD: "healthy on the previous unit",
    ApplyState.ROLLBACK_FAILED: "ROLLBACK FAILED",
    ApplyState.RESTART_FAILED: "the restart did not come up",
    ApplyState.ABORTED: "aborted, nothing changed",
    ApplyState.REFUSED: "refused by the rules, nothing changed",
    ApplyState.UNCHANGED: "nothing to change",
    ApplyState.WRITE_FAILED: "the unit could not be written, nothing changed",
}
