"""Agents the bench can drive, and the one way it runs them: a command under a timeout.

Every agent is a command line filled from a template with ``{prompt}``, ``{workdir}`` and
``{mcp_config}`` (each placeholder replaced inside each argument, no shell involved; the same
values are also in the environment as ``BENCH_PROMPT``, ``BENCH_WORKDIR``, ``BENCH_MCP_CONFIG``
for a ``sh -c`` wrapper). The command runs with the work dir as its cwd, in its own session, so
that after the per-case timeout the whole tree can be killed: its process group, every descendant
seen at that moment (a kernel runs in a session of its own), and any process still carrying this
run's ``BIOPB_CONFIG_DIR``.

Built-in names: ``scripted`` (bench.scripted, the known solution through a real MCP client,
reading the docs the run's index lists), ``docs-blind`` (the same client playing the textbook
solution, reading no doc), ``nothing`` (exits 0 at once), ``claude`` (Claude Code headless) and
``handoff`` (bench.handoff: the run is handed to a person or an MCP host over HTTP). Anything else
is a template.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

__all__ = [
    "TERM_GRACE",
    "Agent",
    "AgentNotFound",
    "AgentRun",
    "kill_tree",
    "make_agent",
    "missing_command",
    "run_command",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The checkout holding ``bench/``: put on PYTHONPATH so ``python -m bench.scripted`` resolves."""

TERM_GRACE = 3.0
"""Seconds between SIGTERM and SIGKILL when a tree is killed: time for a server to stop its kernel."""

CLAUDE_TEMPLATE = (
    "claude -p {prompt} --mcp-config {mcp_config} --strict-mcp-config --allowedTools mcp__biopb --output-format json"
)
"""Claude Code, headless: only this run's server (--strict-mcp-config), its tools pre-approved and
nothing else (in -p mode a tool outside --allowedTools is denied), so all work goes through the
kernel and the trace sees it."""

PROMPT_SUFFIX = (
    "\n\nThe files are in {workdir}. Save the outputs I asked for in that folder (or a results folder inside it)."
)


@dataclass(frozen=True)
class Agent:
    """A named command template; see the module docstring for the placeholders."""

    name: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)

    def command(self, *, prompt: str, workdir: Path, mcp_config: Path, case: str = "") -> list[str]:
        """The template with this run's values substituted into every argument (``{case}``, the
        case name, is for harness-aware agents such as the scripted one)."""
        values = {"{prompt}": prompt, "{workdir}": str(workdir), "{mcp_config}": str(mcp_config), "{case}": case}
        filled = []
        for arg in self.argv:
            for key, value in values.items():
                arg = arg.replace(key, value)
            filled.append(arg)
        return filled


def make_agent(spec: str) -> Agent:
    """An agent from ``--agent``: a built-in name, or a command template (shell-style quoting).

    Raises:
        ValueError: an empty template.
    """
    python = sys.executable
    if spec == "scripted":
        argv: tuple[str, ...] = (
            python,
            "-m",
            "bench.scripted",
            "--case",
            "{case}",
            "--workdir",
            "{workdir}",
            "--mcp-config",
            "{mcp_config}",
        )
        return Agent("scripted", argv)
    if spec == "docs-blind":
        return Agent("docs-blind", (*make_agent("scripted").argv, "--blind"))
    if spec == "handoff":
        return Agent("handoff", ())
    if spec == "nothing":
        return Agent("nothing", ("true",))
    if spec == "claude":
        return Agent("claude", tuple(shlex.split(CLAUDE_TEMPLATE)))
    argv = tuple(shlex.split(spec))
    if not argv:
        raise ValueError("--agent is empty: give a built-in name (scripted, nothing, claude) or a command template")
    return Agent(Path(argv[0]).name, argv)


class AgentNotFound(OSError):
    """The agent's command does not exist: every run would fail the same way."""


def missing_command(agent: Agent) -> str | None:
    """The agent's program when it cannot be found (not on PATH, no such file), else None."""
    if not agent.argv:
        return None
    program = agent.argv[0]
    if os.sep in program:
        return None if os.access(program, os.X_OK) else program
    return None if shutil.which(program) else program


@dataclass(frozen=True)
class AgentRun:
    """How one agent process ended."""

    exit_code: int | None
    timed_out: bool
    duration_s: float
    killed: list[int]


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _carrying(marker: tuple[str, str] | None) -> list[psutil.Process]:
    """Live processes whose environment has ``marker`` (name, value): this run's own servers and
    kernels, wherever they were reparented to."""
    if marker is None:
        return []
    name, value = marker
    found = []
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            if proc.environ().get(name) == value:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def kill_tree(pid: int, *, marker: tuple[str, str] | None = None, grace: float = TERM_GRACE) -> list[int]:
    """Stop ``pid``'s process group, its descendants and every process carrying ``marker``.

    SIGTERM first (a server then shuts its kernel down), SIGKILL after ``grace`` seconds.
    Returns the pids that were still alive when the kill began.
    """
    targets: dict[int, psutil.Process] = {}
    for proc in [*_descendants(pid), *_carrying(marker)]:
        targets[proc.pid] = proc
    try:
        targets[pid] = psutil.Process(pid)
    except psutil.Error:
        pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for proc in list(targets.values()):
            try:
                proc.send_signal(sig)
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(list(targets.values()), timeout=grace if sig == signal.SIGTERM else 5.0)
        if not alive:
            break
    return sorted(targets)


def run_command(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    stdout: Path,
    stderr: Path,
    marker: tuple[str, str] | None = None,
) -> AgentRun:
    """Run one agent command to completion or timeout, then make sure nothing of it survives.

    Raises:
        OSError: the command cannot be started (not found, not executable): a harness failure.
    """
    start = time.monotonic()
    with stdout.open("wb") as out, stderr.open("wb") as err:
        try:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
            )
        except FileNotFoundError:
            raise AgentNotFound(f"agent command not found: {argv[0]}") from None
        timed_out = False
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            code = None
        duration = time.monotonic() - start
        # Also after a clean exit: a server or kernel left behind would outlive the run.
        killed = kill_tree(proc.pid, marker=marker) if timed_out else []
        if not timed_out:
            leftovers = _carrying(marker)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            for leftover in leftovers:
                killed += kill_tree(leftover.pid, marker=None, grace=TERM_GRACE)
        proc.wait()
    return AgentRun(exit_code=code, timed_out=timed_out, duration_s=round(duration, 3), killed=killed)
