"""Waits on the host that end: a channel being opened is waited for until a deadline, and one that opens after its
caller gave up is closed at once (cancelling asyncssh's open instead would leave the channel open on the host,
holding one of its sshd's MaxSessions slots until the connection ends)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

Channel = TypeVar("Channel")
Session = TypeVar("Session")


def _close_if_opened(opening: asyncio.Future[Any]) -> None:
    if opening.cancelled() or opening.exception() is not None:
        return  # nothing opened (the exception is retrieved here, so that asyncio does not log it)
    opening.result()[0].close()


async def opened_by(opening: Awaitable[tuple[Channel, Session]], until: float) -> tuple[Channel, Session]:
    """`opening` (asyncssh's create_session or create_connection: (channel, session)) awaited until `until` (the
    loop's clock); TimeoutError past it. A caller that times out or is cancelled leaves the opening to finish in the
    background, and its channel is closed as soon as it opens."""
    task = asyncio.ensure_future(opening)
    try:
        async with asyncio.timeout_at(until):
            return await asyncio.shield(task)
    except BaseException:
        task.add_done_callback(_close_if_opened)
        raise
