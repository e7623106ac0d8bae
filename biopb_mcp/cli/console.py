"""``biopb-mcp console``: a terminal console on the running server's kernel, shared with the agent.

The scientist sees the agent's code and outputs as they happen (marked ``[agent]``) and can type
into the same namespace. This is jupyter-console (the ``console`` extra) attached to the kernel's
connection file, with the options that make other clients' work visible. Leaving it (``exit``,
``quit``, Ctrl-D) never ends the kernel: the kernel's bootstrap refuses shutdown requests.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from biopb_mcp.errors import KernelError, KernelProblem
from biopb_mcp.fs.runtime import CONFIG_DIR_KEY, connection_file_pid, pid_alive, private_runtime_dir

__all__ = ["AGENT_PREFIX", "ServerKernel", "console_argv", "find_kernel", "running_kernels"]

AGENT_PREFIX = "[agent] "
"""Printed before every input and output that came from another client: in practice, the agent."""


@dataclass(frozen=True)
class ServerKernel:
    """One running server's kernel, as found in the runtime dir."""

    server_pid: int
    connection_file: Path
    mtime: float
    config_dir: Path | None = None
    """The server's config dir, from its connection file (None: a file that does not name one)."""


def running_kernels(runtime_dir: Path) -> list[ServerKernel]:
    """Kernels of live servers in ``runtime_dir``, newest first (files of dead servers skipped)."""
    found: list[ServerKernel] = []
    try:
        # a shared runtime dir holds our files in a private subdirectory: look where the server wrote
        directory = private_runtime_dir(runtime_dir, create=False)
        entries = list(os.scandir(directory)) if directory is not None else []
    except OSError:
        return []
    for entry in entries:
        pid = connection_file_pid(entry.name)
        if pid is None or not entry.is_file():
            continue
        if not pid_alive(pid, mine=True):  # another user's process there is a reused pid
            continue
        try:
            mtime = entry.stat().st_mtime
        except OSError:
            continue
        found.append(ServerKernel(pid, Path(entry.path), mtime, _config_dir_of(Path(entry.path))))
    return sorted(found, key=lambda k: k.mtime, reverse=True)


def _config_dir_of(connection_file: Path) -> Path | None:
    """The config dir a server wrote into its connection file, or None (unreadable, not named)."""
    try:
        named = json.loads(connection_file.read_text(encoding="utf-8")).get(CONFIG_DIR_KEY)
    except (OSError, ValueError, AttributeError):
        return None
    return Path(named) if isinstance(named, str) and named else None


def find_kernel(runtime_dir: Path, pid: int | None = None, config_dir: Path | None = None) -> ServerKernel:
    """The kernel to attach to: the newest server's, or server ``pid``'s.

    With ``config_dir``, only a server of that config counts: two config trees may share a
    runtime dir, and "the newest server" must not be another tree's.

    Raises:
        KernelError: no running server of this config has a kernel there (or not the one asked for).
    """
    every = running_kernels(runtime_dir)
    mine = config_dir.resolve() if config_dir is not None else None
    kernels = [k for k in every if mine is None or (k.config_dir is not None and k.config_dir.resolve() == mine)]
    if pid is not None:
        for kernel in kernels:
            if kernel.server_pid == pid:
                return kernel
        for kernel in every:
            if kernel.server_pid == pid:
                where = kernel.config_dir or "a config this release cannot tell"
                raise KernelError(
                    f"the biopb-mcp server with pid {pid} runs with the config dir {where}, not {config_dir}",
                    kind=KernelProblem.CONSOLE_OTHER_CONFIG,
                    pid=pid,
                    server_config_dir=str(where),
                    config_dir=str(config_dir),
                )
        others = ", ".join(str(k.server_pid) for k in kernels)
        hint = f"; servers with a kernel: {others}" if others else ""
        raise KernelError(f"no biopb-mcp server with pid {pid} has a running kernel in {runtime_dir}{hint}")
    if not kernels:
        of_config = f" with the config dir {config_dir}" if config_dir is not None else ""
        raise KernelError(
            f"no running biopb-mcp server{of_config} with a kernel found in {runtime_dir}",
            kind=KernelProblem.CONSOLE_NO_SERVER,
            config_dir=None if config_dir is None else str(config_dir),
            runtime_dir=str(runtime_dir),
        )
    return kernels[0]


def console_argv(connection_file: Path) -> list[str]:
    """The jupyter-console command that attaches to ``connection_file`` showing others' work."""
    shell = "--ZMQTerminalInteractiveShell"
    return [
        sys.executable,
        "-m",
        "biopb_mcp.cli.console",
        "--existing",
        str(connection_file),
        f"{shell}.include_other_output=True",
        f"{shell}.other_output_prefix={AGENT_PREFIX}",
        f"{shell}.banner=",  # run() prints what this console is instead of the kernel's banner
    ]


def run(
    runtime_dir: Path, pid: int | None, announce: Callable[[str], None], *, config_dir: Path | None = None
) -> NoReturn:
    """Replace this process with the console after `announce`-ing what it attached to (the CLI
    writes that to the terminal); returns only on error (exit code 2 via KernelError). Only a
    server of ``config_dir`` is joined (see ``find_kernel``)."""
    kernel = find_kernel(runtime_dir, pid, config_dir)
    if importlib.util.find_spec("jupyter_console") is None:
        raise KernelError("biopb-mcp console needs jupyter-console", kind=KernelProblem.CONSOLE_NEEDS_EXTRA)
    announce(
        f"Attached to the kernel of biopb-mcp server pid {kernel.server_pid} "
        f"({kernel.connection_file}).\nThe agent's code and outputs appear marked "
        f"{AGENT_PREFIX.strip()}; what you type runs in the same namespace. exit, quit or Ctrl-D "
        "leaves this console; the kernel keeps running."
    )
    argv = console_argv(kernel.connection_file)
    os.execv(argv[0], argv)


def _launch_jupyter_console(argv: list[str]) -> None:
    """jupyter-console with the shell that shows the agent's work in order (see console_shell)."""
    from biopb_mcp.cli.console_shell import AgentConsoleApp

    AgentConsoleApp.launch_instance(argv=argv)


if __name__ == "__main__":  # the process run() replaces itself with
    _launch_jupyter_console(sys.argv[1:])
