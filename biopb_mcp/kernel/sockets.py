"""A kernel's sockets and session, made by jupyter_client from the connection file's info.

jupyter_client knows every form a connection file takes: each transport's address
(``tcp://ip:port``, ``ipc://path-port``), the session's key and signature scheme, and the
CurveZMQ keys a Jupyter server adds when it starts kernels with transport encryption (such a
kernel answers only a client that presents its server key). Asking it, rather than building
addresses here, is what lets the agent join an encrypted notebook kernel, and brings the next
form with an upgrade of jupyter_client.

What stays ours is reading the sockets (``channels``): one IO thread polls shell, control and
iopub together and hands each reply to the caller waiting on its parent id, which neither of
jupyter_client's clients offers (the threaded one runs a tornado loop with a callback per
channel, the blocking one a queue per channel that any caller may drain).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import zmq
from jupyter_client.channels import HBChannel
from jupyter_client.client import KernelClient as _Connector
from jupyter_client.session import Session

__all__ = ["KernelSockets"]

_CONNECT = {
    "shell": _Connector.connect_shell,
    "control": _Connector.connect_control,
    "iopub": _Connector.connect_iopub,
}


class KernelSockets:
    """Connects sockets of one kernel on ``context``; the caller owns and closes what it gets."""

    def __init__(self, info: Mapping[str, Any], context: zmq.Context[zmq.Socket[bytes]]) -> None:
        # jupyter_client's base client, used only for its connection info and socket factory:
        # its channels are never started (the heartbeat class is the one its own clients use)
        self._connector = _Connector(context=context, hb_channel_class=HBChannel)
        self._connector.load_connection_info(dict(info))  # type: ignore[arg-type]

    def session(self, username: str = "biopb-mcp") -> Session:
        """A session signing with the kernel's key and scheme (one per thread that sends)."""
        base = self._connector.session
        return Session(key=base.key, signature_scheme=base.signature_scheme, username=username)

    def connect(self, channel: str, identity: bytes | None = None) -> zmq.Socket[bytes]:
        """A socket connected to ``channel`` (shell, control or iopub; iopub subscribed to all).

        Linger is 0: a request left unsent to a kernel that is gone must not hold the process
        at exit."""
        sock: zmq.Socket[bytes] = _CONNECT[channel](self._connector, identity=identity)
        sock.linger = 0
        return sock

    def heartbeat(self) -> HBChannel:
        """jupyter_client's heartbeat channel for this kernel, not yet started."""
        return self._connector.hb_channel  # type: ignore[no-any-return]
