"""Process hygiene of the real server: a clean wire under load, and no orphan kernel on any exit."""

from __future__ import annotations

import json
import shutil
import signal
import stat
import tempfile
from pathlib import Path

import psutil

from _tests.support.stdio_procs import RawServer, make_env, result_text

NOISY_PLUGIN = "import os\nprint('plugin print at load')\nos.write(1, b'plugin fd write at load\\n')\n"


def _kernel_pid(server: RawServer) -> int:
    status = json.loads(result_text(server.call("server_status")))
    pid = status["kernel"]["pid"]
    assert isinstance(pid, int) and psutil.pid_exists(pid)
    return pid


def _server_with_kernel(tmp_path: Path) -> tuple[RawServer, int]:
    server = RawServer(make_env(tmp_path, plugins={"noisy.py": NOISY_PLUGIN}), tmp_path / "stderr.log")
    server.initialize()
    started = server.call("start_kernel", timeout=90)
    assert not started.get("isError"), started
    return server, _kernel_pid(server)


GONE_BOUND = 30.0
"""Seconds a kernel may take to go once its server went: ample on a loaded machine, and nothing
but the server's shutdown or the kernel's lifeline ends one (it has no parent poller)."""


def _gone_within(pid: int, seconds: float) -> bool:
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return True
    try:
        proc.wait(timeout=seconds)
    except psutil.TimeoutExpired:
        return proc.status() == psutil.STATUS_ZOMBIE
    return True


def test_sigkill_of_the_server_takes_the_kernel_down(tmp_path: Path) -> None:
    server, kernel_pid = _server_with_kernel(tmp_path)
    try:
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(10)
        assert _gone_within(kernel_pid, GONE_BOUND)
    finally:
        server.close()
        if psutil.pid_exists(kernel_pid):
            psutil.Process(kernel_pid).kill()


def test_sigterm_shuts_the_kernel_down_and_exits(tmp_path: Path) -> None:
    server, kernel_pid = _server_with_kernel(tmp_path)
    try:
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(30) == 0
        assert _gone_within(kernel_pid, GONE_BOUND)
    finally:
        server.close()


def test_a_thousand_rapid_calls_keep_the_wire_clean_then_stdin_eof_exits(tmp_path: Path) -> None:
    """Pipelined calls with kernel output interleaved: every stdout line is one JSON-RPC message."""
    server, kernel_pid = _server_with_kernel(tmp_path)
    try:
        calls = [
            ("server_status", {}),
            ("read_doc", {"id": "index"}),
            ("execute_code", {"code": "import sys\nprint('o' * 200)\nsys.stderr.write('e' * 50)\n7 * 6"}),
            ("read_doc", {"id": "no-such-doc"}),
        ]
        ids: dict[int, str] = {}
        answers: dict[int, dict] = {}
        for batch in range(10):  # 100 in flight at a time: no pipe can fill up and deadlock the test
            for n in range(100):
                name, args = calls[(batch * 100 + n) % len(calls)]
                ids[server.request("tools/call", {"name": name, "arguments": args})] = name
            while len(answers) < len(ids):
                message = server.read_message(timeout=120)
                if "id" in message:
                    answers[message["id"]] = message
        assert set(answers) == set(ids)
        executed = 0
        for rid, name in ids.items():
            result = answers[rid]["result"]
            text = result_text(result)
            if name == "execute_code":
                assert ("o" * 200 in text and "42" in text) or "busy" in text.lower(), text
                executed += "42" in text
            elif name == "read_doc" and not result.get("isError"):
                assert text.strip()
        assert executed >= 1
        final = server.call("execute_code", {"code": "print('still fine')"})
        assert "still fine" in result_text(final)
        assert server.proc.stdin is not None
        server.proc.stdin.close()  # EOF: the server shuts the kernel down and leaves
        assert server.proc.wait(30) == 0
        assert _gone_within(kernel_pid, GONE_BOUND)
        assert not any(b"at load" in line for line in server.raw_lines)
    finally:
        server.close()


def test_a_sigkilled_servers_runtime_files_are_swept_by_the_next_start_and_a_live_ones_kept(
    tmp_path: Path,
) -> None:
    """In a shared 1777 runtime dir, which keeps its mode: the files go into a private subdir."""
    shared = Path(tempfile.mkdtemp(prefix="rt-"))  # short: IPC socket paths must fit AF_UNIX
    shared.chmod(0o1777)
    config = f'[server]\nruntime_dir = "{shared}"\n'
    servers: list[RawServer] = []

    def started(name: str) -> tuple[RawServer, set[Path]]:
        server = RawServer(make_env(tmp_path / name, config=config), tmp_path / f"{name}.log")
        servers.append(server)
        server.initialize()
        assert not server.call("start_kernel", timeout=90).get("isError")
        conn = Path(json.loads(result_text(server.call("server_status")))["kernel"]["connection_file"])
        stem = conn.name.removesuffix(".json")
        return server, {conn, *conn.parent.glob(f"{stem}-*")}

    try:
        _live, live_files = started("live")
        victim, victim_files = started("victim")
        assert len(victim_files) > 1 and all(f.parent.parent == shared for f in victim_files)
        kernel_pid = _kernel_pid(victim)
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(10)
        assert _gone_within(kernel_pid, GONE_BOUND)
        assert all(f.exists() for f in victim_files)  # nobody was left to remove them

        after = RawServer(make_env(tmp_path / "after", config=config), tmp_path / "after.log")
        servers.append(after)
        after.initialize()

        assert not any(f.exists() for f in victim_files)
        assert all(f.exists() for f in live_files)
        assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    finally:
        for server in servers:
            server.close()
        shutil.rmtree(shared, ignore_errors=True)
