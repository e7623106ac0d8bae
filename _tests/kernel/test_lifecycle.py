"""Kernel lifecycle with real processes: restart, death, recovery, bad specs, plugins, orphans."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from _tests.support.isolation import make_settings
from _tests.support.kernel_helpers import stop_process
from _tests.support.processes import gone, wait_gone
from biopb_mcp.errors import KernelNotReady, KernelProblem, StartFailed, UnsafeRuntimeDir
from biopb_mcp.kernel import Ending, KernelHost
from biopb_mcp.kernel.probes import Probes
from biopb_mcp.text.kernel import error_text, rendered_text, started, status_json

pytestmark = pytest.mark.slow


def test_start_is_idempotent_and_restart_loses_the_namespace(host: KernelHost) -> None:
    host.start()
    pid = int(host.status().pid or 0)
    assert "already running" in started(host.start()) and host.status().pid == pid
    ex = host.jobs.submit("kept = 'value'")
    assert host.jobs.wait(ex, 30)
    said = started(host.restart())
    assert "namespace was lost" in said
    new_pid = host.status().pid
    assert new_pid != pid and wait_gone(pid, 5)
    ex = host.jobs.submit("kept")
    assert host.jobs.wait(ex, 30)
    assert ex.status == "error" and ex.error is not None and ex.error[0] == "NameError"


def test_the_kernel_log_is_private(host: KernelHost) -> None:
    host.start()
    log = Path(host.status().kernel_log)
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_os_exit_gives_dead_with_log_lines_and_start_recovers(host: KernelHost) -> None:
    host.start()
    ex = host.jobs.submit("import sys\nprint('last words', file=sys.__stderr__, flush=True)\nimport os; os._exit(1)")
    assert host.jobs.wait(ex, 30)
    assert ex.status == "dead"
    assert host.state == "dead"
    assert "The kernel died (exit code 1)" in rendered_text(host.jobs.render(ex))
    with pytest.raises(KernelNotReady) as not_ready:
        host.jobs.submit("1+1")
    assert not_ready.value.state == "dead"
    assert "start_kernel" in error_text(not_ready.value) and "last words" in error_text(not_ready.value)
    assert (host.status().cause, host.status().log_tail) == (not_ready.value.cause, not_ready.value.log_tail)
    assert not_ready.value.cause == "exit code 1" and "last words" in not_ready.value.log_tail
    assert status_json(host.status())["message"].startswith("The kernel died (exit code 1). Last kernel log lines:\n")
    host.start()
    assert host.state == "ready"
    ex = host.jobs.submit("40 + 2")
    assert host.jobs.wait(ex, 30) and rendered_text(host.jobs.render(ex)) == "42"


def test_kernel_killed_externally_mid_job_is_reported_dead(host: KernelHost) -> None:
    host.start()
    ex = host.jobs.submit("import time; time.sleep(30)")
    assert not host.jobs.wait(ex, 0.3)
    os.kill(int(host.status().pid or 0), signal.SIGKILL)
    assert host.jobs.wait(ex, 60)  # the IO thread notices the death within a poll; a loaded machine takes longer
    assert ex.status == "dead" and host.state == "dead"
    polled = host.jobs.poll(ex.job_id)
    assert "killed by signal SIGKILL" in rendered_text(polled) and "start_kernel" in rendered_text(polled)
    # the host's facts: the note and the advice are the server's words (test_rendering)
    assert polled.kernel_lost == "dead" and polled.note == "" and polled.ending is not None
    assert (polled.ending.why, polled.ending.cause) == (Ending.KERNEL_LOST, "killed by signal SIGKILL")
    # launch banners are not why it died; IPython's "Ctrl-C will not work" contradicts interrupt_kernel
    assert (
        "Ctrl-C" not in rendered_text(polled)
        and "--existing" not in rendered_text(polled)
        and "kernel launch" not in rendered_text(polled)
    )
    host.start()
    assert host.state == "ready"


def test_unknown_kernel_name_is_an_error_state_with_a_clear_message(tmp_path: Path) -> None:
    h = KernelHost(make_settings(tmp_path, kernel='name = "no-such-kernel-xyz"\n'))
    with pytest.raises(KernelNotReady) as err:
        h.start()
    assert err.value.state == "error" and h.state == "error"
    message = error_text(err.value)
    assert "no Jupyter kernel spec named 'no-such-kernel-xyz'" in message
    assert "kernel.name" in message and "start_kernel" in message
    with pytest.raises(KernelNotReady, match="could not start"):
        h.jobs.submit("1")
    h.shutdown()


def test_a_kernel_dying_under_inspect_object_answers_dead_not_a_timeout(tmp_path: Path) -> None:
    """The IO thread must record the death before it wakes the waiting call (three tries: it is a race)."""
    h = KernelHost(make_settings(tmp_path))
    try:
        for _ in range(3):
            h.start()
            ex = h.jobs.submit("class K:\n    def __repr__(self):\n        import os; os._exit(1)\nk = K()")
            assert h.jobs.wait(ex, 30)
            with pytest.raises(KernelNotReady) as err:
                h.probes.inspect("k")
            assert err.value.state == "dead" and "start_kernel" in error_text(err.value)
    finally:
        h.shutdown()


def test_an_unusable_runtime_dir_names_the_key_that_moves_it(tmp_path: Path) -> None:
    """Retrying start_kernel cannot help here: the message must say which setting to change."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    h = KernelHost(make_settings(tmp_path, runtime_dir=blocker / "rt"))
    with pytest.raises(KernelNotReady) as err:
        h.start()
    assert err.value.state == "error"
    said = error_text(err.value)  # the agent's words for the failure: the key that moves the dir
    assert "Set server.runtime_dir in" in said and str(blocker / "rt") in said
    h.shutdown()


