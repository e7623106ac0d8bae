"""End to end: the scripted agents through a real stdio server and kernel on a few cases (one of
them two-session, with a solution that outlives promote_after), the do-nothing agent on all cases,
contamination, and the CLI's exit codes."""

from __future__ import annotations

import json
import shlex
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench.__main__ import main
from bench.agents import make_agent
from bench.cases import all_cases, get_case
from bench.report import headline, summarize
from bench.run import RunSpec, run_bench, run_one


@pytest.mark.timeout(900)
def test_scripted_agent_passes_through_the_real_server_and_reads_only_listed_docs(tmp_path: Path) -> None:
    # A representative subset, run at once: a covered case in each arm and one no procedure covers.
    # The timeout only bounds a hung run: three servers and kernels at once on a loaded machine
    # can take minutes.
    spec = RunSpec(make_agent("scripted"), ["docs", "nodocs"], [], tmp_path, timeout=600)
    picks = [("count-nuclei", "docs"), ("crop-roi", "docs"), ("flatfield-blank", "nodocs")]
    with ThreadPoolExecutor(max_workers=3) as pool:
        rows = list(pool.map(lambda pick: run_one(spec, get_case(pick[0]), pick[1], 0), picks))
    for row in rows:
        assert row["passed"], row
        assert row["harness_error"] is None and not row["timed_out"] and row["exit_code"] == 0
        assert row["tool_calls"]["start_kernel"] == 1 and row["tool_calls"]["execute_code"] >= 1
    nuclei, crop, flat = rows
    assert nuclei["docs_read"] == [
        "segment-nuclei",
        "outputs",
    ]  # listed in the docs arm: the procedure and its save helpers
    assert crop["docs_read"] == []  # no procedure covers it
    assert flat["docs_read"] == [] and not flat["read_doc_called"]  # flatfield is not listed here
    assert (Path(flat["run_dir"]) / "trace.jsonl").is_file()


def test_nothing_agent_fails_every_case_and_the_summary_says_so(tmp_path: Path) -> None:
    cases = all_cases()
    n = len(cases)
    rows = run_bench(RunSpec(make_agent("nothing"), ["docs"], cases, tmp_path, timeout=60), progress=False, jobs=2)
    assert len(rows) == n
    assert [row["case"] for row in rows if row["passed"]] == []
    assert all(row["exit_code"] == 0 and row["harness_error"] is None for row in rows)
    assert headline(rows) == f"docs: 0 passed, {n} failed"
    text = summarize(rows, agent="nothing", wall_s=1.0, cases=n, repeat=1)
    assert "| count-nuclei | textbook | segment-nuclei | fail |" in text
    assert f"| docs | 0/{n} (0%) | none |" in text
    lab, two = (sum(case.category == c for case in cases) for c in ("lab", "two-session"))
    assert f"| lab | {lab} | 0/{lab} |" in text and f"| two-session | {two} | 0/{two} |" in text


def test_run_command_writes_summary_and_exits_nonzero_only_on_harness_failure(tmp_path: Path) -> None:
    ok = [
        "run",
        "--agent",
        "nothing",
        "--arms",
        "both",
        "--cases",
        "crop-roi,split-channels",
        "--out",
        str(tmp_path / "ok"),
    ]
    assert main(ok) == 0
    summary = (tmp_path / "ok" / "summary.md").read_text()
    assert "docs: 0 passed, 2 failed · no docs: 0 passed, 2 failed" in summary
    assert "Pairs: both pass: 0 · docs only: 0 · no docs only: 0 · both fail: 2" in summary
    # an agent whose command vanished once it started is a harness error, said plainly
    row = run_one(
        RunSpec(make_agent(str(tmp_path / "gone") + " {prompt}"), ["docs"], [], tmp_path / "gone-run"),
        get_case("crop-roi"),
        "docs",
        0,
    )
    assert row["harness_error"] == f"agent command not found: {tmp_path / 'gone'}"
    assert main(["run", "--agent", "nothing", "--cases", "no-such-case", "--out", str(tmp_path / "x")]) == 2


def test_a_missing_agent_command_is_one_error_line_and_no_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = [
        "run",
        "--agent",
        "no-such-agent-binary {prompt}",
        "--cases",
        "crop-roi,split-channels",
        "--out",
        str(tmp_path / "bad"),
    ]
    assert main(broken) == 2
    captured = capsys.readouterr()
    assert (
        captured.err
        == "error: agent command not found: no-such-agent-binary (give a built-in agent name, or a command on PATH)\n"
    )
    assert captured.out == ""
    assert not (tmp_path / "bad").exists()


PACING_PLUGIN = """\
import time as _time
# every cell the agent runs takes at least a second (the server's own silent requests do not),
# so with promote_after = 0.5 each execute_code becomes a job however fast the machine is
get_ipython().events.register("pre_run_cell", lambda _info: _time.sleep(1.0))
"""


@pytest.mark.timeout(900)
def test_scripted_agent_on_a_two_session_case_follows_jobs_and_keeps_the_convention(tmp_path: Path) -> None:
    # A plugin paces every cell past promote_after, so every solution becomes a job and the check
    # passes only if the agent followed each job to its end before leaving. (The docs-blind agent
    # failing this case is `python -m bench selftest`'s to show.)
    spec = RunSpec(
        make_agent("scripted"),
        ["docs"],
        [],
        tmp_path,
        timeout=600,
        promote_after=0.5,
        kernel_plugins={"pace.py": PACING_PLUGIN},
    )
    row = run_one(spec, get_case("memo-border-rule"), "docs", 0)
    assert row["passed"], row
    assert row["tool_calls"].get("poll_job", 0) >= 2  # one job per session, each followed
    assert row["session1_wrote"] == ["counting-rules"] and row["session2_read"] == ["counting-rules"]
    assert (Path(row["run_dir"]) / "trace-s1.jsonl").is_file() and (Path(row["run_dir"]) / "trace.jsonl").is_file()


