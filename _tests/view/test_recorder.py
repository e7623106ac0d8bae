"""The recorder's own rules: output shaping, a job recorded when it ends, a disk that refuses."""

from __future__ import annotations

import time
from pathlib import Path

from _tests.support.view_helpers import make_settings
from biopb_mcp.kernel import KernelHost
from biopb_mcp.record import OutputCollector, SessionRecorder, agent_cells, read_session


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
        job = host.submit(f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)\nprint('job done')")
        host.promote(job)
        assert rec.flush(10)
        assert first is not None and agent_cells(read_session(first)) == []  # still running: not recorded
        go.touch()
        assert host.wait(job, 30)
        stuck = host.submit("import time\ntime.sleep(60)")
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
