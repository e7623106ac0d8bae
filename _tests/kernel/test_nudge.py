"""A request a kernel misses is nudged until it is answered, not once.

ipykernel idling in Qt's loop (``%gui qt``) can miss that a message arrived when it lands as the
loop is re-entered; only a later message wakes it. On a loaded machine a single follow-up can
land in the same gap. That fault cannot be produced on demand in a real kernel, so the shell here
is a stand-in speaking the Jupyter wire protocol (real ZMQ sockets, signed messages) that stays
deaf to a request until a given number of later messages have arrived.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
import zmq
from jupyter_client.session import Session

from biopb_mcp.kernel.channels import KernelChannels, nudge_waits

BOUND = 30.0
"""Seconds a call may wait; the stand-in answers within a few nudges, far sooner."""


class DeafShell:
    """A kernel's shell socket that answers a request only after ``wake_after`` more messages."""

    def __init__(self, wake_after: int) -> None:
        self.key = uuid.uuid4().hex
        self.session = Session(key=self.key.encode(), signature_scheme="hmac-sha256")
        self.ctx = zmq.Context()
        self.shell = self.ctx.socket(zmq.ROUTER)
        self.shell.linger = 0
        self.port = self.shell.bind_to_random_port("tcp://127.0.0.1")
        self.others = [self.ctx.socket(kind) for kind in (zmq.ROUTER, zmq.PUB)]  # control, iopub
        self.ports = [sock.bind_to_random_port("tcp://127.0.0.1") for sock in self.others]
        self.wake_after = wake_after
        self.nudges = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def info(self) -> dict[str, Any]:
        return {
            "transport": "tcp",
            "ip": "127.0.0.1",
            "shell_port": self.port,
            "control_port": self.ports[0],
            "iopub_port": self.ports[1],
            "key": self.key,
            "signature_scheme": "hmac-sha256",
        }

    def _serve(self) -> None:
        waiting: tuple[list[bytes], dict[str, Any]] | None = None
        while not self.stop.is_set():
            if not self.shell.poll(50):
                continue
            idents, frames = self.session.feed_identities(self.shell.recv_multipart())
            msg = self.session.deserialize(frames)
            if msg["header"]["msg_type"] == "kernel_info_request":
                self.nudges += 1
            else:
                waiting = (idents, msg)
            if waiting is not None and self.nudges >= self.wake_after:
                to, request = waiting
                self.session.send(self.shell, "echo_reply", {"status": "ok"}, parent=request, ident=to)
                waiting = None

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for sock in (self.shell, *self.others):
            sock.close(0)
        self.ctx.term()


@pytest.mark.parametrize("deaf_for", [1, 3])
def test_a_missed_request_is_nudged_until_it_is_answered(deaf_for: int) -> None:
    """Deaf to the request and to the first nudges: the call still gets its reply; one nudge
    alone (the earlier behaviour) left the request unanswered until the call timed out."""
    shell = DeafShell(wake_after=deaf_for)
    channels = KernelChannels(shell.info, on_message=lambda *_: None, is_alive=lambda: True, on_death=lambda: None)
    try:
        reply = channels.call("shell", "echo_request", {}, BOUND, nudge_after=0.05)
        assert reply is not None, f"no reply after {shell.nudges} nudges"
        assert reply["header"]["msg_type"] == "echo_reply"
        assert shell.nudges >= deaf_for
    finally:
        channels.close()
        shell.close()


def test_an_answered_request_is_not_nudged() -> None:
    shell = DeafShell(wake_after=0)
    channels = KernelChannels(shell.info, on_message=lambda *_: None, is_alive=lambda: True, on_death=lambda: None)
    try:
        reply = channels.call("shell", "echo_request", {}, BOUND, nudge_after=BOUND / 2)
        assert reply is not None and shell.nudges == 0
    finally:
        channels.close()
        shell.close()


def test_nudges_grow_apart_to_a_ceiling() -> None:
    """A long wait costs a few cheap messages a second at most, however long it lasts."""
    waits = nudge_waits(0.25)
    assert [next(waits) for _ in range(6)] == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
