"""The files a server and the %biopb magics share: one writer each, atomic, private, keyed by the kernel."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from biopb_mcp.kernel_link import AgentPresence, KernelLink, link_id


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def presence(pid: int | None = None) -> AgentPresence:
    return AgentPresence(server_pid=pid or os.getpid(), transport="stdio", owns_kernel=False,
                         connection_file="/k.json", session_notebook="/nb.ipynb")


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


def test_presence_round_trip_and_only_its_writer_withdraws_it(tmp_path: Path) -> None:
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
    link.withdraw()
    got = link.presence()
    assert got is not None and got.last_job is None
    link.announce(presence())
    link.withdraw()
    assert link.presence() is None
