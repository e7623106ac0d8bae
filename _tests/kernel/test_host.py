"""KernelHost against one real kernel: executions, jobs, paging, images, inspect, permissions."""

from __future__ import annotations

import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import biopb_mcp
from _tests.support.isolation import make_settings
from _tests.support.kernel_helpers import png_bytes
from _tests.support.runner import finish
from biopb_mcp.errors import JobNotFound, KernelBusy, KernelError
from biopb_mcp.kernel import KernelHost
from biopb_mcp.text.kernel import connect_command, inspection_text, interrupted, rendered_text, summary

pytestmark = pytest.mark.slow


def describe(host: KernelHost, path: str) -> str:
    """inspect_object's answer: the kernel's facts about ``path``, in the words the agent reads."""
    return inspection_text(host.probes.inspect(path))


run = finish


def test_namespace_is_kept_and_print_and_result_both_come_back(host: KernelHost) -> None:
    run(host, "answer = 41")
    ex, r = run(host, "print('hello from the kernel')\nanswer + 1")
    assert ex.status == "ok" and r.done
    assert rendered_text(r) == "hello from the kernel\n42"
    assert r.job_id == ex.job_id and ex.job_id.startswith("job-")


def test_silent_statement_says_no_output(host: KernelHost) -> None:
    _, r = run(host, "unused = 1")
    assert rendered_text(r) == "(no output)"


def test_exception_comes_back_as_error_without_ansi(host: KernelHost) -> None:
    ex, r = run(host, "def f():\n    raise ValueError('bad threshold 7')\nf()")
    assert ex.status == "error"
    assert ex.error is not None and ex.error[:2] == ("ValueError", "bad threshold 7")
    assert "ValueError: bad threshold 7" in rendered_text(r)
    assert "\x1b[" not in rendered_text(r) and all("\x1b" not in line for line in ex.error[2])


def test_stderr_is_marked(host: KernelHost) -> None:
    _, r = run(host, "import sys; print('out'); print('warn', file=sys.stderr)")
    assert rendered_text(r) == "out\n[stderr]\nwarn"


def test_png_display_comes_back_as_image_bytes(host: KernelHost) -> None:
    data = png_bytes(5, 4)
    ex, r = run(host, f"from IPython.display import Image, display\ndisplay(Image(data={data!r}))\n'after'")
    assert ex.status == "ok"
    assert r.images == [data]
    assert "[image 1: 5x4 PNG" in rendered_text(r) and "'after'" in rendered_text(r)


