"""The files a server and the %biopb magics share: one writer each, atomic, private, keyed by the kernel."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from biopb_mcp.fs.runtime import private_runtime_dir
from biopb_mcp.ipython.extension import agent_cells_of, status_text
from biopb_mcp.kernel.link import AgentPresence, KernelLink, link_id


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def presence(pid: int | None = None) -> AgentPresence:
    return AgentPresence(
        server_pid=pid or os.getpid(),
        transport="stdio",
        owns_kernel=False,
        connection_file="/k.json",
        session_notebook="/nb.ipynb",
    )


def test_the_id_follows_the_key_not_the_path_and_hides_the_key(tmp_path: Path) -> None:
    key = "0123456789abcdef"
    one = link_id({"key": key}, tmp_path / "a.json")
    assert one == link_id({"key": key.encode()}, tmp_path / "copy" / "b.json")
    assert one != link_id({"key": key + "0"})
    assert key not in one
    assert link_id({"key": ""}, tmp_path / "a.json") != link_id({"key": ""}, tmp_path / "b.json")


def test_pause_resume_and_file_modes(tmp_path: Path) -> None:
    link = KernelLink(tmp_path / "rt", "abc")
    assert link.paused() is None and link.resume() is False
    link.pause("  lunch  ")
    pause = link.paused()
    assert pause is not None and pause.reason == "lunch"
    files = list((tmp_path / "rt").iterdir())
    assert [f.name for f in files] == ["pause-abc.json"]
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "rt").stat().st_mode) == 0o700
    assert link.resume() is True and link.paused() is None
    assert KernelLink(tmp_path / "rt", "other").paused() is None


def test_an_unreadable_pause_file_still_pauses(tmp_path: Path) -> None:
    link = KernelLink(tmp_path / "rt", "abc")
    link.pause()
    (tmp_path / "rt" / "pause-abc.json").write_text("{not json")
    pause = link.paused()
    assert pause is not None and pause.reason == ""


def test_presence_round_trip_and_only_its_writer_leaves_it(tmp_path: Path) -> None:
    link = KernelLink(tmp_path / "rt", "abc")
    assert link.presence() is None
    link.announce(presence())
    link.note_submitted("job-3", "x = 1\n" * 100)
    got = link.presence()
    assert got is not None and got.alive and got.last_job == "job-3"
    assert got.last_code is not None and len(got.last_code) == 200
    link.announce(presence(dead_pid()))
    got = link.presence()
    assert got is not None and not got.alive
    link.note_submitted("job-4", "y = 2")  # another server's file: left alone
    link.leave()
    got = link.presence()
    assert got is not None and got.last_job is None and got.exited is None


def test_a_server_leaving_a_joined_kernel_is_remembered_as_exited_with_its_last_code(tmp_path: Path) -> None:
    """A clean exit reads as a kill does: the magics say the agent has exited, and what it ran."""
    link = KernelLink(tmp_path / "rt", "abc")
    link.announce(presence())
    link.note_submitted("job-7", "labels = segment(img)")
    link.leave()
    got = link.presence()
    assert got is not None and got.exited is not None and not got.alive
    assert got.last_job == "job-7" and got.last_code == "labels = segment(img)"
    owned = KernelLink(tmp_path / "rt", "owned")  # a kernel that ends with its server: nothing to remember
    owned.announce(
        AgentPresence(server_pid=os.getpid(), transport="stdio", owns_kernel=True, connection_file="/k.json")
    )
    owned.leave()
    assert owned.presence() is None


CRAFTED_PRESENCE = [
    '{"server_pid": "1234", "transport": "stdio", "owns_kernel": false, "connection_file": "/k"}',
    '{"server_pid": true, "transport": "stdio", "owns_kernel": false, "connection_file": "/k"}',
    '{"server_pid": -5, "transport": "stdio", "owns_kernel": false, "connection_file": "/k"}',
    '{"server_pid": 1099511627776, "transport": "stdio", "owns_kernel": false, "connection_file": "/k"}',
    '{"server_pid": 1, "transport": "stdio", "owns_kernel": "yes", "connection_file": "/k"}',
    '{"server_pid": 1, "transport": "stdio", "owns_kernel": false, "connection_file": "/k", "since": 1e300}',
    '{"server_pid": 1, "transport": "stdio", "owns_kernel": false, "connection_file": "/k", "since": NaN}',
    '{"server_pid": 1, "transport": "stdio", "owns_kernel": false, "connection_file": "/k", "last_code": ["x"]}',
    '{"server_pid": 1, "transport": ["stdio"], "owns_kernel": false, "connection_file": "/k"}',
    '{"server_pid": 1, "transport": "stdio", "owns_kernel": false, "connection_file": "/k", '
    '"session_notebook": ' + json.dumps("x" * 5000) + "}",
    '{"transport": "stdio"}',
    "[1, 2, 3]",
    '{"server_pid": 1, ',
    '{"server_pid": 1, "transport": "stdio", "owns_kernel": false, "connection_file": "' + "k" * 100_000 + '"}',
]


@pytest.mark.parametrize("text", CRAFTED_PRESENCE, ids=range(len(CRAFTED_PRESENCE)))
def test_a_crafted_presence_file_is_ignored_with_a_log_line(
    tmp_path: Path,
    text: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    link = KernelLink(tmp_path / "rt", "abc")
    link.pause()  # makes the private dir
    (tmp_path / "rt" / "agent-abc.json").write_text(text)
    with caplog.at_level(logging.WARNING, logger="biopb_mcp.kernel.link"):
        assert link.presence() is None
        link.note_submitted("job-1", "x")  # the server's paths through the file do not raise either
        link.leave()
    assert "ignoring the %biopb link file agent-abc.json" in caplog.text
    assert status_text(link.presence(), link.paused()).startswith("No agent has attached")


def test_a_pause_file_with_crafted_fields_still_pauses_with_its_own_time(tmp_path: Path) -> None:
    link = KernelLink(tmp_path / "rt", "abc")
    link.pause()
    path = tmp_path / "rt" / "pause-abc.json"
    for text in ('{"since": 1e300, "reason": "r"}', '{"since": "now", "reason": 42}', "x" * 100_000):
        path.write_text(text)
        pause = link.paused()
        assert pause is not None and abs(pause.since - path.stat().st_mtime) < 1, text
        assert pause.reason in ("", "r")
        assert "Paused by you" in status_text(None, pause)


def run_bounded(fn: Callable[[], object], seconds: float = 10) -> object:
    """``fn()`` on a thread; fails instead of hanging the suite if it blocks."""
    out: list[object] = []
    worker = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{fn} blocked"
    return out[0]


def test_a_fifo_or_a_link_at_a_link_file_never_hangs_and_is_ignored(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    link = KernelLink(tmp_path / "rt", "abc")
    link.pause()
    link.resume()
    private = tmp_path / "rt"
    os.mkfifo(private / "agent-abc.json")
    os.mkfifo(private / "pause-abc.json")
    with caplog.at_level(logging.WARNING, logger="biopb_mcp.kernel.link"):
        assert run_bounded(link.presence) is None
        assert run_bounded(link.paused) is None
        assert run_bounded(link.leave) is None
    assert "not a regular file" in caplog.text
    (private / "pause-abc.json").unlink()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"since": 1.0, "reason": "planted"}')
    (private / "pause-abc.json").symlink_to(elsewhere)
    assert link.paused() is None
    assert "symbolic link" in caplog.text


def test_a_crafted_session_notebook_path_is_refused_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.ipynb"
    os.mkfifo(fifo)
    crafted = AgentPresence(
        server_pid=os.getpid(),
        transport="stdio",
        owns_kernel=False,
        connection_file="/k.json",
        session_notebook=str(fifo),
    )
    answer = run_bounded(lambda: agent_cells_of(crafted, 3))
    assert isinstance(answer, tuple)
    cells, why = answer
    assert cells == [] and why is not None and "not a regular file" in why


@pytest.mark.anyio
async def test_execute_code_runs_past_crafted_link_files_in_a_real_server(tmp_path: Path) -> None:
    from mcp import Client

    from _tests.support.isolation import make_settings
    from _tests.support.results import text_of
    from biopb_mcp.server import build_server

    mcp, state = build_server(make_settings(tmp_path))
    try:
        with anyio.fail_after(120):
            async with Client(mcp, mode="legacy") as client:
                await client.call_tool("start_kernel", {})
                link = state.kernel.link
                assert link is not None
                private = private_runtime_dir(link.runtime_dir)
                assert private is not None
                agent, pause = private / f"agent-{link.kernel_id}.json", private / f"pause-{link.kernel_id}.json"
                agent.unlink()
                os.mkfifo(agent)
                os.mkfifo(pause)
                ran = await client.call_tool("execute_code", {"code": "print('past the fifo')"})
                assert not ran.is_error and "past the fifo" in text_of(ran)
                pause.unlink()
                pause.write_text('{"since": 1e300, "reason": ["not", "text"]}')
                paused = await client.call_tool("execute_code", {"code": "print('not run')"})
                assert paused.is_error and "Paused by the scientist" in text_of(paused)
                assert "Traceback" not in text_of(paused)
                pause.unlink()
                agent.unlink()
                agent.write_text('{"server_pid": "me", "transport": 1}')
                ran = await client.call_tool("execute_code", {"code": "print('and on')"})
                assert "and on" in text_of(ran)
    finally:
        state.kernel.shutdown()
        for cleanup in state.at_exit:  # what the server runs on its way out
            cleanup()
