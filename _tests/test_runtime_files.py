"""The runtime dir: never chmod a directory we did not create; sweep only dead servers' files."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from biopb_mcp.errors import UnsafeRuntimeDir
from biopb_mcp.fs.runtime import pid_alive, private_runtime_dir, sweep_stale
from biopb_mcp.server.transports.http import write_token_file


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A world-writable sticky dir, like /tmp."""
    path = tmp_path / "shared"
    path.mkdir()
    path.chmod(0o1777)
    return path


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_missing_runtime_dir_is_created_0700_and_used(tmp_path: Path) -> None:
    target = tmp_path / "a" / "run"
    assert private_runtime_dir(target) == target
    assert mode(target) == 0o700


def test_an_existing_private_dir_is_used_as_it_is(tmp_path: Path) -> None:
    target = tmp_path / "run"
    target.mkdir(mode=0o700)
    assert private_runtime_dir(target) == target
    assert not list(target.iterdir())


def test_a_shared_1777_dir_keeps_its_mode_and_the_files_go_into_a_private_subdir(shared: Path) -> None:
    token_file = write_token_file(shared, "tok")
    assert mode(shared) == 0o1777
    assert token_file.parent == shared / f"biopb-mcp-{os.getuid()}"
    assert mode(token_file.parent) == 0o700 and mode(token_file) == 0o600
    assert private_runtime_dir(shared) == token_file.parent  # reused, not recreated


def test_a_dir_of_ours_open_to_others_is_not_chmodded_either(tmp_path: Path) -> None:
    target = tmp_path / "run"
    target.mkdir()
    target.chmod(0o755)
    assert private_runtime_dir(target) == target / f"biopb-mcp-{os.getuid()}"
    assert mode(target) == 0o755


@pytest.mark.parametrize("planted", ["link", "open"])
def test_a_planted_subdir_is_refused_and_left_alone(shared: Path, tmp_path: Path, planted: str) -> None:
    sub = shared / f"biopb-mcp-{os.getuid()}"
    if planted == "link":
        (tmp_path / "elsewhere").mkdir()
        sub.symlink_to(tmp_path / "elsewhere")
    else:
        sub.mkdir()
        sub.chmod(0o777)
    with pytest.raises(PermissionError) as refused:
        private_runtime_dir(shared)
    assert isinstance(refused.value, UnsafeRuntimeDir)  # its facts; the way past it is text's (test_failures)
    assert (refused.value.path, refused.value.runtime_dir) == (str(sub), str(shared))
    assert str(refused.value) == (
        f"{sub} exists but is not a private directory of this user (a link, another owner, or open to group/others)"
    )
    assert mode(shared) == 0o1777
    assert sub.is_symlink() if planted == "link" else mode(sub) == 0o777


def test_sweep_removes_only_files_of_dead_servers(tmp_path: Path) -> None:
    run = private_runtime_dir(tmp_path / "run")
    assert run is not None
    dead, live = dead_pid(), os.getppid()
    stale = [f"kernel-{dead}-0a1b2c3d.json", f"kernel-{dead}-0a1b2c3d-1", f"http-token-{dead}"]
    kept = [
        f"kernel-{live}-0a1b2c3d.json",
        f"kernel-{live}-0a1b2c3d-3",
        f"http-token-{live}",
        f"http-token-{os.getpid()}",
        "notes.txt",
        f"kernel-{dead}.json",
    ]
    for name in stale + kept:
        (run / name).write_text("x")
    socket_dir = Path(tempfile.mkdtemp(prefix=f"biopb-{dead}-"))
    (socket_dir / "k-1").write_text("x")

    removed = sweep_stale(tmp_path / "run")

    assert sorted(p.name for p in removed if p.parent == run) == sorted(stale)
    assert sorted(p.name for p in run.iterdir()) == sorted(kept)
    assert socket_dir in removed and not socket_dir.exists()


def test_sweep_of_a_runtime_dir_that_does_not_exist_creates_nothing(tmp_path: Path) -> None:
    assert sweep_stale(tmp_path / "nowhere") == []
    assert not (tmp_path / "nowhere").exists()


def test_liveness_is_asked_without_signalling_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """os.kill(pid, 0) is POSIX's question, and Windows' os.kill terminates the process: the
    answer comes from psutil, with no signal sent (an os.kill that would end the test is never called)."""

    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])  # exited, not reaped: still a pid
    deadline = time.monotonic() + 30
    while psutil.Process(zombie.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.01)

    def no_signals(pid: int, sig: int) -> None:
        raise AssertionError(f"os.kill({pid}, {sig}) was called")

    monkeypatch.setattr(os, "kill", no_signals)
    assert pid_alive(os.getpid()) and pid_alive(os.getpid(), mine=True)
    assert not pid_alive(done.pid) and not pid_alive(0) and not pid_alive(-1)
    assert pid_alive(zombie.pid)
    if os.getuid() != 0:  # pid 1 belongs to root: alive, and not this user's
        assert pid_alive(1) and not pid_alive(1, mine=True)
    monkeypatch.undo()
    zombie.wait()
