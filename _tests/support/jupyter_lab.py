"""A real JupyterLab with real-time collaboration, for the live-cells tests and bench.

Started on loopback (a free port, a token, its own Jupyter dirs and working dir under a folder of
the caller's), it creates notebooks and their kernels through the REST API as the browser does
(contents, then a session with the notebook's path) and names each notebook's collaborative room,
which jupyter-nbmodel-client (a Y client written by others) joins in the browser's place.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

__all__ = ["JupyterLab", "Notebook"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Notebook:
    """One notebook and the kernel its session started."""

    path: str
    kernel_id: str
    connection_file: Path


class JupyterLab:
    """``jupyter lab`` in a subprocess with its dirs under ``root``; its kernels inherit ``env``."""

    def __init__(self, root: Path, env: dict[str, str], extra_args: tuple[str, ...] = ()) -> None:
        self.root = root
        self.notebooks_dir = root / "notebooks"
        self.notebooks_dir.mkdir()
        self.runtime_dir = root / "jupyter-runtime"
        self.runtime_dir.mkdir(mode=0o700)
        self.env = {
            **env,
            "JUPYTER_RUNTIME_DIR": str(self.runtime_dir),
            "JUPYTER_DATA_DIR": str(root / "jupyter-data"),
            "JUPYTER_CONFIG_DIR": str(root / "jupyter-config"),
        }
        self.port = _free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = (root / "jupyter.log").open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={self.notebooks_dir}",
                "--LabApp.news_url=",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                *(["--allow-root"] if os.geteuid() == 0 else []),  # CI containers run as root
                *extra_args,
            ],
            cwd=root,
            env={**os.environ, **self.env},
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.http = httpx.Client(
            base_url=self.url, headers={"Authorization": f"token {self.token}"}, timeout=60, trust_env=False
        )
        self._wait_ready()

    def _wait_ready(self, within: float = 120) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            with contextlib.suppress(httpx.HTTPError):
                if self.http.get("/api/status").status_code == 200:
                    return
            time.sleep(0.2)
        self.close()
        raise AssertionError(f"JupyterLab did not start:\n{self.log()[-3000:]}")

    def log(self) -> str:
        return (self.root / "jupyter.log").read_text(errors="replace")

    def new_notebook(self, name: str, cells: list[dict[str, Any]]) -> str:
        """Create ``name`` through the contents API with ``cells`` (nbformat 4.5 dicts)."""
        content = {
            "cells": cells,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
        parts = name.split("/")[:-1]
        for depth in range(1, len(parts) + 1):  # its folders first, as the file browser makes them
            self.http.put(f"/api/contents/{'/'.join(parts[:depth])}", json={"type": "directory"}).raise_for_status()
        answer = self.http.put(f"/api/contents/{name}", json={"type": "notebook", "content": content})
        answer.raise_for_status()
        return name

    def open_session(self, path: str) -> Notebook:
        """Start the notebook's kernel as JupyterLab does when it opens it (the sessions API)."""
        answer = self.http.post(
            "/api/sessions",
            json={"path": path, "name": path.rsplit("/", 1)[-1], "type": "notebook", "kernel": {"name": "python3"}},
        )
        answer.raise_for_status()
        kernel_id = answer.json()["kernel"]["id"]
        connection_file = self.runtime_dir / f"kernel-{kernel_id}.json"
        deadline = time.monotonic() + 60
        while not connection_file.is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
        return Notebook(path, kernel_id, connection_file)

    def room_url(self, path: str) -> str:
        """The websocket of ``path``'s room, as the browser reaches it."""
        from jupyter_nbmodel_client import get_jupyter_notebook_websocket_url

        return str(get_jupyter_notebook_websocket_url(self.url, path, self.token))

    def close(self) -> None:
        with contextlib.suppress(httpx.HTTPError):
            for session in self.http.get("/api/sessions").json():
                self.http.delete(f"/api/sessions/{session['id']}")
        self.http.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log.close()
