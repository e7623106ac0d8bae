"""``%load_ext biopb_mcp`` and ``%biopb`` in a real notebook kernel (KernelManager, own process).

The agent's side is played by the same files a server writes (``kernel_link``) and a session
notebook written by the real recorder; the full path through a running server is in the attach
tests.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from _tests.support.notebook_kernel import NotebookKernel, isolated_env
from _tests.support.runner import run_to_end_raw
from _tests.support.stdio_procs import RawServer, result_text
from biopb_mcp.config.settings import load_settings
from biopb_mcp.ipython.extension import attach_text, status_text
from biopb_mcp.kernel.link import AgentPresence, KernelLink, link_id
from biopb_mcp.kernel.notebook import SessionRecorder, agent_cells, read_session


@pytest.fixture(scope="module")
def notebook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NotebookKernel, KernelLink, Path]]:
    root = tmp_path_factory.mktemp("notebook")
    env = isolated_env(root)
    kernel = NotebookKernel(env, root / "kernel-nb.json")
    try:
        kernel.run("%load_ext biopb_mcp")
        info = json.loads(kernel.connection_file.read_text())
        settings = load_settings(Path(env["BIOPB_CONFIG_DIR"]))
        yield kernel, KernelLink(settings.runtime_dir, link_id(info)), root
    finally:
        kernel.close()


def test_load_ext_prints_the_attach_command_for_this_kernel(notebook: tuple[NotebookKernel, KernelLink, Path]) -> None:
    kernel, _link, root = notebook
    ran = kernel.run("%reload_ext biopb_mcp")
    assert ran.error is None and not ran.stderr, ran
    conn = str(kernel.connection_file.resolve())
    lines = ran.stdout.splitlines()
    shell = next(
        line.strip() for line in lines if "--existing" in line and not line.strip().startswith(("claude", "{"))
    )
    argv = shlex.split(shell)
    assert argv[0] == f"BIOPB_CONFIG_DIR={root / 'config'}"
    assert argv[-2:] == ["--existing", conn]
    assert os.access(argv[1], os.X_OK), f"the printed server command is not executable: {argv[1]}"
    claude = next(line.strip() for line in lines if line.strip().startswith("claude mcp add"))
    assert shlex.split(claude)[-2:] == ["--existing", conn]
    entry = json.loads(next(line for line in lines if line.strip().startswith("{")))["mcpServers"]["biopb"]
    assert entry["args"][-2:] == ["--existing", conn]
    assert entry["env"] == {"BIOPB_CONFIG_DIR": str(root / "config")}
    assert "%biopb status" in ran.stdout and "%biopb pause" in ran.stdout


def test_pause_and_resume_reach_the_server_side_file(notebook: tuple[NotebookKernel, KernelLink, Path]) -> None:
    kernel, link, _root = notebook
    assert link.paused() is None
    ran = kernel.run("%biopb pause checking the segmentation by hand")
    assert ran.error is None and "Paused" in ran.stdout, ran
    pause = link.paused()
    assert pause is not None and pause.reason == "checking the segmentation by hand"
    assert "Paused by you" in kernel.run("%biopb status").stdout
    ran = kernel.run("%biopb resume")
    assert "Resumed" in ran.stdout and link.paused() is None
    assert "was not paused" in kernel.run("%biopb resume").stdout


def test_status_and_log_show_what_the_agent_ran(notebook: tuple[NotebookKernel, KernelLink, Path]) -> None:
    kernel, link, root = notebook
    assert "No agent has attached" in kernel.run("%biopb status").stdout
    recorder = SessionRecorder(root / "notebooks")
    path = recorder.start_notebook(kernel_name="python3", display_name="Python 3", about="test")
    for n, code in enumerate(["a = 1", "print('agent says hi')\nmean = 41 + a"], start=1):
        collector = recorder.collector()
        if "print" in code:
            collector.add("stream", {"name": "stdout", "text": "agent says hi\n"})
            collector.add("execute_result", {"data": {"text/plain": "42"}, "execution_count": n})
        recorder.code_cell(code, collector, {"job_id": f"job-{n}", "status": "ok", "seconds": 0.1})
    assert recorder.flush()
    recorder.close()
    _announce_agent(link, kernel.connection_file, path)
    link.note_submitted("job-2", "print('agent says hi')\nmean = 41 + a")
    status = kernel.run("%biopb status").stdout
    assert f"biopb-mcp pid {os.getpid()}" in status and "the kernel stays yours" in status
    assert "job-2" in status and "print('agent says hi')  (+1 lines)" in status
    ran = kernel.run("%biopb log 1")
    assert ran.error is None, ran
    assert "job-2" in ran.stdout and "mean = 41 + a" in ran.stdout and "agent says hi" in ran.stdout
    assert "a = 1" not in ran.stdout  # one cell asked for: only the last
    assert {"text/plain": "42"} in ran.results
    assert "a = 1" in kernel.run("%biopb log").stdout
    bad = kernel.run("%biopb log many")
    assert "positive number" in bad.stderr


def png_bytes(width: int, height: int) -> bytes:
    """A real PNG of that size (what a figure or a PIL image displays)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\0" + bytes(width) for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_log_shows_an_agents_image_by_its_size_to_a_text_frontend(
    notebook: tuple[NotebookKernel, KernelLink, Path],
) -> None:
    kernel, link, root = notebook
    recorder = SessionRecorder(root / "image-notebooks")
    path = recorder.start_notebook(kernel_name="python3", display_name="Python 3", about="test")
    collector = recorder.collector()
    png = base64.b64encode(png_bytes(556, 413)).decode()
    repr_text = "<PIL.PngImagePlugin.PngImageFile image mode=RGBA size=556x413 at 0x7F00>"
    collector.add("display_data", {"data": {"image/png": png, "text/plain": repr_text}, "metadata": {}})
    recorder.code_cell("display(img)", collector, {"job_id": "job-9", "status": "ok"})
    assert recorder.flush()
    recorder.close()
    _announce_agent(link, kernel.connection_file, path)
    ran = kernel.run("%biopb log 1")
    assert ran.error is None, ran
    (shown,) = ran.results
    assert shown["text/plain"] == "[image 556×413]" and shown["image/png"] == png


