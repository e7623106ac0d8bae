"""The watch on other clients' cells: the scientist's console or notebook sharing the kernel.

While another client's cell runs, the agent's next request is held here, unsent, and goes out when
that cell ends: held, it can still be withdrawn without touching the scientist's cell (once sent,
only the kernel can start or skip it).
"""

from __future__ import annotations

import time
from typing import Any

from biopb_mcp.kernel.connection import ClientConnection
from biopb_mcp.kernel.executions import Execution, ForeignCell

__all__ = ["CellWatch"]

_FOREIGN_CODE_CHARS = 80
"""Characters of another client's cell shown to the agent (its first line)."""


class CellWatch:
    """The other client's cell the kernel runs now, and the agent's request held behind it.

    ``began``/``ended`` are fed from the IO thread; the rest is for the tool threads.
    """

    def __init__(self, conn: ClientConnection) -> None:
        self._conn = conn
        self._foreign: ForeignCell | None = None
        """As last seen on iopub; None when idle or running ours (a cell that began before this
        server connected is not known)."""
        self._held: tuple[Execution, dict[str, Any]] | None = None
        """An execution whose request waits for the foreign cell to end, with that request."""

    @property
    def foreign(self) -> ForeignCell | None:
        """The other client's cell the kernel runs now, when known."""
        return self._foreign

    def other_cell(self) -> dict[str, Any] | None:
        """The other client's cell the kernel runs, for status: source, code, seconds."""
        cell = self._foreign
        if cell is None:
            return None
        return {"source": cell.source, "code": cell.code, "seconds": round(time.monotonic() - cell.since, 1)}

    def send_or_hold(self, ex: Execution, msg: dict[str, Any]) -> None:
        """Send ``ex``'s request now, or hold it while another client's cell runs."""
        with self._conn.lock:
            channels = self._conn.channels
            if self._foreign is not None:  # sent once the other cell ends: withdrawable till then
                ex.held, self._held = True, (ex, msg)
            elif channels is not None:
                channels.send("shell", msg)

    def release(self, ex: Execution) -> bool:
        """Drop ``ex``'s request if it is still held; False when it was sent already."""
        with self._conn.lock:
            if not ex.held:
                return False
            ex.held, self._held = False, None
            return True

    def clear(self) -> None:
        """Forget the cell and any held request (the kernel was abandoned)."""
        with self._conn.lock:
            self._foreign, self._held = None, None

    # -- IO thread ---------------------------------------------------------------------------------
    def began(self, msg: dict[str, Any]) -> None:
        """Another client's cell began (a status idle with its parent ends it)."""
        parent = msg.get("parent_header", {})
        ours = self._conn.ours()
        if ours is None or parent.get("session") == ours or not parent.get("msg_id"):
            return
        code = str(msg.get("content", {}).get("code", ""))
        first = next((line.strip() for line in code.splitlines() if line.strip()), "")
        cell = ForeignCell(
            msg_id=str(parent["msg_id"]),
            source="notebook" if self._conn.settings.kernel.existing else "console",
            code=first if len(first) <= _FOREIGN_CODE_CHARS else first[:_FOREIGN_CODE_CHARS] + "…",
            since=time.monotonic(),
        )
        with self._conn.lock:
            self._foreign = cell

    def ended(self, msg: dict[str, Any]) -> None:
        """A status message: when it is the other client's cell going idle, the held request goes."""
        if msg.get("content", {}).get("execution_state") != "idle":
            return
        parent = msg.get("parent_header", {}).get("msg_id")
        with self._conn.lock:
            if self._foreign is None or parent != self._foreign.msg_id:
                return
            self._foreign = None
            held, self._held = self._held, None
            channels = self._conn.channels
            if held is not None and held[0].held:
                held[0].held = False
                if channels is not None:
                    channels.send("shell", held[1])
