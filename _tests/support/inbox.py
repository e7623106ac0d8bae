"""A legacy (handshake-era) client's resource notifications, collected for the resources tests."""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any

import anyio
from mcp.types import ResourceListChangedNotification, ResourceUpdatedNotification


class Inbox:
    """Collects one legacy client's ``resources/updated`` and ``list_changed`` notifications."""

    def __init__(self, wait: float) -> None:
        self.wait = wait
        self.updated: list[str] = []
        self.list_changed = 0
        self._arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.updated.append(str(message.params.uri))
        elif isinstance(message, ResourceListChangedNotification):
            self.list_changed += 1
        else:
            return
        self._arrived.set()

    async def wait_for(self, uris: set[str], list_changed: bool = False) -> None:
        """Until every uri was announced (and a list change, when asked), bounded by ``wait`` seconds."""
        with anyio.fail_after(self.wait):
            while not (uris <= set(self.updated) and (self.list_changed or not list_changed)):
                await self._arrived.wait()
                self._arrived = anyio.Event()


async def wait_listen(events: AsyncIterable[object], wanted: set[object], wait: float) -> None:
    """Consume a 2026-era ``listen`` stream until every wanted event arrived, bounded by ``wait`` s."""
    seen: set[object] = set()
    with anyio.fail_after(wait):
        async for event in events:
            seen.add(event)
            if wanted <= seen:
                return
