"""The agent's cells, live in the scientist's open notebook, through its collaborative document.

Who writes the cells, and why here: the kernel itself, from ``%load_ext biopb_mcp``. The kernel is
the one party that knows, by construction, which notebook it belongs to (its Jupyter server
started it for that notebook: :mod:`biopb_mcp.ipython.jupyter_room`) and which requests are the
agent's (the server marks each of its execute requests with ``AGENT_REQUEST_KEY``; the scientist's
cells carry no mark). Two notebooks have two kernels, each writing only into its own room, so two
agents never mix, whatever else runs on the server. It also works when the agent's server is on
another machine (a tunnelled kernel): only the kernel talks to its own Jupyter server, and the
server's token never leaves that machine.

How: a Y client (pycrdt over a websocket) joins the room as the browser does; the notebook is
never rewritten on disk behind the server. An agent cell is inserted after the last agent cell
(or at the end), then found again by its id for every later change (outputs, the end): never by
an index, which the scientist's edits make stale. Only cells this client inserted are changed;
the scientist's cells, including one being typed in, are never touched.

Threads: one runs an asyncio loop that owns the Y document (pycrdt documents stay in the thread
that made them) and the websocket; one subscribes to the kernel's own iopub, the messages every
frontend sees, and passes on those of the agent's requests; the IPython hook (``pre_run_cell``,
in the kernel's main thread) announces each agent cell before its code runs, so its outputs
always find it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from biopb_mcp.ipython.jupyter_room import INSTALL_LINE, NotLive, Room

if TYPE_CHECKING:
    from pycrdt import Array, Doc, Map

logger = logging.getLogger(__name__)

__all__ = ["MARKER", "LiveCells", "LiveState", "agent_source", "require_client"]

MARKER = "# [biopb agent]"
"""First line of every agent cell (followed by its job id), so the scientist sees whose it is."""

MAX_STREAM_CHARS = 100_000
"""Printed text shown live per cell; the rest is in ``%biopb log`` and the session notebook."""

MAX_RICH_CHARS = 4_000_000
"""Largest rich output (an image's base64, HTML) shown live: the room's websocket takes messages of
about 10 MB, and a bigger one would drop the connection; ``%biopb log`` shows the output."""

MAX_PENDING = 10_000
"""Changes kept while the room is unreachable; older ones are dropped (the agent's work is not)."""

RECONNECT_DELAYS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
"""Seconds between attempts to rejoin a room that went away (JupyterLab restarting, a network blip)."""

_CUT_NOTE = "\n[biopb: more output than is shown live; %biopb log has all of it]\n"


def require_client() -> None:
    """Raise NotLive when the Y client's libraries are missing from the kernel's Python."""
    try:
        import pycrdt  # noqa: F401
        import websockets  # noqa: F401
    except ImportError as exc:
        raise NotLive(f"the kernel's Python lacks {exc.name}, the notebook's Y client. {INSTALL_LINE}.") from None


def agent_source(job: str, code: str) -> str:
    """The cell's text: the marker line, then the agent's code as it ran."""
    return f"{MARKER} {job}\n{code}"


@dataclass(frozen=True)
class LiveState:
    """Whether the agent's cells are shown live, as facts for ``%biopb status``."""

    path: str
    enabled: bool
    joined: bool
    problem: str | None
    cells: int


# --------------------------------------------------------------------------- the document


def _is_agent_cell(cell: Any) -> bool:
    meta = cell.get("metadata") if hasattr(cell, "get") else None
    mark = meta.get("biopb") if meta is not None and hasattr(meta, "get") else None
    return isinstance(mark, dict) and mark.get("agent") is True


def _find(cells: Array[Any], cell_id: str) -> Map[Any] | None:
    for cell in cells:
        if hasattr(cell, "get") and cell.get("id") == cell_id:
            return cell  # type: ignore[no-any-return]
    return None


def insert_cell(doc: Doc[Any], cell_id: str, job: str, code: str) -> None:
    """Insert the agent's cell after the last agent cell, else at the end; no other cell moves."""
    from pycrdt import Array, Map, Text

    cells: Array[Any] = doc.get("cells", type=Array)
    index = len(cells)
    for i, cell in enumerate(cells):
        if _is_agent_cell(cell):
            index = i + 1
    cell = Map(
        {
            "id": cell_id,
            "cell_type": "code",
            "source": Text(agent_source(job, code)),
            "metadata": Map({"biopb": {"agent": True, "job": job}}),
            "outputs": Array(),
            "execution_count": None,
            "execution_state": "running",
        }
    )
    with doc.transaction(origin="biopb-agent"):
        cells.insert(index, cell)


class _Cell:
    """What the writer remembers of one agent cell while its code runs."""

    def __init__(self, cell_id: str, count: int | None) -> None:
        self.cell_id = cell_id
        self.count = count
        self.chars = 0
        self.clear_on_next = False


def add_output(doc: Doc[Any], cell: _Cell, msg_type: str, content: dict[str, Any]) -> None:
    """Add one iopub message of the agent's request to its cell (found by id); others are ignored."""
    from pycrdt import Array, Map, Text

    found = _find(doc.get("cells", type=Array), cell.cell_id)
    if found is None:  # the scientist deleted the agent's cell: its outputs go nowhere
        return
    outputs = found.get("outputs")
    if not isinstance(outputs, Array):
        return
    with doc.transaction(origin="biopb-agent"):
        if msg_type == "clear_output":
            if content.get("wait"):
                cell.clear_on_next = True
            else:
                outputs.clear()
            return
        if cell.clear_on_next:
            outputs.clear()
            cell.clear_on_next = False
        if msg_type == "stream":
            text = str(content.get("text", ""))
            room = MAX_STREAM_CHARS - cell.chars
            if room <= 0:
                return
            text = text if len(text) <= room else text[:room] + _CUT_NOTE
            cell.chars += len(text)
            name = content.get("name", "stdout")
            last = outputs[len(outputs) - 1] if len(outputs) else None
            if isinstance(last, Map) and last.get("output_type") == "stream" and last.get("name") == name:
                ytext = last.get("text")
                if isinstance(ytext, Text):
                    ytext.insert(len(ytext), text)
                    return
            outputs.append(Map({"output_type": "stream", "name": name, "text": Text(text)}))
        elif msg_type in ("display_data", "execute_result"):
            data, metadata = content.get("data", {}), content.get("metadata", {})
            size = sum(len(str(value)) for value in data.values())
            if size > MAX_RICH_CHARS:
                kinds = ", ".join(sorted(data))
                data = {
                    "text/plain": f"[biopb: a {size / 1e6:.0f} MB output ({kinds}) is not shown live; %biopb log shows it]"
                }
                metadata = {}
            out: dict[str, Any] = {"output_type": msg_type, "data": data, "metadata": metadata}
            if msg_type == "execute_result":
                out["execution_count"] = content.get("execution_count", cell.count)
            outputs.append(Map(out))
        elif msg_type == "error":
            outputs.append(
                Map(
                    {
                        "output_type": "error",
                        "ename": content.get("ename", ""),
                        "evalue": content.get("evalue", ""),
                        "traceback": list(content.get("traceback", [])),
                    }
                )
            )


def finish_cell(doc: Doc[Any], cell: _Cell) -> None:
    """The agent's code ended: its count and an idle state, as a frontend shows a finished cell."""
    from pycrdt import Array

    found = _find(doc.get("cells", type=Array), cell.cell_id)
    if found is None:
        return
    with doc.transaction(origin="biopb-agent"):
        found["execution_count"] = cell.count
        found["execution_state"] = "idle"


# --------------------------------------------------------------------------- the client


class LiveCells:
    """The kernel's Y client to its notebook's room and the agent cells it writes there.

    Args:
        room: the notebook's room (:func:`~biopb_mcp.ipython.jupyter_room.locate_room`).
        connection_info: this kernel's connection info (its iopub address and key).
    """

    def __init__(self, room: Room, connection_info: dict[str, Any]) -> None:
        self.room = room
        self._info = connection_info
        self._enabled = True
        self._stop = threading.Event()
        self._joined = False
        self._problem: str | None = None
        self._written = 0
        self._watched: dict[str, _Cell] = {}
        """Agent requests (by msg_id) whose cell is being written; read by the iopub thread."""
        self._pending: collections.deque[tuple[str, str, Any]] = collections.deque(maxlen=MAX_PENDING)
        self._loop = asyncio.new_event_loop()
        self._wake: asyncio.Event | None = None
        self._session: asyncio.Task[None] | None = None
        self._applying_remote = False
        self._threads = [
            threading.Thread(target=self._run_loop, name="biopb-live-room", daemon=True),
            threading.Thread(target=self._listen_iopub, name="biopb-live-iopub", daemon=True),
        ]

    # -- the kernel's main thread ------------------------------------------------------------------
    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Leave the room and end both threads (``%unload_ext``); never raises."""
        self._stop.set()
        with contextlib.suppress(RuntimeError):  # the loop already closed
            self._loop.call_soon_threadsafe(self._poke)
        for thread in self._threads:
            thread.join(5)

    def state(self) -> LiveState:
        return LiveState(self.room.path, self._enabled, self._joined, self._problem, self._written)

    def set_enabled(self, enabled: bool) -> None:
        """``%biopb live on|off``: off leaves the room and writes nothing until turned on again."""
        self._enabled = enabled
        if not enabled:
            self._pending.clear()
            self._watched.clear()
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._poke)

    def agent_cell_started(self, msg_id: str, job: str, code: str, count: int | None) -> None:
        """The agent's request ``msg_id`` is about to run ``code``: its cell goes in first."""
        if not self._enabled or self._stop.is_set():
            return
        self._watched[msg_id] = _Cell(str(uuid.uuid4()), count)
        self._post(("cell", msg_id, (job, code)))

    # -- any thread ----------------------------------------------------------------------------------
    def _post(self, command: tuple[str, str, Any]) -> None:
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._queue, command)

    # -- the iopub thread ----------------------------------------------------------------------------
    def _listen_iopub(self) -> None:
        import zmq

        from biopb_mcp.kernel.sockets import KernelSockets

        ctx = zmq.Context()
        sockets = KernelSockets(self._info, ctx)
        session = sockets.session()
        sock = sockets.connect("iopub")
        try:
            while not self._stop.is_set():
                if not sock.poll(200):
                    continue
                try:
                    _idents, msg = session.recv(sock, mode=zmq.NOBLOCK)
                except (ValueError, KeyError, TypeError):  # not signed with this kernel's key
                    continue
                if not msg:
                    continue
                parent = msg.get("parent_header", {}).get("msg_id")
                if parent not in self._watched:
                    continue
                kind, content = msg["header"]["msg_type"], msg.get("content", {})
                if kind == "status":
                    if content.get("execution_state") == "idle":
                        self._post(("end", parent, None))
                elif kind in ("stream", "display_data", "execute_result", "error", "clear_output"):
                    self._post(("out", parent, (kind, content)))
        except zmq.ZMQError:
            logger.warning("biopb live cells: the kernel's iopub subscription failed", exc_info=True)
        finally:
            sock.close(linger=0)
            ctx.term()

    # -- the loop's thread ---------------------------------------------------------------------------
    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()
        if self._session is not None and (self._stop.is_set() or not self._enabled):
            self._session.cancel()

    def _queue(self, command: tuple[str, str, Any]) -> None:
        self._pending.append(command)
        self._poke()

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        self._wake = asyncio.Event()
        attempt = 0
        while not self._stop.is_set():
            if not self._enabled:
                self._wake.clear()
                await self._wake.wait()
                continue
            started = time.monotonic()
            self._session = asyncio.create_task(self._join())
            try:
                await self._session
                self._problem = "the notebook's room closed the connection"
            except asyncio.CancelledError:
                if self._stop.is_set() or not self._enabled:
                    continue
                raise
            except Exception as exc:  # any failure of the connection: said in status, then retried
                self._problem = _why(exc)
                logger.info("biopb live cells: %s", self._problem)
            finally:
                self._joined = False
                self._session = None
            attempt = 0 if time.monotonic() - started > 60 else attempt + 1
            delay = RECONNECT_DELAYS[min(attempt, len(RECONNECT_DELAYS) - 1)]
            with contextlib.suppress(TimeoutError):
                self._wake.clear()
                await asyncio.wait_for(self._wake.wait(), delay)

    async def _join(self) -> None:
        """One connection to the room: sync, then apply the agent's changes as they come."""
        from pycrdt import Doc, YMessageType, YSyncMessageType, create_sync_message, create_update_message
        from pycrdt import handle_sync_message as handle
        from websockets.asyncio.client import connect

        doc: Doc[Any] = Doc()
        outgoing: asyncio.Queue[bytes] = asyncio.Queue()

        def on_update(event: Any) -> None:
            if not self._applying_remote:  # the room's own changes are not echoed back
                outgoing.put_nowait(create_update_message(event.update))

        subscription = doc.observe(on_update)
        synced = asyncio.Event()
        async with connect(
            self.room.websocket_url,
            additional_headers=self.room.headers,
            proxy=None,
            max_size=None,
            user_agent_header="biopb-mcp live cells",
        ) as ws:

            async def read() -> None:
                async for message in ws:
                    if not isinstance(message, bytes) or len(message) < 2 or message[0] != YMessageType.SYNC:
                        continue  # awareness and the server's own notes
                    self._applying_remote = True
                    try:
                        reply = handle(message[1:], doc)
                    finally:
                        self._applying_remote = False
                    if message[1] == YSyncMessageType.SYNC_STEP2:
                        synced.set()
                    if reply is not None:
                        await ws.send(reply)

            async def send() -> None:
                while True:
                    await ws.send(await outgoing.get())

            async def write() -> None:
                await synced.wait()
                self._joined, self._problem = True, None
                assert self._wake is not None
                while True:
                    while self._pending:
                        self._apply(doc, self._pending.popleft())
                    self._wake.clear()
                    await self._wake.wait()

            await ws.send(create_sync_message(doc))
            tasks = [asyncio.create_task(job()) for job in (read, send, write)]
            try:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()  # a failure propagates; a clean end of read() means the room closed
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                doc.unobserve(subscription)

    def _apply(self, doc: Doc[Any], command: tuple[str, str, Any]) -> None:
        kind, msg_id, payload = command
        cell = self._watched.get(msg_id)
        if cell is None:
            return
        if kind == "cell":
            job, code = payload
            insert_cell(doc, cell.cell_id, job, code)
            self._written += 1
        elif kind == "out":
            add_output(doc, cell, *payload)
        elif kind == "end":
            finish_cell(doc, cell)
            self._watched.pop(msg_id, None)


def _why(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"cannot join the notebook's room ({text})"
