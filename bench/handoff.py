"""``--agent handoff``: hand a run to an MCP host the bench cannot script (Claude Desktop, Cursor,
a person at a keyboard).

Per run (per session of a two-session case) the bench starts the run's server over streamable
HTTP on a free loopback port, with its bearer token and the run's isolated config tree and trace;
prints and writes ``handoff.json`` (URL, token, client config lines, the prompt, the work dir, the
DONE file to create); then waits until that DONE file exists or the timeout passes, and stops the
server and its kernel. Checks, trace and report are the same as for any agent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from _tests.support.http_start import started, token_accepted
from _tests.support.prepared_trees import ConfigTree
from bench.agents import AgentRun, kill_tree
from bench.prepare import child_env, server_command

__all__ = ["HandoffFiles", "handoff_files", "run_handoff"]

START_TIMEOUT = 60.0
"""Seconds for the HTTP server to say where it listens."""

_print_lock = threading.Lock()


class HandoffFiles:
    """Where one handed-off session's files go: ``handoff.json`` and ``DONE``, suffixed ``-<n>``
    for a session that is not the last of its case."""

    def __init__(self, run_dir: Path, session: int, sessions: int) -> None:
        suffix = "" if session == sessions else f"-{session}"
        self.json = run_dir / f"handoff{suffix}.json"
        self.done = run_dir / f"DONE{suffix}"
        self.stderr = run_dir / f"server{suffix}.err"


def handoff_files(run_dir: Path, session: int = 1, sessions: int = 1) -> HandoffFiles:
    return HandoffFiles(run_dir, session, sessions)


def run_handoff(
    *, tree: ConfigTree, workdir: Path, trace: Path, prompt: str, files: HandoffFiles, timeout: float, label: str
) -> AgentRun:
    """Serve one session over HTTP until ``files.done`` appears or ``timeout`` passes.

    Raises:
        RuntimeError: the server did not start, or exited before DONE (its stderr is in
            ``files.stderr``).
    """
    env = {**os.environ, **child_env(tree)}
    argv = [*server_command(), "--transport", "http", "--port", "0", "--trace", str(trace)]
    start = time.monotonic()
    with files.stderr.open("wb") as err:
        proc = subprocess.Popen(
            argv,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    marker = ("BIOPB_CONFIG_DIR", str(tree.root))
    try:
        found = None
        while time.monotonic() - start < START_TIMEOUT:
            found = started(files.stderr.read_text(encoding="utf-8", errors="replace"))
            if found is not None or proc.poll() is not None:
                break
            time.sleep(0.05)
        if found is None:
            raise RuntimeError(f"the HTTP server did not start (no serving and token lines); see {files.stderr}")
        url, token = found
        if not token_accepted(url, token):
            raise RuntimeError(f"the HTTP server at {url} refuses the token it printed; see {files.stderr}")
        headers = {"Authorization": f"Bearer {token}"}
        info = {
            "run": label,
            "url": url,
            "token": token,
            "headers": headers,
            "mcpServers": {"biopb": {"type": "http", "url": url, "headers": headers}},
            "claude_code": f'claude mcp add --transport http biopb {url} --header "Authorization: Bearer {token}"',
            "prompt": prompt,
            "workdir": str(workdir),
            "done_file": str(files.done),
            "timeout_s": timeout,
        }
        files.json.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        with _print_lock:
            print(
                f"\n=== handoff: {label} ===\nMCP server: {url}\n"
                + f"Authorization: Bearer {token}\n"
                + f"client config: {json.dumps(info['mcpServers'])}\nwork dir: {workdir}\nprompt:\n{prompt}\n"
                f"when finished: touch {files.done}   (details: {files.json}; timeout {timeout:g} s)\n",
                file=sys.stdout,
                flush=True,
            )
        while not files.done.exists() and time.monotonic() - start < timeout:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        done = files.done.exists()
        duration = time.monotonic() - start
        if not done and proc.poll() is not None:
            raise RuntimeError(
                f"the run's server exited (code {proc.returncode}) before {files.done.name} appeared; see {files.stderr}"
            )
    finally:
        killed = kill_tree(proc.pid, marker=marker)
        proc.wait()
    return AgentRun(exit_code=0 if done else None, timed_out=not done, duration_s=round(duration, 3), killed=killed)
