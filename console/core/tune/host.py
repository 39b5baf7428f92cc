"""What a tune does to the host's unit, with the tune's lock held throughout: a trial's unit through the validated
apply (planning retried while the connection comes back), a restart in place, the server's health, and a unit put
back at the end. The run (run.py) decides what to do with each answer; this says how it is done on the host.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from console.core.apply import ApplyResult, PendingApply, plan_apply, plan_restart
from console.core.change import ApplyState, EditRequest
from console.core.events import ApplyEvent, EventSink, Notice, Reconnecting
from console.core.session import Session
from console.host.base import ConnectionDropped, HostError

# How long to wait for the server to answer again before a retry gives up.
HEALTH_WAIT_S = 120.0
HEALTH_POLL_S = 0.5
# How long the end of a tune waits for the server it put back to answer.
FINAL_HEALTH_WAIT_S = 30.0
# How many times the end of a tune tries to put a unit back (each after the server answers again).
PUT_BACK_ATTEMPTS = 3


class TuneHost:
    """The host's unit during one tune. `interrupted()` says why the tune is being stopped (None while it is not):
    an apply planned then is asked to stop at once, and the waits for the server end."""

    def __init__(
        self,
        session: Session,
        *,
        timeout_s: float,
        owner: str,
        interrupted: Callable[[], str | None],
        on_event: EventSink[Reconnecting | Notice],
    ) -> None:
        self.session = session
        self.timeout_s = timeout_s
        self.owner = owner
        self.interrupted = interrupted
        self.on_event = on_event
        self._apply: PendingApply | None = None  # the apply under way, for request_abort

    def request_abort(self, why: str) -> None:
        """Stop the apply under way, if any (a start in progress is rolled back)."""
        if self._apply is not None:
            self._apply.request_abort(why)

    async def apply(self, unit_text: str, sink: EventSink[ApplyEvent]) -> ApplyResult:
        """The unit through the validated apply path, with the tune's lock already held; planning is retried
        while the connection comes back."""
        deadline = asyncio.get_running_loop().time() + HEALTH_WAIT_S
        while True:
            try:
                pending = await self._plan(unit_text)
                break
            except ConnectionDropped as exc:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                self.on_event(Reconnecting("plan the next unit", self.session.secrets.text(str(exc))))
                await asyncio.sleep(HEALTH_POLL_S)  # the transport reconnects meanwhile
        self._apply = pending
        try:
            why = self.interrupted()
            if why is not None:
                pending.request_abort(why)
            return await pending.execute(on_event=sink)
        finally:
            self._apply = None

    async def restart(self, sink: EventSink[ApplyEvent]) -> ApplyResult:
        """The unit as it is, restarted (no edits): for a server that is not healthy on the unit it should run."""
        pending = await plan_restart(self.session, lock_held=True, timeout_s=self.timeout_s)
        return await pending.execute(on_event=sink)

    async def healthy(self) -> bool:
        try:
            client = await self.session.sglang()
            async with asyncio.timeout(5.0):
                return await client.healthy()
        except Exception:  # a forward being rebuilt, the server down: not healthy now
            return False

    async def wait_healthy(self, limit_s: float = HEALTH_WAIT_S, *, interruptible: bool = True) -> bool:
        """Whether the server answers within limit_s (interruptible: not once the tune is being stopped)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit_s
        while loop.time() < deadline and not (interruptible and self.interrupted() is not None):
            if await self.healthy():
                return True
            await asyncio.sleep(HEALTH_POLL_S)
        return False

    async def put_back(self, text: str, sink: EventSink[ApplyEvent]) -> tuple[bool, bool]:
        """Write `text` through the validated path (nothing written when it is on the host already), a few times
        if the host fails on the way: (whether the host runs it, whether that took a start of the new unit)."""
        for _attempt in range(PUT_BACK_ATTEMPTS):
            try:
                pending = await self._plan(text)
                result = await pending.execute(on_event=sink)
            except HostError as exc:
                self.on_event(Notice(self.session.secrets.text(f"putting the unit back: {exc}; trying again")))
                await self.wait_healthy()
                continue
            if result.state is ApplyState.UNCHANGED:
                if await self.healthy():
                    return True, False
                restarted = await self.restart(sink)
                return restarted.state in (ApplyState.VERIFIED, ApplyState.MISMATCH), False
            if result.state in (ApplyState.VERIFIED, ApplyState.MISMATCH):
                return True, True
            return False, False
        return False, False

    async def _plan(self, unit_text: str) -> PendingApply:
        return await plan_apply(
            self.session, EditRequest(), unit_text=unit_text, lock_held=True, timeout_s=self.timeout_s,
            owner=self.owner,
        )  # fmt: skip
