"""Which collaborative notebook this kernel belongs to: its Jupyter server and its room.

A kernel started by jupyter_server for a notebook has the notebook's path in its environment
(``JPY_SESSION_NAME``, since jupyter_server 2) and is a child of that server, whose URL and token
are in the ``jpserver-<pid>.json`` file it keeps in Jupyter's runtime dir. jupyter-collaboration
serves each document as a room: ``PUT /api/collaboration/session/<path>`` answers the room's file
id, and ``/api/collaboration/room/json:notebook:<file id>`` is its websocket. Everything here is
the standard library, so a kernel without the live extra can still say why it is not live.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from biopb_mcp.text.install import install_command

__all__ = ["INSTALL_LINE", "NotLive", "Room", "locate_room"]

INSTALL_LINE = (
    f"{install_command('live')} (in the Python that runs JupyterLab and in the kernel's), then restart JupyterLab"
)
"""What to install for live cells: jupyter-collaboration on the server, a Y client in the kernel."""

REQUEST_TIMEOUT = 5.0
"""Seconds for the one HTTP request that finds the room (the server is on this machine)."""


class NotLive(Exception):
    """Why this kernel's notebook cannot show the agent's cells live (the message is for the scientist)."""


@dataclass(frozen=True)
class Room:
    """The collaborative room of this kernel's notebook."""

    path: str
    """The notebook's path under the server's root (as the contents API names it)."""
    server_url: str
    token: str
    file_id: str
    session_id: str

    @property
    def websocket_url(self) -> str:
        """The room's websocket (the token goes in a header, never in the URL)."""
        base = self.server_url.replace("http", "ws", 1)
        query = urllib.parse.urlencode({"sessionId": self.session_id})
        return f"{base.rstrip('/')}/api/collaboration/room/json:notebook:{self.file_id}?{query}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"} if self.token else {}


def _servers(runtime_dir: Path) -> list[dict[str, object]]:
    found = []
    for file in sorted(runtime_dir.glob("jpserver-*.json")):
        with contextlib.suppress(OSError, ValueError):
            info = json.loads(file.read_text(encoding="utf-8"))
            if isinstance(info, dict) and isinstance(info.get("url"), str):
                found.append(info)
    return found


def _api_path(session_name: str, root_dir: str) -> str:
    """The contents-API path of the notebook ``JPY_SESSION_NAME`` names (absolute or API form)."""
    if os.path.isabs(session_name):
        relative = os.path.relpath(os.path.realpath(session_name), os.path.realpath(root_dir))
        if relative.startswith(".."):
            raise NotLive(f"the notebook {session_name} is outside the Jupyter server's root {root_dir}.")
        return Path(relative).as_posix()
    # older collaboration frontends named a session by the "RTC:" drive; it is not part of the path
    return session_name.removeprefix("RTC:").lstrip("/")


def locate_room(env: Mapping[str, str], parent_pid: int, runtime_dir: Path) -> Room:
    """The room of the notebook whose kernel this is.

    Args:
        env: the kernel's environment (``JPY_SESSION_NAME``).
        parent_pid: the kernel's parent process: the Jupyter server that started it.
        runtime_dir: Jupyter's runtime dir, where running servers keep their ``jpserver`` files.

    Raises:
        NotLive: not a notebook's kernel under a Jupyter server, or a server without real-time
            collaboration; the message says which and what would make it live.
    """
    session_name = env.get("JPY_SESSION_NAME", "")
    if not session_name:
        raise NotLive(
            "this kernel was not started by a Jupyter server for a notebook (a console, VS Code or "
            "a script runs it), so there is no open notebook to show the agent's cells in; "
            "%biopb log shows them here."
        )
    server = next((s for s in _servers(runtime_dir) if s.get("pid") == parent_pid), None)
    if server is None:
        raise NotLive(
            f"no running Jupyter server started this kernel (none of the servers in {runtime_dir} is "
            f"its parent, pid {parent_pid}), so there is no collaborative document to join (VS Code and "
            "other frontends that start kernels themselves have none); %biopb log shows the agent's cells here."
        )
    url, token = str(server["url"]), str(server.get("token") or "")
    path = _api_path(session_name, str(server.get("root_dir") or "/"))
    auth = {"Authorization": f"token {token}"} if token else {}
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the server is local: no proxy
    exists = urllib.request.Request(
        f"{url.rstrip('/')}/api/contents/{urllib.parse.quote(path)}?content=0", headers=auth
    )
    try:
        with opener.open(exists, timeout=REQUEST_TIMEOUT):
            pass
    except urllib.error.HTTPError as exc:
        raise NotLive(
            f"the Jupyter server has no notebook {path} (HTTP {exc.code}) to show the agent's cells in."
        ) from None
    except OSError as exc:
        raise NotLive(f"the Jupyter server at {url} did not answer: {exc}.") from None
    request = urllib.request.Request(
        f"{url.rstrip('/')}/api/collaboration/session/{urllib.parse.quote(path)}",
        data=json.dumps({"format": "json", "type": "notebook"}).encode(),
        method="PUT",
        headers={"Content-Type": "application/json", **auth},
    )
    try:
        with opener.open(request, timeout=REQUEST_TIMEOUT) as response:
            answer = json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        body = exc.read().decode("utf-8", "replace")
        if exc.code == 404 and not body.lstrip().startswith("{"):  # no such route: not the file's 404
            raise NotLive(
                "the Jupyter server has no real-time collaboration (jupyter-collaboration is not "
                f"installed there). To see the agent's cells live: {INSTALL_LINE}."
            ) from None
        raise NotLive(f"the Jupyter server refused the notebook's room for {path} (HTTP {exc.code}).") from None
    except (OSError, ValueError) as exc:
        raise NotLive(f"the Jupyter server at {url} did not answer: {exc}.") from None
    if not isinstance(answer, dict) or "fileId" not in answer:
        raise NotLive(f"the Jupyter server answered no room for {path}.")
    return Room(path, url, token, str(answer["fileId"]), str(answer.get("sessionId", "")))
