"""The router client (console/sglang/router.py) against the real routers from their wheels, smg 1.13 and
sglang-router 0.3.2, in front of real stand-ins; and its parsing of what they answer (pure).

What differs between them and is held here: smg's statuses (only `ready` is routed to), its 409 for a URL it has,
its drain settle (5 s by default, which `remove()` sets to 0: smg's own log says how long it drained), a new id for
a worker added again, its `{error, code}` refusals, and the worker types and bootstrap ports of a PD router, which
the client lists and adds with (both routers).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from console.sglang.router import RouterClient, RouterError, RouterWorker, error_of, parse_workers
from tests.support.routers import KINDS, RouterKind, running_router
from tests.support.simproc import FAST, SimProcess, free_port, running_sim

# Entries as the two routers listed the stand-in (trimmed: labels, models and engine_load left out).
SMG_ENTRY = {
    "id": "01a250ba-b136-70e2-bf61-e1e9334f1b7c", "model_id": "Qwen/Qwen3.5-122B-A10B-FP8",
    "url": "http://127.0.0.1:31001", "worker_type": "prefill", "connection_mode": "http", "runtime_type": "sglang",
    "priority": 50, "cost": 1.0, "bootstrap_port": 8998, "max_connection_attempts": 20, "is_healthy": True,
    "status": "ready", "load": 0, "http2": False, "pd_pairing": "sglang/?/?",
}  # fmt: skip
V032_ENTRY = {
    "id": "94592b34-8354-4b1a-b50a-1fd0bdb3d21b", "url": "http://127.0.0.1:31002",
    "model_id": "Qwen/Qwen3.5-122B-A10B-FP8", "priority": 50, "cost": 1.0, "worker_type": "decode",
    "is_healthy": True, "load": 0, "connection_mode": "HTTP", "disable_health_check": False,
}  # fmt: skip


def test_smg_and_sglang_router_lists_are_told_apart_with_types_ports_and_statuses() -> None:
    stats = {"prefill_count": 1, "decode_count": 1, "regular_count": 0}
    api, workers = parse_workers({"workers": [SMG_ENTRY, {**SMG_ENTRY, "status": "draining"}], "total": 2,
                                  "stats": stats})  # fmt: skip
    assert api == "smg"
    assert workers[0] == RouterWorker("http://127.0.0.1:31001", SMG_ENTRY["id"], True, "prefill", 8998, "ready")
    assert workers[0].routable and not workers[1].routable  # only "ready" is routed to
    api, workers = parse_workers({"workers": [V032_ENTRY], "total": 1, "stats": stats})
    assert api == "workers-by-id"
    assert workers == [RouterWorker("http://127.0.0.1:31002", V032_ENTRY["id"], True, "decode", None, None)]
    assert workers[0].routable
    assert parse_workers({"workers": [{"url": "http://h:1"}]})[1] == [RouterWorker("http://h:1")]  # 0.2: regular


def test_the_routers_refusals_are_read_in_their_own_words() -> None:
    conflict = httpx.Response(409, json={"error": "Worker already exists at URL 'u'", "code": "WORKER_ALREADY_EXISTS"})
    assert error_of(conflict) == ("Worker already exists at URL 'u'", "WORKER_ALREADY_EXISTS")
    unknown = httpx.Response(404, json={"error": {"type": "invalid_request_error", "code": "unknown_url",
                                                  "message": "Invalid URL (GET /x)", "param": None}})  # fmt: skip
    assert error_of(unknown) == ("Invalid URL (GET /x)", "unknown_url")
    assert error_of(httpx.Response(500, text="boom")) == ("boom", None)


# --- the real routers ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workers() -> Iterator[list[SimProcess]]:
    with running_sim(FAST) as first, running_sim(FAST) as second:
        yield [first, second]


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


@pytest.mark.system
@pytest.mark.parametrize("kind", KINDS)
def test_a_worker_out_and_back_in_through_the_client(kind: RouterKind, workers: list[SimProcess]) -> None:
    urls = [w.url for w in workers]

    async def scenario() -> None:
        with running_router(kind, urls) as router:
            async with RouterClient(router.url) as client:
                listed = await client.workers()
                assert sorted(w.url for w in listed) == sorted(urls)
                assert all(w.worker_type == "regular" and w.routable and w.id for w in listed)
                assert client.api == ("smg" if kind == "smg" else "workers-by-id")
                assert (client.release or "").startswith("smg-1.13") == (kind == "smg")

                before = next(w for w in listed if w.url == urls[0])
                removed = await client.remove(urls[0])
                assert removed == before
                assert [w.url for w in await client.workers()] == [urls[1]]  # gone, not draining
                assert await client.remove(urls[0]) is None  # nothing to remove

                back = await client.add(urls[0])
                assert back.url == urls[0] and back.routable and back.id not in (None, before.id)  # a new id
                if kind == "smg":
                    assert back.status == "ready"
                again = await client.add(urls[0])  # smg answers 409 for a URL it has: the same worker
                assert again.id == back.id
                assert sorted(w.url for w in await client.workers() if w.routable) == sorted(urls)

    run(scenario())


@pytest.mark.system
def test_smgs_drain_settle_is_taken_out_of_a_removal_and_kept_when_asked(workers: list[SimProcess]) -> None:
    """smg's own log says how long it drained: 0 s with remove()'s default, its 5 s with settle_s=None."""
    url = workers[0].url

    async def scenario() -> None:
        with running_router("smg", [url], log_level="info") as router:
            async with RouterClient(router.url) as client:
                await client.remove(url)
                assert "Draining 1 worker(s) for 0s before removal" in router.log()
                await client.add(url)
                await client.remove(url, settle_s=None)
                assert "Draining 1 worker(s) for 5s before removal" in router.log()

    run(scenario())


@pytest.mark.system
def test_smgs_refusals_and_a_worker_that_never_answers_are_said(workers: list[SimProcess]) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"

    async def scenario() -> None:
        with running_router("smg", [workers[0].url]) as router:
            async with RouterClient(router.url, add_timeout_s=1.0) as client:
                with pytest.raises(RouterError) as refused:
                    await client.worker("not-a-uuid")
                assert refused.value.status == 400 and refused.value.code == "BAD_REQUEST"
                with pytest.raises(RouterError, match="worker-startup-check-interval"):
                    await client.add(nobody)
                with pytest.raises(ValueError, match="bootstrap port belongs to a prefill"):
                    await client.add(nobody, bootstrap_port=8998)

    run(scenario())


@pytest.mark.system
def test_an_empty_smg_is_known_as_smg(workers: list[SimProcess]) -> None:
    async def scenario() -> None:
        with running_router("smg", []) as router:
            async with RouterClient(router.url) as client:
                assert await client.workers() == []
                assert client.api == "smg" and (client.release or "").startswith("smg-")
                back = await client.add(workers[1].url)
                assert back.status == "ready"

    run(scenario())


@pytest.mark.system
@pytest.mark.parametrize("kind", KINDS)
def test_pd_workers_keep_their_type_and_bootstrap_port(kind: RouterKind, workers: list[SimProcess]) -> None:
    """A PD router's prefill and decode workers (the stand-ins answer its checks; no KV moves here): listed with
    their types and the prefill's bootstrap port, and added back as what they were."""
    prefill, decode = workers[0].url, workers[1].url

    async def scenario() -> None:
        with running_router(kind, pd=([(prefill, 8998)], [decode])) as router:
            async with RouterClient(router.url) as client:
                listed = {w.url: w for w in await client.workers()}
                assert (listed[prefill].worker_type, listed[prefill].bootstrap_port) == ("prefill", 8998)
                assert (listed[decode].worker_type, listed[decode].bootstrap_port) == ("decode", None)
                removed = await client.remove(prefill)
                assert removed is not None
                back = await client.add(prefill, worker_type=removed.worker_type, bootstrap_port=9000)
                assert (back.worker_type, back.bootstrap_port) == ("prefill", 9000)
                await client.remove(decode)
                assert (await client.add(decode, worker_type="decode")).worker_type == "decode"
                listed = {w.url: w for w in await client.workers()}
                assert {u: (w.worker_type, w.bootstrap_port) for u, w in listed.items()} == {
                    prefill: ("prefill", 9000),
                    decode: ("decode", None),
                }

    run(scenario())