def test_a_runtime_dir_whose_subdirectory_is_not_private_is_a_failed_start_with_its_facts(tmp_path: Path) -> None:
    """The start keeps the refusal's facts; the way past it is text's, for the agent and server_status."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    sub = shared / f"biopb-mcp-{os.getuid()}"
    sub.mkdir()
    sub.chmod(0o755)
    h = KernelHost(make_settings(tmp_path, runtime_dir=shared))
    with pytest.raises(KernelNotReady) as err:
        h.start()
    statement = (
        f"{sub} exists but is not a private directory of this user (a link, another owner, or open to group/others)"
    )
    assert err.value.kind is KernelProblem.RUNTIME_DIR_UNSAFE and err.value.details["runtime_dir"] == str(shared)
    refused = err.value.details["refused"]
    assert isinstance(refused, UnsafeRuntimeDir) and str(refused) == statement and refused.path == str(sub)
    assert err.value.cause == f"cannot use the runtime dir {shared} ({statement})."  # the facts, no advice
    said = f"cannot use the runtime dir {shared} ({statement}; remove it, or point server.runtime_dir at a private directory)."
    assert error_text(err.value) == (
        f"Kernel not ready (state: error). The kernel could not start: {said} Set server.runtime_dir in "
        f"{err.value.config_file} to a writable directory. Call start_kernel to try again."
    )
    assert status_json(h.status())["message"] == said
    h.shutdown()


def test_a_start_question_left_unanswered_states_its_seconds() -> None:
    """The hint that a joined kernel may be running its notebook's cell is text's (test_failures)."""

    class Silent:
        def call(self, *args: object, **kwargs: object) -> None:
            return None

    class Conn:
        channels = Silent()

    with pytest.raises(StartFailed) as err:
        Probes(Conn(), None).evaluate("1", 4.2)  # type: ignore[arg-type]
    assert str(err.value) == "the kernel did not answer within 4 s."
    assert err.value.kind is KernelProblem.NO_ANSWER_AT_START and err.value.details == {"seconds": 4.2}


def _kernelspec(root: Path, name: str, argv: list[str]) -> None:
    spec_dir = root / "jupyter" / "kernels" / name
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": name, "language": "other"}))


def test_kernel_that_never_gets_ready_or_exits_at_once_ends_in_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _kernelspec(tmp_path, "hangs", [sys.executable, "-c", "import time; time.sleep(60)", "{connection_file}"])
    _kernelspec(tmp_path, "crashes", [sys.executable, "-c", "import sys; print('boom at start'); sys.exit(3)"])
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    h = KernelHost(make_settings(tmp_path / "a", kernel='name = "hangs"\nstartup_timeout = 1.5\n'))
    with pytest.raises(KernelNotReady, match=r"did not become ready within 1.5 s") as err:
        h.start()
    assert "Set kernel.startup_timeout in" in error_text(err.value)
    assert h.state == "error" and h.status().pid is None
    h2 = KernelHost(make_settings(tmp_path / "b", kernel='name = "crashes"\n'))
    with pytest.raises(KernelNotReady) as err:
        h2.start()
    assert err.value.cause == "the kernel process exited during start-up (exit code 3)."
    assert "boom at start" in err.value.log_tail
    said = error_text(err.value)  # the facts, as the agent reads them
    assert "exited during start-up (exit code 3).\nLast kernel log lines:\n" in said and "boom at start" in said


def test_plugins_load_print_to_the_log_and_a_broken_one_is_skipped(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # A runtime dir far too long for AF_UNIX socket paths: the sockets must go elsewhere.
    long_runtime = tmp_path / ("r" * 60) / ("u" * 60)
    settings = make_settings(tmp_path, runtime_dir=long_runtime)
    plugins = Path(settings.plugins_dir)
    plugins.mkdir(parents=True)
    (plugins / "hello.py").write_text("print('PLUGIN-SAYS-HI')\nGREETING = 'hi'\n")
    (plugins / "broken.py").write_text("raise RuntimeError('plugin is broken')\n")
    (plugins / "_private.py").write_text("SKIPPED = True\n")
    h = KernelHost(settings)
    try:
        said = started(h.start())
        assert "broken.py (RuntimeError: plugin is broken)" in said
        st = h.status()
        assert [Path(p).name for p in st.plugins_loaded] == ["hello.py"]
        assert [Path(f["plugin"]).name for f in st.plugins_failed] == ["broken.py"]
        assert st.socket_dir is not None and not st.socket_dir.startswith(str(tmp_path))
        assert Path(str(st.connection_file)).parent == long_runtime
        ex = h.jobs.submit("GREETING, 'SKIPPED' in globals()")
        assert h.jobs.wait(ex, 30)
        assert rendered_text(h.jobs.render(ex)) == "('hi', False)"
        socket_dir = Path(st.socket_dir)
    finally:
        h.shutdown()
    assert not socket_dir.exists()
    assert "PLUGIN-SAYS-HI" in Path(settings.kernel_log_file).read_text()
    out, err = capfd.readouterr()
    assert "PLUGIN-SAYS-HI" not in out and "PLUGIN-SAYS-HI" not in err


_TINY_SERVER = """
import sys
from biopb_mcp.config.settings import load_settings
from biopb_mcp.kernel import KernelHost
from biopb_mcp.text.kernel import rendered_text
host = KernelHost(load_settings(sys.argv[1]))
host.start()
ex = host.jobs.submit("import subprocess, sys; child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); child.pid")
host.jobs.wait(ex, 30)
print(host.status().pid, rendered_text(host.jobs.render(ex)), flush=True)
sys.stdin.read()
"""


def test_kernel_and_its_children_exit_when_the_server_is_sigkilled(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-c", _TINY_SERVER, str(settings.config_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    kernel_pid = child_pid = None
    try:
        assert proc.stdout is not None
        kernel_pid, child_pid = (int(x) for x in proc.stdout.readline().split())
        assert not gone(kernel_pid) and not gone(child_pid)
        proc.kill()
        proc.wait()
        # Neither ends by itself (the child sleeps 600 s, the kernel has no parent poller): only the
        # lifeline can end them within the bound, which is generous for a loaded machine.
        assert wait_gone(kernel_pid, 30.0), "kernel outlived its SIGKILLed server"
        assert wait_gone(child_pid, 30.0), "kernel's child outlived the server"
    finally:
        stop_process(proc, kernel_pid, child_pid)
