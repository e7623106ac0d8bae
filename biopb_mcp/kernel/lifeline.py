"""Process hygiene: private runtime dirs, launching the kernel in its own session with a
parent-death pipe, interrupting it and killing its process group, and reading the kernel log's tail.

The launch and the interrupt are jupyter_client's (``launcher.launch_kernel``: its own session on
POSIX, the interrupt event on Windows); what is added here is ours: the lifeline pipe and its
reaper, the kernel log, and a kill that always finishes the whole group.

Lessons learnt the hard way: the kernel gets its own session so that its process
group can be killed without touching the server's; a pipe whose write end only the server holds
tells the kernel when the server is gone, even after SIGKILL (``PR_SET_PDEATHSIG`` is tied to the
forking thread and ppid polling misses subreapers).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from jupyter_client.launcher import launch_kernel

from biopb_mcp.fs import process_groups
from biopb_mcp.fs.runtime import private_runtime_dir

logger = logging.getLogger(__name__)

MAX_SOCKET_PATH = 100
"""Longest IPC socket path we use; AF_UNIX allows ~107 bytes and zmq needs a little slack."""

TAIL_LINES = 20
"""Kernel log lines quoted when the kernel dies."""


def private_dir(path: Path) -> Path:
    """The private dir for connection files under the configured runtime dir ``path``.

    See ``biopb_mcp.fs.runtime``: ``path`` itself when private or new, else a 0700
    subdirectory; a directory we did not create is never chmod-ed.
    """
    found = private_runtime_dir(path)
    assert found is not None  # create=True either returns a dir or raises
    return found


def socket_prefix(runtime_dir: Path, stem: str) -> tuple[Path, Path | None]:
    """Choose the IPC socket path prefix for one kernel.

    Returns ``(prefix, fallback_dir)``: sockets are ``<prefix>-<N>``. When the runtime dir's
    path is too long for AF_UNIX, the sockets go into a fresh short private dir under the
    system temp dir (returned as ``fallback_dir`` so the host can remove it later).
    """
    prefix = runtime_dir / stem
    if len(str(prefix)) + 4 <= MAX_SOCKET_PATH:
        return prefix, None
    # Named by our pid so a sweep after a SIGKILL can tell whose it was (runtime_files).
    short = Path(tempfile.mkdtemp(prefix=f"biopb-{os.getpid()}-"))
    os.chmod(short, 0o700)
    return short / "k", short


def launch(argv: Sequence[str], env: Mapping[str, str], log_path: Path, lifeline_fd: int) -> subprocess.Popen[bytes]:
    """Start the kernel process through jupyter_client's ``launch_kernel``: own session, stdin
    from /dev/null, output to the kernel log, the lifeline's read end passed on.

    ``independent``: the server's death is told by the lifeline, not by jupyter_client's parent
    pid (which would name whatever launched the server when it runs in a kernel itself). The child
    runs with umask 0o077 so the sockets it binds are 0600; the bootstrap restores the server's
    umask afterwards (passed in ``BIOPB_MCP_UMASK``).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # 0600 like the server log: code the agent runs prints here, secrets included. fchmod also
    # tightens a log an older version created with the umask's mode.
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o600)
    with open(fd, "ab") as log:
        log.write(f"\n=== kernel launch {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(argv)}\n".encode())
        log.flush()
        proc: subprocess.Popen[bytes] = launch_kernel(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log.fileno(),
            stderr=subprocess.STDOUT,
            env=dict(env),
            independent=True,
            pass_fds=(lifeline_fd,),
            close_fds=True,
            umask=0o077,
        )
        return proc


def interrupt(proc: subprocess.Popen[bytes], pgid: int | None) -> None:
    """SIGINT to the kernel as jupyter_client's local provisioner sends it: to its process group
    (its subprocesses stop too), else to the process; on Windows, through the interrupt event
    ``launch_kernel`` gave it. Never to the server's own group.
    """
    event = getattr(proc, "win32_interrupt_event", None)
    if event is not None:
        from jupyter_client.win_interrupt import send_interrupt

        send_interrupt(event)
    elif pgid is not None and pgid != process_groups.own_group():
        with contextlib.suppress(ProcessLookupError):
            process_groups.signal_group(pgid, signal.SIGINT)
    elif proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)


