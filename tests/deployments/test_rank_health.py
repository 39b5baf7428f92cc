"""A rank >= 1 read as a host of its own (`opsconsole status demo-rank1`, its tab in the console) is never shown
healthy: its /health is a dummy that answers 200 whatever its schedulers do (wave5-facts §4). The console reads
that the server has no API of its own (no /server_info) and says so; rank 0, on the same deployment, is healthy."""

from __future__ import annotations

import httpx
import pytest

from console.core.status.host import SglangStatus, read_sglang
from console.sglang.client import SglangClient
from tests.support.simdeploy import running_ranks, wait_until

pytestmark = pytest.mark.system


async def _read(url: str) -> SglangStatus:
    client = SglangClient(url)
    try:
        return await read_sglang(client)
    finally:
        await client.close()


async def test_a_rank_1_is_never_read_as_healthy_and_rank_0_is() -> None:
    with running_ranks(2) as (rank0, rank1):
        wait_until(lambda: httpx.get(rank1.url + "/health", timeout=2).status_code == 200, 30, "rank 1's dummy")
        # The trap: rank 1's own /health answers 200, as a healthy server's does.
        assert httpx.get(rank1.url + "/health", timeout=2).status_code == 200
        follower, leader = await _read(rank1.url), await _read(rank0.url)
        assert (follower.healthy, follower.no_api) == (False, True)
        assert "a rank >= 1 of a multi-node deployment" in (follower.error or "")
        assert "status DEPLOYMENT" in (follower.error or "")
        assert (leader.healthy, leader.no_api, leader.error) == (True, None, None)
