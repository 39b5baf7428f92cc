"""Run one systemd-style unit under the demo host's supervisor, with its control socket, until SIGTERM.

    python3 scripts/real_sglang/supervise.py UNIT_FILE CONTROL_SOCKET BACKUP_DIR

This is what `opsconsole demo` does for the simulator, here for a unit whose ExecStart is the real
`python -m sglang.launch_server`: console.sim.supervisor.UnitSupervisor runs it like systemd runs a
Type=simple service, and every `opsconsole` verb reaches it through a profile with
`transport = "demo"` and `control = CONTROL_SOCKET`. On SIGTERM it stops the unit and exits.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from console.sim.supervisor import UnitSupervisor, serve_control

UNIT = "sglang.service"
# The demo host keeps the last 20,000 journal lines; a tune on the real server logs an access line per request
# (tens of thousands), and the session reads every start and failure back from the journal afterwards.
JOURNAL_LINES = 500_000


async def main(unit_file: Path, control: Path, backups: Path) -> int:
    sup = UnitSupervisor(UNIT, unit_file, backups, journal_limit=JOURNAL_LINES)
    runner = await serve_control(sup, control)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sup.daemon_reload()
    sup.enable()
    await sup.start()
    print(f"supervising {UNIT} from {unit_file}; control socket {control}", flush=True)
    await stop.wait()
    await sup.stop()
    await runner.cleanup()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))))
