"""What one server's tools share is owned by that server: settings change through one door, and
the presence notes are written by the server's own writer, which leaves no thread behind."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from _tests.support.isolation import make_settings
from biopb_mcp.errors import KernelNotReady
from biopb_mcp.server import build_server
from biopb_mcp.server.presence import NewestNote


def test_settings_change_only_through_reconfigure_which_tells_the_kernel_host(tmp_path: Path) -> None:
    _, state = build_server(make_settings(tmp_path / "a"))
    renamed = make_settings(tmp_path / "b", kernel='name = "no-such-kernel-xyz"\n')
    with pytest.raises(AttributeError):
        state.settings = renamed  # type: ignore[misc]  # the point: it is read-only
    state.reconfigure(renamed)
    assert state.settings is renamed
    try:
        with pytest.raises(KernelNotReady, match="no-such-kernel-xyz"):  # the host starts with the new name
            state.kernel.start()
    finally:
        state.kernel.shutdown()


def test_each_server_owns_its_presence_writer(tmp_path: Path) -> None:
    _, one = build_server(make_settings(tmp_path / "a"))
    _, two = build_server(make_settings(tmp_path / "b"))
    assert one.presence_notes is not two.presence_notes


def _writer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "biopb-presence"]


def test_the_presence_writer_writes_the_newest_note_and_its_thread_ends_when_idle() -> None:
    before = set(_writer_threads())
    notes = NewestNote(idle_seconds=0.05)
    written: list[int] = []
    done = threading.Event()
    gate, taken = threading.Event(), threading.Event()

    def first() -> None:
        taken.set()
        gate.wait(30)
        written.append(1)

    notes.put(first)
    assert taken.wait(30)  # the writer is busy with the first note
    notes.put(lambda: written.append(2))  # superseded before its turn

    def third() -> None:
        written.append(3)
        done.set()

    notes.put(third)
    gate.set()
    assert done.wait(30)
    assert written == [1, 3]
    deadline = time.monotonic() + 30
    while set(_writer_threads()) != before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert set(_writer_threads()) == before  # idle: the thread ended
    again = threading.Event()
    notes.put(again.set)  # and the next note starts a new one
    assert again.wait(30)