_REAPER = """
import os, signal, sys, time
fd, pgid = int(sys.argv[1]), int(sys.argv[2])
try:
    while os.read(fd, 4096):
        pass
except OSError:
    pass
for sig, grace in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 0.0)):
    try:
        os.killpg(pgid, sig)
    except OSError:
        break
    end = time.monotonic() + grace
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except OSError:
            break
        time.sleep(0.05)
"""


def launch_reaper(lifeline_fd: int, pgid: int) -> subprocess.Popen[bytes]:
    """Start a tiny watchdog that kills the kernel's process group once the lifeline pipe closes.

    The in-kernel watcher (bootstrap) covers Python kernels; this covers every kernel spec, a
    non-Python one or one started through a wrapper that drops the pipe, and it survives user
    code in the kernel that disturbs the in-kernel watcher. Its own session, an empty
    environment and ``-I -S``: it imports nothing and reacts to signals sent to neither group.
    """
    return subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _REAPER, str(lifeline_fd), str(pgid)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={},
        start_new_session=True,
        pass_fds=(lifeline_fd,),
        close_fds=True,
    )


def current_umask() -> int:
    """The process umask (reading it requires setting it; restored at once)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def kill_group(proc: subprocess.Popen[bytes], pgid: int | None, grace: float = 1.0) -> None:
    """End the kernel: SIGTERM its process group, then SIGKILL after ``grace`` seconds; reap it.

    Never signals the server's own group (a kernel launched without its own session would
    share it).
    """
    own = process_groups.own_group()

    def signal_group(sig: signal.Signals) -> None:
        if pgid is not None and pgid != own:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                process_groups.signal_group(pgid, sig)
        elif proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)

    if proc.poll() is None:
        signal_group(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    # The leader may be gone while children of the group live on: always finish with SIGKILL.
    signal_group(signal.SIGKILL)
    try:
        proc.wait(2.0)
    except subprocess.TimeoutExpired:
        logger.error("kernel pid %s did not exit after SIGKILL", proc.pid)


MAX_LOG_BYTES = 10 * 1024 * 1024
"""A kernel log bigger than this at launch is moved to ``kernel.log.1`` (one old copy kept)."""


def rotate_log(log_path: Path) -> None:
    """Keep the kernel log bounded across many kernel starts."""
    with contextlib.suppress(OSError):
        if log_path.stat().st_size > MAX_LOG_BYTES:
            os.replace(log_path, log_path.with_name(log_path.name + ".1"))


_LAUNCH_BANNERS = re.compile(
    r"^=== kernel launch [^\n]*$"
    r"|^NOTE: When using the `ipython kernel` entry point, Ctrl-C will not work\."
    r"(?:[^\n]*\n){0,8}?[^\n]*/issues/2049[^\n]*$"
    r"|^To connect another client to this kernel, use:\n[ \t]*--existing [^\n]*$",
    re.MULTILINE,
)
"""What every kernel prints at launch. Not why it died, and IPython's note that Ctrl-C will not
work contradicts the interrupt_kernel the agent is offered next to it."""


def without_banners(text: str) -> str:
    """The log text without the launch banners, blank runs collapsed."""
    text = _LAUNCH_BANNERS.sub("", text)
    return re.sub(r"\n\s*\n(\s*\n)+", "\n\n", text).strip("\n")


def log_tail(log_path: Path, start: int, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines the kernel wrote to its log since byte ``start`` (its launch)."""
    try:
        with open(log_path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            end = fh.tell()
            begin = max(start, end - 64 * 1024)
            fh.seek(begin)
            data = fh.read(end - begin)
    except OSError as exc:
        return f"(kernel log unreadable: {exc})"
    text = without_banners(data.decode("utf-8", errors="replace"))
    return "\n".join(text.splitlines()[-lines:]) if text else "(the kernel wrote nothing to its log)"


def remove_quietly(*paths: Path | None) -> None:
    """Delete files (connection file, sockets) and empty dirs, ignoring what is already gone."""
    for path in paths:
        if path is None:
            continue
        with contextlib.suppress(OSError):
            if path.is_dir():
                for child in path.iterdir():
                    with contextlib.suppress(OSError):
                        child.unlink()
                path.rmdir()
            else:
                path.unlink()
