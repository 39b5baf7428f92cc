"""Where this process sits in cgroup v1's cpu hierarchy (scripts/run-suite.sh places the timed tests by it)."""

from __future__ import annotations

from pathlib import Path

CPU_HIERARCHY = Path("/sys/fs/cgroup/cpu")


def own_cpu_cgroup() -> str:
    """This process's cgroup in the cpu hierarchy, as /proc/self/cgroup names it ("/" at the top)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    raise RuntimeError("no cpu controller in /proc/self/cgroup: cgroup v1's cpu hierarchy is needed")
