"""The scientist's kernel for attach tests: a real ipykernel in its own process, as a notebook runs it.

Started by jupyter-client's KernelManager (what JupyterLab and VS Code use), with a connection
file of its own, and driven by a KernelClient the way a notebook frontend drives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from jupyter_client import BlockingKernelClient, KernelManager

from _tests.support.isolation import config_text, isolated_vars, write_config

T = TypeVar("T")


def isolated_env(root: Path, runtime_dir: Path | None = None, extra_config: str = "") -> dict[str, str]:
    """Env for a notebook kernel (and a server beside it) whose biopb config lives under ``root``.

    The config names ``server.runtime_dir`` explicitly, so the kernel and a server started with
    the same ``BIOPB_CONFIG_DIR`` agree on where the link files are whatever XDG says.
    """
    write_config(root, config_text(root, extra_config, runtime_dir=runtime_dir))
    env = isolated_vars(root)
    del env["XDG_RUNTIME_DIR"]  # the notebook's own runtime dir is Jupyter's, set by the caller
    if os.environ.get("PYTHONPATH"):
        # a server spawned with this env (an MCP client passes only the env it is given) runs the
        # checkout under test, not whatever copy of the package is installed
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


@dataclass
class Ran:
    """What one cell produced in the notebook frontend."""

    stdout: str = ""
    stderr: str = ""
    results: list[dict[str, Any]] = field(default_factory=list)
    """``data`` of execute_result and display_data messages."""
    error: str | None = None

    def add(self, msg: dict[str, Any]) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            if content["name"] == "stderr":
                self.stderr += content["text"]
            else:
                self.stdout += content["text"]
        elif kind in ("execute_result", "display_data"):
            self.results.append(content["data"])
        elif kind == "error":
            self.error = f"{content['ename']}: {content['evalue']}"


class NotebookKernel:
    """A kernel started and owned by a KernelManager, as a notebook server does.

    jupyter-client runs its coroutines on an event loop of the calling thread (or, inside a
    running loop such as an async test's, on a helper thread it never closes). Every call here
    goes through one thread of our own instead, whose loop ``close`` closes: no loop or socket is
    left for the interpreter to warn about.
    """

    def __init__(self, env: dict[str, str], connection_file: Path, **launch: Any) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="notebook")
        self.manager = KernelManager(connection_file=str(connection_file), **launch)
        self.client: BlockingKernelClient = self._call(self._start, env)

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return self._thread.submit(fn, *args).result()

    def _start(self, env: dict[str, str]) -> BlockingKernelClient:
        self.manager.start_kernel(env={**os.environ, **env})
        client = self.manager.client()
        client.start_channels()
        client.wait_for_ready(timeout=90)
        return client

    @property
    def connection_file(self) -> Path:
        return Path(self.manager.connection_file)

    @property
    def pid(self) -> int:
        return int(self.manager.provisioner.pid)  # type: ignore[union-attr]

    def run(self, code: str, timeout: float = 60) -> Ran:
        """Execute ``code`` as a notebook cell; everything the frontend would show."""
        ran = Ran()
        self._call(lambda: self.client.execute_interactive(code, output_hook=ran.add, timeout=timeout))
        return ran

    def restart(self) -> None:
        """Restart the kernel as the notebook's Restart button does (same connection file)."""
        self._call(lambda: (self.manager.restart_kernel(now=True), self.client.wait_for_ready(timeout=90)))

    def shutdown(self) -> None:
        """Shut the kernel down as the notebook's Shut Down does (its connection file is removed)."""
        self._call(lambda: self.manager.shutdown_kernel(now=True))

    def is_alive(self) -> bool:
        return self._call(self.manager.is_alive)

    def close(self) -> None:
        def stop() -> None:
            self.client.stop_channels()
            if self.manager.is_alive():
                self.manager.shutdown_kernel(now=True)
            self.manager.cleanup_resources()
            with contextlib.suppress(RuntimeError):
                asyncio.get_event_loop_policy().get_event_loop().close()

        try:
            self._call(stop)
        finally:
            self._thread.shutdown(wait=True)
