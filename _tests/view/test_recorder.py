"""The recorder's own rules: output shaping, a job recorded when it ends, a disk that refuses."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from _tests.support.isolation import make_settings
from biopb_mcp.fs.notebook_file import TAIL
from biopb_mcp.kernel import KernelHost
from biopb_mcp.kernel.notebook import OutputCollector, SessionRecorder, agent_cells, read_session


def test_collector_merges_streams_honours_clear_output_and_caps_each_stream_separately() -> None:
    c = OutputCollector(max_chars=100)
    c.add("status", {"execution_state": "busy"})
    c.add("stream", {"name": "stdout", "text": "a\n"})
    c.add("stream", {"name": "stdout", "text": "b\n"})
    c.add("clear_output", {"wait": True})
    c.add("stream", {"name": "stdout", "text": "progress 100%\n"})  # replaces what came before
    c.add("stream", {"name": "stdout", "text": "y" * 500})
    c.add("stream", {"name": "stderr", "text": "warning\n"})
    c.add("stream", {"name": "stdout", "text": "dropped"})
    c.add("display_data", {"data": {"text/plain": "z" * 500, "image/png": "iVBO"}, "metadata": {}})
    out = c.outputs()
    assert [o["output_type"] for o in out] == ["stream", "stream", "display_data"]
    stdout, stderr, display = out
    assert stdout["text"].startswith("progress 100%\nyyy") and "a\n" not in stdout["text"]
    assert "more characters of this output are not recorded" in stdout["text"]
    assert "dropped" not in stdout["text"] and len(stdout["text"]) < 200
    assert stderr == {"output_type": "stream", "name": "stderr", "text": "warning\n"}
    assert display["data"]["image/png"] == "iVBO" and len(display["data"]["text/plain"]) < 200


def test_an_unwritable_record_dir_is_reported_and_nothing_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    rec = SessionRecorder(blocker / "notebooks")
    rec.start_notebook(kernel_name="python3", display_name="Python", about="test")
    rec.markdown("**read_doc** `x`")
    assert rec.flush(10)
    assert rec.error is not None and "cannot write" in rec.error
    rec.close()


def test_a_promoted_job_is_recorded_when_it_ends_and_a_restart_records_the_aborted_one(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    assert settings.record.dir is not None
    rec = SessionRecorder(settings.record.dir)
    host = KernelHost(settings, recorder=rec)
    try:
        host.start()
        first = rec.path
        go = tmp_path / "go"
        job = host.jobs.submit(
            f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)\nprint('job done')"
        )
        host.jobs.promote(job)
        assert rec.flush(10)
        assert first is not None and agent_cells(read_session(first)) == []  # still running: not recorded
        go.touch()
        assert host.jobs.wait(job, 30)
        stuck = host.jobs.submit("import time\ntime.sleep(60)")
        time.sleep(0.2)
        host.restart()  # the running cell ends as aborted, recorded in the first notebook
        assert stuck.status == "aborted"
        assert rec.flush(10)
        cells = agent_cells(read_session(first))
        assert [c.metadata["biopb"]["status"] for c in cells] == ["ok", "aborted"]
        assert cells[0].metadata["biopb"]["promoted"] is True
        assert cells[0].outputs[0]["text"] == "job done\n"
        assert rec.path is not None
        assert rec.path != first and read_session(rec.path).cells[0].cell_type == "markdown"
        assert first.stat().st_mode & 0o777 == 0o600  # code and outputs: private like the logs
    finally:
        host.shutdown()
        rec.close()


def record_cells(rec: SessionRecorder, count: int, start: int = 0, text: str = "out\n") -> None:
    for n in range(start, start + count):
        collector = rec.collector()
        collector.add("stream", {"name": "stdout", "text": text})
        rec.code_cell(f"x{n} = {n}", collector, {"job_id": f"job-{n}", "status": "ok"})
    assert rec.flush(10)


def test_a_link_planted_at_the_notebook_or_its_temp_names_is_never_written_through(tmp_path: Path) -> None:
    """Another user sharing ``record.dir`` (or anything of ours) plants links where the writer
    will write: at the names the notebook may take in the next seconds, and at their temp names."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o600)
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    now = time.time()
    for second in range(-1, 4):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + second))
        for number in range(1, 100):  # notebooks are numbered per process
            name = f"session-{stamp}-{os.getpid()}-{number}.ipynb"
            (notebooks / f".{name}.{os.getpid()}.tmp").symlink_to(victim)
            (notebooks / name).symlink_to(victim)
    rec = SessionRecorder(notebooks)
    path = rec.start_notebook(kernel_name="python3", display_name="Python", about="test")
    record_cells(rec, 2)
    rec.close()
    assert victim.read_text() == "precious\n"
    assert path.is_file() and not path.is_symlink() and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [c.source for c in agent_cells(read_session(path))] == ["x0 = 0", "x1 = 1"]
    assert rec.error is None


