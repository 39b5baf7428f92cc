"""Fleets: groups of hosts (groups.py) and the fleet's telemetry read from Prometheus.

    groups.py      profiles/groups.toml: named lists of profiles (globs, other groups), `@name` on the command line
    promql.py      the PromQL the overview asks and the parsing of Prometheus's answers (pure)
    prometheus.py  the HTTP API of Prometheus (httpx): the only I/O of this package
    telemetry.py   a fleet's figures per host from those answers, with staleness and the hosts Prometheus lacks
    router.py      smg's view of each worker from its metrics: whether it routes to it, and why not

Imports the base modules, console.host (profiles) and console.sglang; core, tui and cli build on it.
"""
