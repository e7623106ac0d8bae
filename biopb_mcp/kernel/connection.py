"""What the parts of a kernel client share: the channels, whether code is accepted, the settings.

``KernelClient`` sets it (connect, open, abandon, disconnect); its parts (jobs, probes, the watch
on other clients' cells) read it. One lock guards everything the parts keep about the kernel, so a
decision that spans two parts (hold a request while another client's cell runs, send it when that
cell ends) is taken at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from biopb_mcp.errors import KernelError
from biopb_mcp.kernel.channels import KernelChannels

if TYPE_CHECKING:
    from biopb_mcp.config.settings import Settings

__all__ = ["ClientConnection"]


class ClientConnection:
    """The kernel connected now (if any), as the client's parts see it.

    Args:
        settings: the settings in force (``KernelClient.reconfigure`` replaces them).
        not_ready: builds the error raised when no kernel accepts code (the host knows why).
    """

    def __init__(self, settings: Settings, not_ready: Callable[[], KernelError]) -> None:
        self.settings = settings
        self.not_ready = not_ready
        self.lock = threading.RLock()
        """Guards the parts' state about the kernel; never held while waiting on the kernel."""
        self.turn = threading.Lock()
        """One request at a time between code and inspections (an inspection must not queue
        behind code, nor code behind an inspection's reply)."""
        self.channels: KernelChannels | None = None
        self.open = False
        """True from ``KernelClient.open`` until the kernel is abandoned: only then is code accepted."""

    def require(self) -> KernelChannels:
        """The channels of a kernel that accepts code.

        Raises:
            KernelNotReady: none does (built by ``not_ready``).
        """
        channels = self.channels
        if not self.open or channels is None:
            raise self.not_ready()
        return channels

    def ours(self) -> str | None:
        """The session id on this client's requests (another client's cells carry another)."""
        channels = self.channels
        return channels.session.session if channels is not None else None