def test_the_notebook_is_appended_in_place_never_rewritten(tmp_path: Path) -> None:
    rec = SessionRecorder(tmp_path)
    path = rec.start_notebook(kernel_name="python3", display_name="Python", about="test")
    record_cells(rec, 3)
    before = path.stat()
    head = path.read_bytes()[: -len(TAIL)]
    record_cells(rec, 3, start=3)
    after = path.stat()
    assert after.st_ino == before.st_ino  # the same file, not a replacement
    assert path.read_bytes().startswith(head)  # what was there is untouched: only appended to
    assert [c.source for c in agent_cells(read_session(path))] == [f"x{n} = {n}" for n in range(6)]
    rec.close()


def test_past_the_size_cap_cells_are_noted_without_their_outputs(tmp_path: Path) -> None:
    rec = SessionRecorder(tmp_path, max_session_bytes=40_000)
    path = rec.start_notebook(kernel_name="python3", display_name="Python", about="test")
    record_cells(rec, 8, text="y" * 9_000)
    rec.close()
    nb = read_session(path)
    cells = agent_cells(nb)
    assert [c.source for c in cells] == [f"x{n} = {n}" for n in range(8)]
    kept = [c for c in cells if c.outputs]
    assert 1 <= len(kept) < 8 and all(not c.outputs for c in cells[len(kept) :])
    assert all(c.metadata.biopb.get("outputs_dropped") for c in cells[len(kept) :])
    assert sum("size cap" in c.source for c in nb.cells if c.cell_type == "markdown") == 1
    assert path.stat().st_size < 40_000 + 10_000


def test_an_exception_with_a_huge_message_is_cut_like_a_stream() -> None:
    c = OutputCollector(max_chars=1000)
    huge = "v" * 3_000_000
    c.add(
        "error",
        {
            "ename": "ValueError",
            "evalue": huge,
            "traceback": ["Traceback (most recent call last):", "  File x, line 1", f"ValueError: {huge}"],
        },
    )
    (error,) = c.outputs()
    assert len(error["evalue"]) < 1000 and "not recorded" in error["evalue"]
    assert sum(len(line) for line in error["traceback"]) < 1200
    assert error["traceback"][0].startswith("[biopb-mcp:") and "traceback are not recorded" in error["traceback"][0]
    assert error["traceback"][-1].startswith("ValueError: vvv")  # the last frame, where it was raised


def test_a_notebook_torn_by_a_kill_mid_write_is_mended_by_the_next_recorder(tmp_path: Path) -> None:
    rec = SessionRecorder(tmp_path)
    path = rec.start_notebook(kernel_name="python3", display_name="Python", about="test")
    record_cells(rec, 3)
    rec.close()
    whole = path.read_bytes()
    cell = b'{"cell_type": "code", "id": "torn", "metadata": {}, "source": "x = 1", "outputs": [{"output_'
    path.write_bytes(whole[: -len(TAIL)] + b",\n" + cell)  # what a kill inside the next append leaves
    live = SessionRecorder(tmp_path)  # a notebook being written now is never touched: its writer holds it
    live_path = live.start_notebook(kernel_name="python3", display_name="Python", about="live")
    record_cells(live, 1)
    live_path.write_bytes(live_path.read_bytes()[:-3])
    later = SessionRecorder(tmp_path)
    later.start_notebook(kernel_name="python3", display_name="Python", about="later")
    assert later.flush(10)
    assert path.read_bytes() == whole  # the torn cell dropped, the three before it kept
    assert not live_path.read_bytes().endswith(TAIL)
    record_cells(live, 1, start=1)  # its own next append closes it again
    assert [c.source for c in agent_cells(read_session(live_path))] == ["x0 = 0", "x1 = 1"]
    live.close()
    later.close()