def test_kept_images_count_against_the_kept_output_bound(host: KernelHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finished executions keep their images for poll_job; past the bound the oldest go, as for text."""
    from biopb_mcp.kernel import jobs as jobs_module

    data = png_bytes(5, 4)
    show = f"from IPython.display import Image, display\ndisplay(Image(data={data!r}))"
    first, _ = run(host, show)
    second, _ = run(host, show)
    monkeypatch.setattr(jobs_module, "MAX_KEPT_IMAGE_BYTES", len(data))  # room for one
    run(host, "'no image'")
    with pytest.raises(JobNotFound):
        host.jobs.poll(first.job_id)
    assert host.jobs.poll(second.job_id).images == [data]


def test_two_servers_sharing_a_state_dir_never_overwrite_each_others_saved_images(
    host: KernelHost, module_root: Path
) -> None:
    """Both servers' first image-bearing call is job-N: the saved full-size files must not collide."""
    other = KernelHost(make_settings(module_root, kernel="max_image_bytes = 10\n"))
    mine = KernelHost(make_settings(module_root, kernel="max_image_bytes = 10\n"))
    try:
        saved = []
        for h, (w, hgt) in ((other, (40, 30)), (mine, (30, 40))):
            h.start()
            data = png_bytes(w, hgt)
            _, r = run(h, f"from IPython.display import Image, display\ndisplay(Image(data={data!r}))")
            path = Path(rendered_text(r).split("full size saved to ")[1].split("]")[0])
            saved.append((path, data))
        assert saved[0][0] != saved[1][0]
        assert all(path.read_bytes() == data for path, data in saved)
    finally:
        other.shutdown()
        mine.shutdown()


def test_input_fails_clearly_instead_of_hanging(host: KernelHost) -> None:
    ex, r = run(host, "name = input('Your name? ')")
    assert ex.status == "error" and ex.error is not None
    assert ex.error[0] == "StdinNotImplementedError"
    assert "input() is not available" in rendered_text(r)


def test_long_job_promotes_answers_busy_and_interrupts(host: KernelHost) -> None:
    ex = host.jobs.submit("import time\nprint('started', flush=True)\ntime.sleep(30)")
    assert not host.jobs.wait(ex, 1.0)
    job_id = host.jobs.promote(ex)
    assert job_id == ex.job_id
    polled = host.jobs.poll(job_id)
    assert polled.status == "running" and not polled.done
    assert rendered_text(polled).startswith(f"{job_id}: running for")
    with pytest.raises(KernelBusy) as busy:
        host.jobs.submit("1+1")
    assert busy.value.job_id == job_id
    with pytest.raises(KernelBusy) as busy_inspect:
        describe(host, "time")
    assert busy_inspect.value.job_id == job_id
    assert (host.status().current_job or {})["job_id"] == job_id
    deadline = time.monotonic() + 60  # interrupt once the code runs: earlier, none of it would have run
    while "started" not in rendered_text(host.jobs.poll(job_id)) and time.monotonic() < deadline:
        time.sleep(0.05)
    said = interrupted(host.interrupt())
    assert f"Interrupted {job_id}" in said
    final = host.jobs.poll(job_id)
    assert final.status == "interrupted"
    assert "started" in rendered_text(final) and "KeyboardInterrupt" in rendered_text(final)
    _, after = run(host, "'still alive'")
    assert rendered_text(after) == "'still alive'"


def test_run_returns_a_finished_page_or_promotes_after_its_ticks(host: KernelHost) -> None:
    """The wait/promote loop is the host's: a quick cell comes back finished, a slow one is
    promoted once promote_after passed (ticked each second and at the end), and a caller that
    gives up at a tick leaves its code running as a job at once."""
    host.start()
    quick = host.run("6 * 7", promote_after=30.0)
    assert not quick.promoted and quick.page.done and rendered_text(quick.page) == "42"
    ticks: list[float] = []

    def keep_waiting(waited: float) -> bool:
        ticks.append(waited)
        return True

    slow = host.run("import time\ntime.sleep(30)", promote_after=2.5, on_tick=keep_waiting)
    assert slow.promoted and slow.page.status == "running" and slow.page.header
    assert ticks == [1.0, 2.0, 2.5]
    current = host.status().current_job
    assert current is not None and current["job_id"] == slow.page.job_id and current["promoted"]
    assert interrupted(host.interrupt()).startswith(f"Interrupted {slow.page.job_id}")
    given_up: list[float] = []

    def give_up(waited: float) -> bool:
        given_up.append(waited)
        return False

    left = host.run("import time\ntime.sleep(30)", promote_after=60.0, on_tick=give_up)
    assert left.promoted and left.page.status == "running" and given_up == [1.0]  # no second tick
    host.interrupt()

    def fail(waited: float) -> bool:
        raise RuntimeError("the caller's progress note failed")

    with pytest.raises(RuntimeError):
        host.run("import time\ntime.sleep(30)", promote_after=60.0, on_tick=fail)
    current = host.status().current_job
    assert current is not None and current["promoted"]  # still running, and findable as a job
    host.interrupt()


def test_interrupt_sent_before_the_kernel_picks_up_the_code_still_stops_it(host: KernelHost) -> None:
    """A kernel slow to start the request (a loaded machine) must not lose the interrupt.

    ipykernel ignores SIGINT until it begins handling an execute_request, so a signal sent while
    the request is still queued is dropped and the code runs on. Stopping the kernel process
    reproduces "slow to pick up" without depending on machine load.
    """
    pid = int(host.status().pid or 0)
    os.kill(pid, signal.SIGSTOP)
    try:
        ex = host.jobs.submit("import time\nwhile True:\n    time.sleep(0.05)")
        said: list[str] = []
        caller = threading.Thread(target=lambda: said.append(interrupted(host.interrupt())))
        caller.start()
        # the interrupt call is under way while the kernel is still stalled, however slowly the
        # thread got there
        deadline = time.monotonic() + 60
        while not _running_in(caller, KernelHost.interrupt):
            assert caller.is_alive() and time.monotonic() < deadline, "interrupt() never got under way"
            time.sleep(0.01)
    finally:
        os.kill(pid, signal.SIGCONT)
    caller.join(30)
    assert said and f"Interrupted {ex.job_id}" in said[0], said
    assert ex.status == "interrupted"
    _, after = run(host, "'still alive'")
    # IPython may add a history-database notice when the interrupt hit its own bookkeeping
    assert rendered_text(after).splitlines()[0] == "'still alive'"


def _running_in(thread: threading.Thread, function: Callable[..., object]) -> bool:
    """Whether ``thread`` is inside a call of ``function`` now (any frame of its stack)."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        if frame.f_code is function.__code__:
            return True
        frame = frame.f_back
    return False


def test_interrupt_with_nothing_running_says_so(host: KernelHost) -> None:
    assert interrupted(host.interrupt()) == "No code is running; nothing to interrupt."


def test_flood_is_bounded_and_pages_back_to_the_full_output(host: KernelHost) -> None:
    lines = 100_000  # 100 chars each: 10 MB
    ex, r = run(host, f"for i in range({lines}):\n    print(f'{{i:09d}}' + 'x' * 90)", timeout=120)
    max_chars = host._settings.kernel.max_output_chars
    assert ex.status == "ok"
    assert len(rendered_text(r)) < max_chars + 500
    assert f'poll_job("{ex.job_id}", offset={max_chars // 2}) pages them' in rendered_text(r)
    assert rendered_text(r).endswith(f"{lines - 1:09d}" + "x" * 90)  # the tail: the very end
    pieces, offset = [], 0
    while True:
        page = host.jobs.poll(ex.job_id, offset)
        header, _, body = rendered_text(page).partition("\n")
        assert header.startswith(f"{ex.job_id}: finished")
        if offset:
            shown, _, body = body.partition("\n")
            assert shown.startswith(f"[showing chars {offset}-")
        end = page.next_offset if page.next_offset is not None else page.total_chars
        pieces.append(body[: end - offset])
        if page.next_offset is None:
            break
        offset = page.next_offset
    full = "".join(pieces)
    assert full == full and len(full) == lines * 100 - 1  # cheap check first: a 10 MB diff is slow
    assert full == "".join(f"{i:09d}" + "x" * 90 + "\n" for i in range(lines)).rstrip("\n")


def test_inspect_reports_type_shape_dtype_signature(host: KernelHost) -> None:
    run(host, "import numpy as np\nimg = np.zeros((3, 4), dtype='uint16')\ndef seg(im, sigma=2.0):\n    'Segment.'\n")
    names = "sorted(k for k in globals() if not k.startswith('_'))"
    before = rendered_text(run(host, names)[1])
    text = describe(host, "img")
    assert "img: numpy.ndarray" in text and "shape: (3, 4)" in text and "dtype: uint16" in text
    fn = describe(host, "seg")
    assert "signature: seg(im, sigma=2.0)" in fn and "Segment." in fn
    assert "np: module" in describe(host, "np") and "file: " in describe(host, "np")
    assert rendered_text(run(host, names)[1]) == before  # inspection adds nothing to the namespace


def test_inspect_gives_shape_and_dtype_for_arrays_only_not_for_modules_or_classes(host: KernelHost) -> None:
    """numpy (the module) and ndarray (the class) both have `shape`/`dtype` attributes: functions and
    descriptors, not an array's shape. Reporting them as shape/dtype misleads the agent."""
    run(host, "import numpy as np")
    for path in ("np", "np.ndarray"):
        text = describe(host, path)
        assert "shape:" not in text and "dtype:" not in text, text
    run(host, "arr = np.ones(2)")
    assert "shape: (2,)" in describe(host, "arr")


def test_inspect_unknown_or_malformed_name_is_a_clear_error(host: KernelHost) -> None:
    with pytest.raises(KernelError, match="'nope' is not defined"):
        describe(host, "nope")
    with pytest.raises(KernelError, match="dotted Python name"):
        describe(host, "os.system('x')")


def test_unknown_job_id_names_recent_ones(host: KernelHost) -> None:
    run(host, "1")
    with pytest.raises(JobNotFound, match="Recent ids"):
        host.jobs.poll("job-999999")


def test_status_and_private_file_modes(host: KernelHost) -> None:
    st = host.status()
    assert st.state == "ready" and st.pid and st.transport == "ipc"
    assert st.parent_death_watch is True
    conn = Path(str(st.connection_file))
    assert stat.S_IMODE(conn.stat().st_mode) == 0o600
    assert stat.S_IMODE(conn.parent.stat().st_mode) & 0o777 == 0o700
    sock_dir = Path(st.socket_dir) if st.socket_dir else conn.parent
    sockets = [p for p in sock_dir.iterdir() if stat.S_ISSOCK(p.lstat().st_mode)]
    assert len(sockets) == 5
    assert {stat.S_IMODE(p.lstat().st_mode) for p in sockets} == {0o600}
    assert stat.S_IMODE(sock_dir.stat().st_mode) & 0o777 == 0o700
    # the scientist's files get the server's normal umask back, not the sockets' 0o077
    _, r = run(host, "import os; m = os.umask(0); os.umask(m); oct(m)")
    mask = os.umask(0o022)
    os.umask(mask)
    assert rendered_text(r) == repr(oct(mask))


def test_the_console_command_says_how_to_install_the_console_extra_when_it_is_missing(
    host: KernelHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    host.start()
    assert connect_command(host.status()) == f"biopb-mcp console --pid {os.getpid()}"
    monkeypatch.setitem(sys.modules, "jupyter_console", None)  # how Python marks a module unimportable
    # the checkout this copy runs from: the bare name on PyPI is another project's
    checkout = Path(biopb_mcp.__file__).resolve().parents[1]
    expected = f"pip install '{checkout}[console]' && biopb-mcp console --pid {os.getpid()}"
    assert connect_command(host.status()) == expected
    assert f"share it: {expected}" in summary(host.status())