def test_a_docs_off_run_that_reached_a_procedure_is_flagged(tmp_path: Path) -> None:
    from _tests.support.prepared_trees import prepare_tree
    from bench.report import summarize
    from bench.run import contamination
    from biopb_mcp.docs.store import DocStore

    tree = prepare_tree(tmp_path / "config", bench_docs=False)
    hidden = tree.withheld[0]
    trace = tmp_path / "trace.jsonl"
    lines = [
        {"tool": "read_doc", "args": {"id": "kernel"}, "ok": True},
        {"tool": "search_docs", "args": {"query": "stitch tiles phase correlation"}, "ok": True},
    ]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert contamination(tree, trace) == []  # a reference read and a search that finds no procedure
    lines.append({"tool": "read_doc", "args": {"id": hidden}, "ok": True})
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert contamination(tree, trace) == [f"read:{hidden}"]
    # the agent lists a withheld id in the index: it is still not served, so no search reaches it
    store = DocStore(tree.docs_dir, withhold=tree.withheld)
    store.write_doc(
        "index", body=(tree.docs_dir / "index.md").read_text(encoding="utf-8") + "\n- stitch-tiles: stitch\n"
    )
    assert contamination(tree, trace) == [f"read:{hidden}"]
    # a doc of its own under that id is the agent's: reading it is no contamination
    store.write_doc(hidden, body="# mine\n")
    assert contamination(tree, trace) == []
    row = {
        "case": "stitch-tiles",
        "category": "textbook",
        "arm": "nodocs",
        "repeat": 0,
        "passed": True,
        "detail": "",
        "covered_by": [],
        "timed_out": False,
        "harness_error": None,
        "tool_calls": {},
        "docs_read": [hidden],
        "read_doc_called": True,
        "duration_s": 1.0,
        "contaminated": [f"read:{hidden}"],
    }
    text = summarize([row], agent="x", wall_s=1, cases=1, repeat=1)
    assert (
        "Contaminated no-docs runs (reached a withheld procedure): 1. Without them: **no docs: 0 passed, 0 failed**"
        in text
    )
    assert f"- stitch-tiles no docs r0: read:{hidden}" in text


def test_cases_can_be_chosen_by_category(tmp_path: Path) -> None:
    assert (
        main(
            ["run", "--agent", "nothing", "--arms", "nodocs", "--cases", "two-session,crop-roi", "--out", str(tmp_path)]
        )
        == 0
    )
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    two_session = sorted(case.name for case in all_cases() if case.category == "two-session")
    assert sorted(row["case"] for row in rows) == sorted(["crop-roi", *two_session])
    memo = next(row for row in rows if row["case"] == "memo-border-rule")
    assert memo["session1_wrote"] == [] and (Path(memo["run_dir"]) / "agent-s1.out").is_file()


def test_a_memo_in_the_index_counts_as_written_and_read_on_the_same_tree(tmp_path: Path) -> None:
    from bench.run import memo_rows

    first, last = tmp_path / "s1.jsonl", tmp_path / "s2.jsonl"
    first.write_text(
        json.dumps({"tool": "write_doc", "args": {"id": "index", "old_chars": 3}, "ok": True})
        + "\n"
        + json.dumps({"tool": "write_doc", "args": {"id": "refused", "body_chars": 3}, "ok": False})
        + "\n"
    )
    last.write_text(json.dumps({"tool": "read_doc", "args": {"id": "kernel"}, "ok": True}) + "\n")
    assert memo_rows(first, last, same_tree=True) == {"session1_wrote": ["index"], "session2_read": ["index"]}
    assert memo_rows(first, last, same_tree=False) == {"session1_wrote": ["index"], "session2_read": []}


MEMORY_AGENT = """
import json, os, pathlib, sys
docs = pathlib.Path(os.environ["BIOPB_CONFIG_DIR"]) / "docs"
work = pathlib.Path(sys.argv[1])
if os.environ["BENCH_SESSION"] == "1":
    (docs / "my-memo.md").write_text("# kept")
    (work / "left-by-session-1.txt").write_text("x")
else:
    seen = {"doc": (docs / "my-memo.md").exists(), "work": (work / "left-by-session-1.txt").exists(),
            "inputs": (work / "plate2.tif").exists()}
    (work.parent / "seen.json").write_text(json.dumps(seen))
"""


def test_session_2_keeps_session_1s_docs_only_in_the_docs_arm_and_never_its_work_dir(tmp_path: Path) -> None:
    # an agent that writes a doc straight into its tree in session 1 and looks for it in session 2
    agent = make_agent(f"{sys.executable} -c {shlex.quote(MEMORY_AGENT)} {{workdir}}")
    spec = RunSpec(agent, ["docs", "nodocs"], [], tmp_path, timeout=60)
    seen = {}
    for arm in ("docs", "nodocs"):
        row = run_one(spec, get_case("memo-border-rule"), arm, 0)
        assert row["harness_error"] is None, row
        seen[arm] = json.loads((Path(row["run_dir"]) / "seen.json").read_text())
    assert seen["docs"] == {"doc": True, "work": False, "inputs": True}
    assert seen["nodocs"] == {"doc": False, "work": False, "inputs": True}  # a fresh tree: the memory is gone