def test_a_gone_server_is_reported_as_gone(notebook: tuple[NotebookKernel, KernelLink, Path]) -> None:
    kernel, link, _root = notebook
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    presence = AgentPresence(
        server_pid=gone.pid, transport="stdio", owns_kernel=False, connection_file=str(kernel.connection_file)
    )
    link.announce(presence)
    assert "has exited" in kernel.run("%biopb status").stdout


def test_unknown_magic_command_shows_usage(notebook: tuple[NotebookKernel, KernelLink, Path]) -> None:
    kernel, _link, _root = notebook
    ran = kernel.run("%biopb frobnicate")
    assert "unknown command 'frobnicate'" in ran.stderr and "%biopb resume" in ran.stderr


def test_outside_a_kernel_the_extension_says_no_agent_can_attach() -> None:
    import contextlib
    import io

    from IPython.testing.globalipapp import get_ipython

    import biopb_mcp

    ip = get_ipython()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        biopb_mcp.load_ipython_extension(ip)
    assert "not a Jupyter kernel" in err.getvalue()
    biopb_mcp.unload_ipython_extension(ip)


def test_attach_text_quotes_paths_with_spaces(tmp_path: Path) -> None:
    conn = tmp_path / "my kernels" / "kernel-1.json"
    text = attach_text(conn, ["/opt/my env/bin/biopb-mcp"])
    shell = next(
        line.strip() for line in text.splitlines() if line.strip().startswith("/opt") or line.strip().startswith("'")
    )
    assert shlex.split(shell) == ["/opt/my env/bin/biopb-mcp", "--existing", str(conn)]
    assert "BIOPB_CONFIG_DIR" not in text


def test_status_text_without_a_notebook_says_recording_is_off() -> None:
    presence = AgentPresence(
        server_pid=os.getpid(), transport="http", owns_kernel=True, connection_file="/x.json", since=time.time()
    )
    text = status_text(presence, None)
    assert "it owns this kernel" in text and "records no session notebook" in text


def test_an_agent_that_left_cleanly_is_reported_as_one_that_was_killed(
    notebook: tuple[NotebookKernel, KernelLink, Path],
) -> None:
    """A real server joins this kernel, runs a cell and leaves by stdin EOF: %biopb status says it
    has exited, with what it ran (as after kill -9); its log and notebook say it joined, not started."""
    kernel, link, root = notebook
    kernel.run("nb_value = 6")  # the scientist's, before the agent joins
    env = isolated_env(root)
    server = RawServer(env, root / "leaving.err", "--existing", str(kernel.connection_file))
    try:
        server.initialize()
        assert not server.call("start_kernel", timeout=90).get("isError")
        assert "7" in result_text(run_to_end_raw(server, "left_cleanly = nb_value + 1\nleft_cleanly"))
        deadline = time.monotonic() + 60  # the note of what it ran is written off the call's path
        while (presence := link.presence()) is None or not presence.last_job:
            assert time.monotonic() < deadline, "the server never noted what it ran"
            time.sleep(0.05)
        assert server.proc.stdin is not None
        server.proc.stdin.close()
        assert server.proc.wait(60) == 0
    finally:
        server.close()
    status = kernel.run("%biopb status").stdout
    assert f"the last one (biopb-mcp pid {server.proc.pid}) has exited" in status, status
    assert "left_cleanly = nb_value + 1" in status and "Agent attached" not in status
    log = (root / "state" / "server.log").read_text()
    assert "stdin closed; leaving the joined kernel running" in log
    assert "stdin closed; shutting the kernel down" not in log
    presence = link.presence()
    assert presence is not None and presence.session_notebook
    nb = read_session(Path(presence.session_notebook))
    heading = nb.cells[0].source
    assert heading.startswith("# Agent session, joined kernel `kernel-nb.json`"), heading
    assert "kernel started" not in heading
    # a re-run lacks what the notebook held before the agent came: named first, the cell tagged
    (cell,) = agent_cells(nb)
    assert cell.metadata.biopb.outside_names == ["nb_value"] and "raises-exception" in cell.metadata.tags
    assert "#   nb_value" in nb.cells[1].source
    assert kernel.run("print(left_cleanly)").stdout == "7\n"  # the kernel and its namespace stay


def _announce_agent(link: KernelLink, connection_file: Path | str, notebook: Path) -> None:
    """What an attached stdio server writes beside the kernel: its presence and its notebook."""
    link.announce(
        AgentPresence(
            server_pid=os.getpid(),
            transport="stdio",
            owns_kernel=False,
            connection_file=str(connection_file),
            session_notebook=str(notebook),
        )
    )
