"""End to end: the scripted agent through a real stdio server and kernel on a few cases, the
do-nothing agent on all twenty, and the CLI's exit codes."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.__main__ import main
from bench.agents import make_agent
from bench.cases import all_cases, get_case
from bench.report import headline, summarize
from bench.run import RunSpec, run_bench, run_one


def test_scripted_agent_passes_through_the_real_server_and_reads_only_listed_docs(tmp_path: Path) -> None:
    # A representative subset, run at once: a covered case in each arm and one no procedure covers.
    spec = RunSpec(make_agent("scripted"), ["docs", "nodocs"], [], tmp_path, timeout=120)
    picks = [("count-nuclei", "docs"), ("crop-roi", "docs"), ("flatfield-blank", "nodocs")]
    with ThreadPoolExecutor(max_workers=3) as pool:
        rows = list(pool.map(lambda pick: run_one(spec, get_case(pick[0]), pick[1], 0), picks))
    for row in rows:
        assert row["passed"], row
        assert row["harness_error"] is None and not row["timed_out"] and row["exit_code"] == 0
        assert row["tool_calls"]["start_kernel"] == 1 and row["tool_calls"]["execute_code"] >= 1
    nuclei, crop, flat = rows
    assert nuclei["docs_read"] == ["segment-nuclei"]  # listed in the docs arm, so read
    assert crop["docs_read"] == []  # no procedure covers it
    assert flat["docs_read"] == [] and not flat["read_doc_called"]  # flatfield is not listed here
    assert (Path(flat["run_dir"]) / "trace.jsonl").is_file()


def test_nothing_agent_fails_every_case_and_the_summary_says_so(tmp_path: Path) -> None:
    cases = all_cases()
    rows = run_bench(RunSpec(make_agent("nothing"), ["docs"], cases, tmp_path, timeout=60), progress=False, jobs=2)
    assert len(rows) == 20
    assert [row["case"] for row in rows if row["passed"]] == []
    assert all(row["exit_code"] == 0 and row["harness_error"] is None for row in rows)
    assert headline(rows) == "docs: 0/20"
    text = summarize(rows, agent="nothing", wall_s=1.0, cases=20, repeat=1)
    assert "| count-nuclei | segment-nuclei | fail |" in text
    assert "| docs | 0/20 (0%) | none |" in text


def test_run_command_writes_summary_and_exits_nonzero_only_on_harness_failure(tmp_path: Path) -> None:
    ok = ["run", "--agent", "nothing", "--arms", "both", "--cases", "crop-roi,split-channels", "--out", str(tmp_path / "ok")]
    assert main(ok) == 0
    summary = (tmp_path / "ok" / "summary.md").read_text()
    assert "docs: 0/2 · no docs: 0/2" in summary
    assert "Pairs: both pass: 0 · docs only: 0 · no docs only: 0 · both fail: 2" in summary
    broken = ["run", "--agent", str(tmp_path / "no-such-agent") + " {prompt}", "--cases", "crop-roi", "--out", str(tmp_path / "bad")]
    assert main(broken) == 1
    row = json.loads((tmp_path / "bad" / "results.jsonl").read_text().splitlines()[0])
    assert "FileNotFoundError" in row["harness_error"]
    assert main(["run", "--agent", "nothing", "--cases", "no-such-case", "--out", str(tmp_path / "x")]) == 2
