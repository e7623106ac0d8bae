"""What ``%biopb status`` says where the agent's cells cannot be live, and that nothing else changes.

A real JupyterLab with its collaboration extension turned off (the one server of this module; a
notebook and its kernel through the REST API), and a kernel no Jupyter server started, as a
console or VS Code starts one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from jupyter_client import BlockingKernelClient

from _tests.support.jupyter_rtc import SCIENTIST_CELL, JupyterServer, Opened, require_rtc
from biopb_mcp.text.install import install_command


def test_without_real_time_collaboration_nothing_changes_and_status_says_what_to_install(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    require_rtc()
    plain = JupyterServer(
        tmp_path_factory.mktemp("plain"), ("--ServerApp.jpserver_extensions={'jupyter_server_ydoc': False}",)
    )
    try:
        notebook = plain.open_session(plain.new_notebook("plain.ipynb", [SCIENTIST_CELL]))
        kernel = BlockingKernelClient(connection_file=str(notebook.connection_file))
        kernel.load_connection_file()
        kernel.start_channels(hb=False)
        try:
            kernel.wait_for_ready(timeout=90)
            opened = Opened(notebook, kernel, None)
            loaded = opened.run("%load_ext biopb_mcp")
            assert "--existing" in loaded and "Live" not in loaded, loaded
            status = opened.run("%biopb status")
            assert "Live cells: not shown in this notebook: the Jupyter server has no real-time collaboration" in status
            assert install_command("live") in status, status  # this checkout: the bare name is another project's
            assert "Live cells: not shown" in opened.run("%biopb live on")
        finally:
            kernel.stop_channels()
    finally:
        plain.close()


def test_outside_jupyter_status_says_why_not_live(tmp_path: Path) -> None:
    """A kernel no Jupyter server started (a console's, VS Code's): nothing changes, status says why."""
    from _tests.support.notebook_kernel import NotebookKernel, isolated_env

    runtime = tmp_path / "jupyter-runtime"
    runtime.mkdir(mode=0o700)
    env = {**isolated_env(tmp_path), "JUPYTER_RUNTIME_DIR": str(runtime)}
    kernel = NotebookKernel(env, runtime / "kernel-console.json")
    try:
        loaded = kernel.run("%load_ext biopb_mcp").stdout
        assert "Live" not in loaded, loaded
        status = kernel.run("%biopb status").stdout
        assert "Live cells: not shown in this notebook" in status, status
        assert "not started by a Jupyter server for a notebook" in status and "%biopb log" in status
    finally:
        kernel.close()


def test_the_notebook_path_is_taken_under_the_servers_root(tmp_path: Path) -> None:
    """JPY_SESSION_NAME is the notebook's absolute path when the session named the file, else the
    API path (with the "RTC:" drive older collaboration frontends added)."""
    from biopb_mcp.ipython.jupyter_room import NotLive, _api_path

    root = tmp_path / "root"
    (root / "project").mkdir(parents=True)
    assert _api_path(str(root / "project" / "cells.ipynb"), str(root)) == "project/cells.ipynb"
    assert _api_path("project/cells.ipynb", str(root)) == "project/cells.ipynb"
    assert _api_path("RTC:project/cells.ipynb", str(root)) == "project/cells.ipynb"
    assert _api_path("run:1.ipynb", str(root)) == "run:1.ipynb"
    with pytest.raises(NotLive, match="outside the Jupyter server's root"):
        _api_path(str(tmp_path / "elsewhere.ipynb"), str(root))
