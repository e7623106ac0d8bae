"""Watching a joined kernel that is not on this machine: restart by session id, death by heartbeat.

The end-to-end attach tests run a local kernel (its pid is watched); here the same notebook
kernel is taken for a remote one (the identity it reports names another machine), so only what
works across a tunnel is left: the session id on its messages and its heartbeat.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from _tests.support.isolation import make_settings
from _tests.support.notebook_kernel import NotebookKernel, isolated_env
from biopb_mcp.kernel.attached import (
    HEARTBEAT_GRACE,
    IDENTITY_EXPRESSION,
    SESSION_PROBE_INTERVAL,
    AttachedKernel,
)
from biopb_mcp.kernel.channels import KernelChannels
from biopb_mcp.kernel.rendering import parse_expression_json


@pytest.fixture(scope="module")
def notebook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NotebookKernel]:
    """One notebook kernel for the module: the local test leaves it running, the remote one ends it."""
    root = tmp_path_factory.mktemp("notebook")
    kernel = NotebookKernel(isolated_env(root), root / "kernel-remote.json")
    try:
        yield kernel
    finally:
        kernel.close()


def attached(notebook: NotebookKernel, root: Path) -> AttachedKernel:
    return AttachedKernel(make_settings(root, kernel=f'existing = "{notebook.connection_file}"\n'))


def join(kernel: AttachedKernel, *, remote: bool) -> tuple[KernelChannels, threading.Event]:
    info = kernel.start(lambda: 60.0).info
    gone = threading.Event()
    channels = KernelChannels(
        info, on_message=lambda _c, m: kernel.saw_message(m), is_alive=kernel.is_alive, on_death=gone.set
    )
    content = {
        "code": "",
        "silent": True,
        "store_history": False,
        "allow_stdin": False,
        "stop_on_error": False,
        "user_expressions": {"q": IDENTITY_EXPRESSION},
    }
    reply = channels.call("shell", "execute_request", content, 60)
    assert reply is not None
    answer = parse_expression_json(reply["content"]["user_expressions"]["q"]["data"]["text/plain"])
    kernel.identify([answer[0], "another-machine"] if remote else answer, reply["header"]["session"])
    return channels, gone


def test_a_local_kernel_is_watched_by_its_pid(notebook: NotebookKernel, tmp_path: Path) -> None:
    kernel = attached(notebook, tmp_path)
    channels, _gone = join(kernel, remote=False)
    try:
        assert kernel.pid == notebook.pid and kernel.status()["interrupt"] == "signal"
    finally:
        channels.close()
        kernel.shutdown()


def test_a_remote_kernel_restart_and_death_are_seen_without_its_pid(notebook: NotebookKernel, tmp_path: Path) -> None:
    kernel = attached(notebook, tmp_path)
    channels, gone = join(kernel, remote=True)
    try:
        assert kernel.pid is None and "interrupt_request" in kernel.status()["interrupt"]
        assert kernel.is_alive()
        notebook.restart()
        # A restart slower than HEARTBEAT_GRACE (a loaded machine) is first taken for a silent
        # heartbeat; the session probe still tells it apart once the new kernel answers, so this
        # waits for the probe's finding itself. The probe asks every interval; allow the restarted
        # kernel its start-up.
        assert kernel.restarted.wait(3 * SESSION_PROBE_INTERVAL + 30), "a restarted remote kernel was not noticed"
        assert gone.wait(30), "a restarted remote kernel still counts as alive"
        assert "restarted from its frontend" in kernel.exit_reason()
    finally:
        channels.close()
        kernel.shutdown()
    kernel = attached(notebook, tmp_path)
    channels, gone = join(kernel, remote=True)
    try:
        os.kill(notebook.pid, signal.SIGKILL)
        assert gone.wait(HEARTBEAT_GRACE + 30), "a dead remote kernel was not noticed"
        assert "heartbeat" in kernel.exit_reason()
    finally:
        channels.close()
        kernel.shutdown()


@pytest.mark.skipif(
    not zmq.has("curve"), reason="this pyzmq's libzmq has no CurveZMQ (jupyter_client then refuses encryption)"
)
def test_a_kernel_started_with_transport_encryption_is_joined(tmp_path: Path) -> None:
    """A Jupyter server set to ``transport_encryption`` writes CurveZMQ keys into the connection
    file, and its kernel answers only a client presenting them: every channel the host opens
    (shell, control, iopub, heartbeat, the session probe) must use them."""
    notebook = NotebookKernel(
        isolated_env(tmp_path), tmp_path / "kernel-encrypted.json", transport_encryption="required"
    )
    try:
        assert "curve_publickey" in json.loads(notebook.connection_file.read_text())
        kernel = attached(notebook, tmp_path)
        channels, gone = join(kernel, remote=True)  # shell answered; watched by heartbeat and probe alone
        try:
            # the reply waits for the request's iopub idle too, so iopub is heard as well
            reply = channels.call(
                "shell", "execute_request", {"code": "x = 6 * 7", "silent": False}, 30, want_idle=True
            )
            assert reply is not None and reply["content"]["status"] == "ok"
            reply = channels.call("control", "kernel_info_request", {}, 30)
            assert reply is not None and reply["content"]["status"] == "ok"
            time.sleep(HEARTBEAT_GRACE + 2)  # a heartbeat that cannot reach the kernel counts as gone by now
            assert kernel.is_alive() and not gone.is_set() and not kernel.restarted.is_set()
        finally:
            channels.close()
            kernel.shutdown()
    finally:
        notebook.close()
