"""A PD server's queues in /v1/loads, as SGLang 0.5.23 publishes them (its scheduler's LoadSnapshot.disaggregation,
which smg's load poll reads), and the drain of a PD change relying on them (console.core.roll's in_flight).

- The section's fields are the 0.5.23 wheel's (load_snapshot.py's DisaggregationMetrics, read from its source), the
  stand-in sends exactly those, and the client counts exactly its queues.
- Live counts, not zeros: a room waiting for its KV is in the decode server's transfer queue, a request waiting for
  its decode to bootstrap in the prefill server's bootstrap queue, each while it is there and 0 once it has gone.
- The drain sees them from /v1/loads alone (the decode server runs without --enable-metrics: no /metrics at all);
  the control, the server's running + waiting requests alone (what a drain without the queues would wait on), says
  0 while the room is still held.
"""

from __future__ import annotations

import ast
import asyncio
import json
import random

import pytest

from console.core.roll.pd import in_flight
from console.sglang.client import PD_QUEUE_FIELDS, SglangClient, pd_queued, summarize
from tests.sim.test_pd import Background, _get, _pd_body, _post
from tests.support.sglang_wheels import LOAD_SNAPSHOT, release_source
from tests.support.simdeploy import running_pd_pair, wait_until

pytestmark = pytest.mark.system


def wheel_fields(class_name: str) -> list[str]:
    """The fields of a msgspec Struct of the 0.5.23 wheel's load_snapshot.py, in order (read by its syntax tree)."""
    tree = ast.parse(release_source("0.5.23", LOAD_SNAPSHOT))
    found = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name)
    return [s.target.id for s in found.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]


def loads(url: str) -> dict[str, object]:
    answer: dict[str, object] = json.loads(_get(url + "/v1/loads")[1])
    return answer


def section(url: str) -> dict[str, object]:
    (rank,) = loads(url)["loads"]  # type: ignore[misc]
    return rank["disaggregation"]  # type: ignore[no-any-return]


def drain_view(url: str) -> int | None:
    """What the PD drain sees of the server now (console.core.roll.pd.in_flight, its real client)."""

    async def read() -> int | None:
        client = SglangClient(url, version="0.5.23")
        try:
            return await in_flight(client)
        finally:
            await client.close()

    return asyncio.run(read())


def running_and_waiting(url: str) -> int:
    figures = summarize(None, load=loads(url))
    return int(figures["num_running_reqs"] or 0) + int(figures["num_queue_reqs"] or 0)


def test_the_section_is_the_wheels_and_the_client_counts_its_queues() -> None:
    fields = wheel_fields("DisaggregationMetrics")
    assert set(PD_QUEUE_FIELDS) == {f for f in fields if f.endswith("_queue_reqs")}
    with running_pd_pair() as (prefill, decode):
        for member in (prefill, decode):
            assert list(section(member.url)) == fields  # exactly the wheel's, in its order
    sample = {"loads": [{"disaggregation": dict.fromkeys(PD_QUEUE_FIELDS, 1) | {"mode": "decode"}}] * 2}
    assert pd_queued(sample) == 2 * len(PD_QUEUE_FIELDS)
    assert pd_queued({"loads": [{"num_running_reqs": 3}]}) is None  # an older version: no section


def test_the_queues_are_live_and_the_drain_sees_them_from_v1_loads_alone() -> None:
    with running_pd_pair(("--enable-metrics",), ()) as (prefill, decode):
        assert _get(decode.url + "/metrics")[0] == 404  # the decode server has no /metrics: /v1/loads alone
        room = random.getrandbits(63)
        held = Background(decode.url + "/generate", _pd_body(prefill, room))
        wait_until(lambda: section(decode.url)["decode_transfer_queue_reqs"] == 1, 30, "the room in the transfer queue")
        assert drain_view(decode.url) == 1  # the drain waits for it
        assert running_and_waiting(decode.url) == 0  # the control: running + waiting alone would call it drained
        other = random.getrandbits(63)
        sent = Background(prefill.url + "/generate", _pd_body(prefill, other))  # its decode has not bootstrapped
        wait_until(lambda: section(prefill.url)["prefill_bootstrap_queue_reqs"] == 1, 30, "the bootstrap queue")
        assert drain_view(prefill.url) >= 1
        assert _post(prefill.url + "/generate", _pd_body(prefill, room))[0] == 200  # room 1's KV goes
        assert held.wait()[0] == 200
        assert _post(decode.url + "/generate", _pd_body(prefill, other))[0] == 200  # room 2 bootstrapped, done
        assert sent.wait()[0] == 200
        wait_until(lambda: drain_view(decode.url) == 0 and drain_view(prefill.url) == 0, 30, "both drained")
        assert (
            section(decode.url)["decode_transfer_queue_reqs"]
            == section(prefill.url)["prefill_bootstrap_queue_reqs"]
            == 0
        )
