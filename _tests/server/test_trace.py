"""The tool-call trace: what it keeps, what it never keeps, and that threads never tear a line."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from biopb_mcp.server.trace import Tracer, summarize_arguments


def test_summary_keeps_ids_and_lengths_never_the_code() -> None:
    secret = "token = 'hunter2'\nprint(token)"
    summary = summarize_arguments({"code": secret, "id": "segment/nuclei", "body": "x" * 10, "old": None})
    assert summary == {"code_chars": len(secret), "id": "segment/nuclei", "body_chars": 10}
    assert "hunter2" not in json.dumps(summary)


def test_summary_clips_long_scalars_and_names_odd_types() -> None:
    summary = summarize_arguments({"query": "q" * 1000, "max_results": 5, "extra": [1, 2]})
    assert len(summary["query"]) == 200
    assert summary["max_results"] == 5
    assert summary["extra"] == "list"


def test_concurrent_records_each_land_as_one_json_line(tmp_path: Path) -> None:
    tracer = Tracer(tmp_path / "sub" / "trace.jsonl")

    def hammer(n: int) -> None:
        for i in range(100):
            tracer.record("read_doc", {"id": f"t{n}-{i}" + "x" * 150}, duration_ms=1.5, ok=i % 2 == 0, error=None)

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = (tmp_path / "sub" / "trace.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 800
    assert {r["tool"] for r in records} == {"read_doc"}
    assert {tuple(sorted(r)) for r in records} == {("args", "duration_ms", "ok", "time", "tool")}
    assert len({r["args"]["id"] for r in records}) == 800


def test_error_text_is_recorded_and_unwritable_trace_is_not_fatal(tmp_path: Path) -> None:
    tracer = Tracer(tmp_path / "t.jsonl")
    tracer.record("write_doc", {"id": "x"}, duration_ms=2.0, ok=False, error="refused")
    (record,) = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert record["ok"] is False and record["error"] == "refused"
    blocker = tmp_path / "file"
    blocker.write_text("")
    Tracer(blocker / "t.jsonl").record("x", None, duration_ms=0, ok=True)  # parent is a file: logged only
