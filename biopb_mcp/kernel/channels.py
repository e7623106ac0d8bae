"""The zmq side of the host: one IO thread owns every socket of one kernel.

zmq sockets are not thread-safe, and the server calls the host from many worker threads. So a
single IO thread polls shell, control and iopub, sends what callers queue (woken through an
inproc socket, so a send costs no polling delay), dispatches messages to the host, and watches
the kernel process. Callers either ``send`` (fire and forget; replies reach ``on_message``) or
``call`` (wait for the reply with a timeout). The sockets and the session come from
jupyter_client (:mod:`biopb_mcp.kernel.sockets`); reading them is this module's.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import zmq

from biopb_mcp.kernel import wire
from biopb_mcp.kernel.sockets import KernelSockets

logger = logging.getLogger(__name__)

_POLL_MS = 200
"""How often (ms) the IO thread checks the kernel process while no message arrives."""

NUDGE_EVERY_MAX = 2.0
"""Longest gap between two nudges of a request still unanswered."""


def nudge_waits(first: float) -> Iterator[float]:
    """Seconds to wait before each nudge of an unanswered request: ``first``, then doubling up to
    ``NUDGE_EVERY_MAX`` (a few cheap kernel_info_requests a second at most, however long it waits)."""
    if first <= 0:
        raise ValueError(f"the first wait must be positive, got {first}")
    wait = first
    while True:
        yield wait
        wait = min(wait * 2, NUDGE_EVERY_MAX)


@dataclass
class _Pending:
    """A request whose reply (and, when wanted, its iopub ``idle``) a caller is waiting for."""

    want_idle: bool
    event: threading.Event = field(default_factory=threading.Event)
    reply: dict[str, Any] | None = None
    idle: bool = False


class KernelChannels:
    """Connection to one kernel: sockets, session and the IO thread.

    Args:
        info: the connection info (as written to the connection file).
        on_message: called on the IO thread with ``(channel, msg)`` for every message not
            claimed by a pending ``call``; must not block.
        is_alive: called on the IO thread about every 200 ms; False ends the loop.
        on_death: called once on the IO thread when ``is_alive`` turned False.
    """

    def __init__(
        self,
        info: dict[str, Any],
        on_message: Callable[[str, dict[str, Any]], None],
        is_alive: Callable[[], bool],
        on_death: Callable[[], None],
    ) -> None:
        self._on_message = on_message
        self._is_alive = is_alive
        self._on_death = on_death
        self._ctx = zmq.Context()
        sockets = KernelSockets(info, self._ctx)
        self.session = sockets.session()
        self.session.unpack = wire.unpack  # a big image's base64 stays as the received bytes
        self._wake_addr = f"inproc://biopb-wake-{uuid.uuid4().hex}"
        self._wake_recv = self._ctx.socket(zmq.PULL)
        self._wake_recv.bind(self._wake_addr)
        self._wake_send = self._ctx.socket(zmq.PUSH)
        self._wake_send.connect(self._wake_addr)
        self._send_lock = threading.Lock()
        self._outbox: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        self._pending: dict[str, _Pending] = {}
        self._pending_lock = threading.Lock()
        self._stop = threading.Event()
        self.closed = threading.Event()
        self._sockets: dict[str, zmq.Socket[bytes]] = {}
        identity = uuid.uuid4().hex.encode()
        for name in ("shell", "control", "iopub"):
            self._sockets[name] = sockets.connect(name, identity if name != "iopub" else None)
        self._thread = threading.Thread(target=self._run, name="biopb-kernel-io", daemon=True)
        self._thread.start()

    # -- caller side (any thread) ------------------------------------------------------------------
    def new_msg(self, msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
        """Build a request (so the caller can register its msg_id before it is sent)."""
        with self._send_lock:
            return dict(self.session.msg(msg_type, content))

    def send(self, channel: str, msg: dict[str, Any]) -> None:
        """Queue a request built by ``new_msg`` for the IO thread; returns at once."""
        self._enqueue(channel, msg)

    def call(
        self,
        channel: str,
        msg_type: str,
        content: dict[str, Any],
        timeout: float,
        *,
        want_idle: bool = False,
        nudge_after: float | None = None,
    ) -> dict[str, Any] | None:
        """Send a request and wait for its reply message; None on timeout or kernel death.

        With ``want_idle`` the call also waits for the kernel's iopub ``idle`` status for this
        request, which proves the iopub subscription is live (zmq's slow-joiner problem). With
        ``nudge_after``, a request still unanswered after that many seconds is followed by a
        ``kernel_info_request`` on the same channel, and again at growing intervals
        (``nudge_waits``): a kernel idling in a GUI toolkit's loop (``%gui qt``) can miss that a
        request arrived, and the next message wakes it; on a loaded machine a nudge can land in
        the same gap.
        """
        msg = self.new_msg(msg_type, content)
        msg_id = str(msg["header"]["msg_id"])
        pending = _Pending(want_idle=want_idle)
        with self._pending_lock:
            self._pending[msg_id] = pending
        try:
            self._enqueue(channel, msg)
            if self.closed.is_set():
                return None
            deadline = time.monotonic() + timeout
            waits = nudge_waits(nudge_after) if nudge_after is not None else iter(())
            while not pending.event.wait(min(next(waits, timeout), max(0.0, deadline - time.monotonic()))):
                if nudge_after is None or time.monotonic() >= deadline or self.closed.is_set():
                    break
                self._enqueue(channel, self.new_msg("kernel_info_request", {}))
            return pending.reply if pending.event.is_set() else None
        finally:
            with self._pending_lock:
                self._pending.pop(msg_id, None)

    def _enqueue(self, channel: str, msg: dict[str, Any]) -> None:
        if self.closed.is_set():
            return
        self._outbox.put((channel, msg))
        with self._send_lock:
            try:
                self._wake_send.send(b"", zmq.NOBLOCK)
            except zmq.ZMQError:  # closed meanwhile; the request is simply dropped
                pass

    def close(self, timeout: float = 2.0) -> None:
        """Stop the IO thread and close the sockets (idempotent)."""
        self._stop.set()
        with self._send_lock:
            try:
                self._wake_send.send(b"", zmq.NOBLOCK)
            except zmq.ZMQError:
                pass
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    # -- IO thread ---------------------------------------------------------------------------------
    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._wake_recv, zmq.POLLIN)
        by_socket = {sock: name for name, sock in self._sockets.items()}
        for sock in self._sockets.values():
            poller.register(sock, zmq.POLLIN)
        died = False
        try:
            while not self._stop.is_set():
                events = dict(poller.poll(_POLL_MS))
                if self._wake_recv in events:
                    self._drain_wake()
                    self._flush_outbox()
                for sock, name in by_socket.items():
                    if sock in events:
                        self._drain(name, sock)
                if not events and not self._is_alive():
                    died = True
                    break
        except Exception:  # a bug here must not leave callers hanging: treat as a lost kernel
            logger.exception("kernel IO thread failed")
            died = not self._stop.is_set()
        finally:
            self.closed.set()
            with self._send_lock:
                for sock in (*self._sockets.values(), self._wake_recv, self._wake_send):
                    sock.close(linger=0)
                self._ctx.term()
            try:
                if died:  # before waking callers, so a woken call sees "dead", not a silent timeout
                    self._on_death()
            finally:
                with self._pending_lock:
                    for pending in self._pending.values():
                        pending.event.set()

    def _drain_wake(self) -> None:
        while True:
            try:
                self._wake_recv.recv(zmq.NOBLOCK)
            except zmq.Again:
                return

    def _flush_outbox(self) -> None:
        while True:
            try:
                channel, msg = self._outbox.get_nowait()
            except queue.Empty:
                return
            self.session.send(self._sockets[channel], msg)

    def _drain(self, name: str, sock: zmq.Socket[bytes]) -> None:
        while True:
            try:
                _idents, msg = self.session.recv(sock, mode=zmq.NOBLOCK)
            except (ValueError, KeyError, TypeError) as exc:  # bad signature or framing
                logger.warning("dropped a malformed %s message: %s", name, exc)
                continue
            if msg is None:
                return
            if not self._claim(name, msg):
                try:
                    self._on_message(name, msg)
                except Exception:
                    logger.exception("handling a %s message failed", name)

    def _claim(self, channel: str, msg: dict[str, Any]) -> bool:
        parent = msg.get("parent_header", {}).get("msg_id")
        if not parent:
            return False
        with self._pending_lock:
            pending = self._pending.get(parent)
        if pending is None:
            return False
        if channel == "iopub":
            if msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                pending.idle = True
        else:
            pending.reply = msg
        if pending.reply is not None and (pending.idle or not pending.want_idle):
            pending.event.set()
        return True
