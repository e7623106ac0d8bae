"""Run cases × arms × repeats against one agent; write results.jsonl and summary.md.

Each run gets a fresh directory ``<out>/runs/<case>--<arm>--r<k>/`` holding its config tree
(``config/``, the run's BIOPB_CONFIG_DIR), its work dir (``work/``), the MCP client config, the
server's tool-call trace and the agent's stdout/stderr. Both arms of a pair get the same data
(the generator is seeded by case and repeat, not by arm), so a per-case comparison is paired.

A two-session case runs the agent twice, each time with a fresh server: session 1
(``trace-s1.jsonl``, ``agent-s1.*``, work dir ``work-s1/``) gets the first request, session 2 the
scored one in ``work/``. Each session works on its own copy of the inputs, so only what the server
keeps carries a convention from one to the next; in the docs arm session 2 runs on session 1's
config tree (its docs, its index), in the docs-off arm on a fresh one (``config-s2/``), so the
pair measures what that memory is worth. A three-session case runs a third session the same way
(``trace-s2.jsonl``, ``work-s2/``), each on the tree the arm gives it.

Three arms: ``docs`` (the shipped procedures, the references and the lab tier), ``nodocs`` (the
procedures withheld and no lab tier; later sessions on fresh trees) and ``procedures-off`` (the
procedures withheld as in ``nodocs``, the references and the lab tier kept, sessions sharing one
tree as in ``docs``): against ``docs`` it prices the procedures alone.

Each row carries the check's score (its error against the truth in the case's unit, see
``bench.cases.Score``) and the run's cost from the server's traces: tool calls, executions,
seconds spent in the kernel tools and the characters of every answer the agent read.

A docs-off run is *contaminated* when it reached a withheld procedure anyway: code it ran opened
the package's shipped docs folder (read from the session notebooks the server records), a read of
a withheld id returned text, or a search (replayed on the run's tree) returned one.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import traceback
import zlib
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from _tests.support.prepared_trees import ConfigTree, prepare_tree
from bench.agents import (
    PROMPT_SUFFIX,
    REPO_ROOT,
    Agent,
    AgentNotFound,
    AgentRun,
    run_command,
)
from bench.cases import Case, scored_check
from bench.prepare import write_mcp_config

__all__ = ["ARMS", "Arm", "RunSpec", "parse_trace", "run_bench", "run_one", "trace_cost"]


@dataclass(frozen=True)
class Arm:
    """What an arm's config tree holds."""

    procedures: bool
    """The shipped procedures are listed and readable (else withheld, ``docs.withhold``)."""
    lab: bool
    """The lab tier is installed."""
    memory: bool
    """Later sessions of a case run on session 1's tree (else each on a fresh one)."""


ARMS = {
    "docs": Arm(procedures=True, lab=True, memory=True),
    "nodocs": Arm(procedures=False, lab=False, memory=False),
    "procedures-off": Arm(procedures=False, lab=True, memory=True),
}
"""Arm name -> what its trees hold; see the module docstring."""

KERNEL_TOOLS = ("execute_code", "poll_job")
"""The calls whose duration is the kernel's time: running code and waiting on a job."""


@dataclass(frozen=True)
class RunSpec:
    """What ``python -m bench run`` was asked to do."""

    agent: Agent
    arms: list[str]
    cases: list[Case]
    out: Path
    repeat: int = 1
    timeout: float = 600.0
    seed: int = 0
    promote_after: float | None = None
    """Server setting kernel.promote_after for every run (None: the server's default)."""
    kernel_plugins: dict[str, str] | None = None
    """Kernel plugin files (name -> source) every run's tree gets, as a lab's own would."""
    same_data: bool = False
    """Every repeat on repeat 0's data: the spread of the answers is then the agent's own
    disagreement with itself, not the data's variation."""


def parse_trace(path: Path) -> tuple[dict[str, int], list[str], int]:
    """Tool-call counts, the doc ids passed to read_doc (in call order) and unparsable lines."""
    calls: Counter[str] = Counter()
    docs: list[str] = []
    bad = 0
    if not path.is_file():
        return {}, [], 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            tool = str(entry["tool"])
        except (ValueError, KeyError, TypeError):
            bad += 1
            continue
        calls[tool] += 1
        if tool == "read_doc":
            args = entry.get("args") or {}
            doc = args.get("id") if isinstance(args, dict) else None
            docs.append(str(doc) if doc is not None else "?")
    return dict(calls), docs, bad


def trace_cost(paths: list[Path]) -> dict[str, float]:
    """What the sessions cost, from their traces: tool calls, executions (execute_code calls),
    seconds in the kernel tools and the characters of the answers the agent read."""
    cost = {"calls": 0.0, "executions": 0.0, "kernel_s": 0.0, "answer_chars": 0.0, "read_doc_chars": 0.0}
    for path in paths:
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict) or "tool" not in entry:
                continue
            cost["calls"] += 1
            cost["executions"] += entry["tool"] == "execute_code"
            if entry["tool"] in KERNEL_TOOLS and isinstance(entry.get("duration_ms"), int | float):
                cost["kernel_s"] += entry["duration_ms"] / 1000
            if isinstance(entry.get("answer_chars"), int):
                cost["answer_chars"] += entry["answer_chars"]
                if entry["tool"] == "read_doc":
                    cost["read_doc_chars"] += entry["answer_chars"]
    cost["kernel_s"] = round(cost["kernel_s"], 3)
    return cost


def trace_calls(path: Path, tool: str, *, ok_only: bool = False) -> list[dict[str, Any]]:
    """The argument summaries of every call to ``tool`` in a trace, in order (``ok_only``: only
    the calls that succeeded)."""
    found: list[dict[str, Any]] = []
    if not path.is_file():
        return found
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(entry, dict)
            and entry.get("tool") == tool
            and isinstance(entry.get("args"), dict)
            and (entry.get("ok", True) or not ok_only)
        ):
            found.append(entry["args"])
    return found


SHIPPED_DOCS_FOLDER = "_docs_data"
"""The package folder of the shipped docs: code that names it went around the withholding."""

AROUND_THE_SERVER = (SHIPPED_DOCS_FOLDER, "bench/lab", "bench/cases", "bench.cases")
"""What code names when it reads the docs (or the bench's own answers) behind the server's back."""


def notebook_cells(tree: ConfigTree) -> list[tuple[str, str]]:
    """(code, output text) of every code cell in the session notebooks the run's server recorded.

    Read as plain JSON (nbformat 4): the notebook is the only record of the code a run executed,
    since the trace keeps its length alone.
    """
    cells: list[tuple[str, str]] = []
    for path in sorted((tree.state_dir / "notebooks").rglob("*.ipynb")):
        try:
            notebook = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        except ValueError:
            continue
        for cell in notebook.get("cells", []) if isinstance(notebook, dict) else []:
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            outputs = []
            for output in cell.get("outputs") or []:
                if isinstance(output, dict):
                    outputs.append(_joined(output.get("text")))
                    outputs.append(_joined((output.get("data") or {}).get("text/plain")))
            cells.append((_joined(cell.get("source")), "".join(outputs)))
    return cells


def _joined(text: object) -> str:
    return "".join(text) if isinstance(text, list) else text if isinstance(text, str) else ""


def contamination(tree: ConfigTree, trace: Path) -> list[str]:
    """How a docs-off session reached a withheld procedure: ``code:_docs_data`` for code that named
    the shipped docs folder (``code:bench/…`` for the bench's own cases or lab docs), ``output:<id>`` for a cell output naming a withheld doc's file,
    ``read:<id>`` for a read_doc of one that returned text with no local doc of that id (so the
    shipped one), ``search:<id>`` for a search that returned one (its query replayed on the tree)."""
    withheld = set(tree.withheld)
    if not withheld:
        return []
    from biopb_mcp.docs.search.query import search_docs
    from biopb_mcp.docs.store import DocStore
    from biopb_mcp.errors import BiopbMcpError

    found: list[str] = []
    for code, output in notebook_cells(tree):
        found += [f"code:{marker}" for marker in AROUND_THE_SERVER if marker in code]
        found += [f"output:{doc_id}" for doc_id in withheld if f"{doc_id}.md" in output]
    for args in trace_calls(trace, "read_doc", ok_only=True):
        doc_id = str(args.get("id", "")).split("@")[0]
        if doc_id in withheld and not (tree.docs_dir / f"{doc_id}.md").exists():
            found.append(f"read:{doc_id}")
    # replaying must not seed or write the run's tree; it withholds what the run's server did
    store = DocStore(tree.docs_dir, read_only=True, withhold=withheld)
    for args in trace_calls(trace, "search_docs"):
        try:
            hits = search_docs(store, str(args.get("query", "")), int(args.get("max_results") or 5))
        except (BiopbMcpError, ValueError, TypeError):
            continue
        found += [f"search:{hit.doc_id}" for hit in hits if hit.doc_id in withheld and hit.origin == "shipped"]
    return sorted(set(found))


def memo_rows(first: Path, last: Path, *, same_tree: bool) -> dict[str, list[str]]:
    """What session 1 wrote (doc ids, ``index`` for a memo written into the index itself) and
    which of those session 2 read. The index is read by every session that shares its tree (the
    handshake carries it); on a fresh tree nothing session 1 wrote can be read."""
    written = sorted({str(args.get("id")) for args in trace_calls(first, "write_doc", ok_only=True)})
    read = {str(args.get("id")).split("@")[0] for args in trace_calls(last, "read_doc", ok_only=True)}
    if same_tree and "index" in written:
        read.add("index")
    return {"session1_wrote": written, "session2_read": sorted(read & set(written)) if same_tree else []}


def _data_rng(seed: int, case: Case, repeat: int) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(case.name.encode()), repeat])


def run_one(spec: RunSpec, case: Case, arm: str, repeat: int) -> dict[str, Any]:
    """One case in one arm: fresh tree and work dir, setup, agent, check, trace. Never raises:
    a harness failure is recorded in ``harness_error``."""
    run_dir = spec.out / "runs" / f"{case.name}--{arm}--r{repeat}"
    row: dict[str, Any] = {
        "case": case.name,
        "category": case.category,
        "arm": arm,
        "repeat": repeat,
        "agent": spec.agent.name,
        "covered_by": list(case.docs),
        "passed": False,
        "detail": "",
        "score": None,
        "cost": {},
        "same_data": spec.same_data,
        "duration_s": None,
        "exit_code": None,
        "timed_out": False,
        "tool_calls": {},
        "read_doc_called": False,
        "docs_read": [],
        "contaminated": [],
        "harness_error": None,
        "run_dir": str(run_dir),
    }
    try:
        run_dir.mkdir(parents=True)
        extra: dict[str, dict[str, object]] | None = (
            {"kernel": {"promote_after": spec.promote_after}} if spec.promote_after is not None else None
        )
        shape = ARMS[arm]
        tree = prepare_tree(
            run_dir / "config",
            bench_docs=shape.procedures,
            lab=shape.lab,
            extra_config=extra,
            kernel_plugins=spec.kernel_plugins,
        )
        workdir = run_dir / "work"
        workdir.mkdir()
        truth = case.setup(workdir, _data_rng(spec.seed, case, 0 if spec.same_data else repeat))
        trace = run_dir / "trace.jsonl"
        runs: list[AgentRun] = []
        trees = [tree]
        for session in range(1, case.sessions):  # each earlier session gets its own copy of the inputs
            shutil.copytree(workdir, run_dir / f"work-s{session}")
        for session in range(1, case.sessions + 1):
            last = session == case.sessions
            session_trace = trace if last else run_dir / f"trace-s{session}.jsonl"
            request = case.session_request(session)
            session_dir = workdir if last else run_dir / f"work-s{session}"
            if session > 1 and not shape.memory:
                # docs off: a later session forgets what earlier ones wrote down, so the pair prices the memory
                trees.append(
                    prepare_tree(
                        run_dir / f"config-s{session}",
                        bench_docs=False,
                        lab=shape.lab,
                        extra_config=extra,
                        kernel_plugins=spec.kernel_plugins,
                    )
                )
            runs.append(
                _session(
                    spec,
                    case,
                    trees[-1],
                    run_dir,
                    session_dir,
                    session_trace,
                    request,
                    session,
                    f"{case.name} {arm} r{repeat}",
                )
            )
        ran = runs[-1]
        row.update(
            exit_code=ran.exit_code,
            timed_out=any(r.timed_out for r in runs),
            duration_s=round(sum(r.duration_s for r in runs), 3),
        )
        try:
            passed, detail, score = scored_check(case, workdir, truth)
        except Exception as exc:  # a crashing check is a bench bug, not the agent's failure
            row["harness_error"] = f"check crashed: {exc!r}"
            passed, detail, score = False, f"check crashed: {exc!r}", None
        if row["timed_out"]:
            detail = f"timed out after {spec.timeout:g} s; {detail}"
        traces = [run_dir / f"trace-s{n}.jsonl" for n in range(1, case.sessions)] + [trace]
        calls: Counter[str] = Counter()
        docs: list[str] = []
        for path in traces:
            session_calls, session_docs, bad = parse_trace(path)
            calls.update(session_calls)
            docs += session_docs
            if bad:
                row["trace_unparsable_lines"] = row.get("trace_unparsable_lines", 0) + bad
        row.update(
            passed=bool(passed),
            detail=detail,
            tool_calls=dict(calls),
            docs_read=docs,
            read_doc_called=bool(docs),
            score=score.as_row() if score is not None else None,
            cost=trace_cost(traces),
        )
        if tree.withheld:
            session_trees = [trees[min(n, len(trees) - 1)] for n in range(len(traces))]
            row["contaminated"] = sorted(
                {hit for path, on in zip(traces, session_trees, strict=True) for hit in contamination(on, path)}
            )
        if case.sessions > 1:
            row.update(memo_rows(traces[0], trace, same_tree=len(trees) == 1))
    except Exception as exc:  # the harness itself failed this run; the row says how
        row["harness_error"] = str(exc) if isinstance(exc, AgentNotFound) else f"{type(exc).__name__}: {exc}"
        row["detail"] = row["detail"] or row["harness_error"]
        with (spec.out / "harness-errors.log").open("a", encoding="utf-8") as log:
            log.write(f"--- {case.name} {arm} r{repeat}\n{traceback.format_exc()}\n")
    return row


def _session(
    spec: RunSpec,
    case: Case,
    tree: ConfigTree,
    run_dir: Path,
    workdir: Path,
    trace: Path,
    request: str,
    session: int,
    label: str,
) -> AgentRun:
    """Run the agent for one session of a case: a command, or a handoff to a person or host."""
    prompt = request + PROMPT_SUFFIX.replace("{workdir}", str(workdir))
    tag = "" if session == case.sessions else f"-s{session}"
    if spec.agent.name == "handoff":
        from bench.handoff import handoff_files, run_handoff

        files = handoff_files(run_dir, session, case.sessions)
        name = label if case.sessions == 1 else f"{label} session {session} of {case.sessions}"
        return run_handoff(
            tree=tree, workdir=workdir, trace=trace, prompt=prompt, files=files, timeout=spec.timeout, label=name
        )
    mcp_config = run_dir / f"mcp{tag}.json"
    write_mcp_config(mcp_config, tree, trace)
    argv = spec.agent.command(prompt=prompt, workdir=workdir, mcp_config=mcp_config, case=case.name)
    env = {
        **os.environ,
        **spec.agent.env,
        "BIOPB_CONFIG_DIR": str(tree.root),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])),
        "BENCH_PROMPT": prompt,
        "BENCH_WORKDIR": str(workdir),
        "BENCH_MCP_CONFIG": str(mcp_config),
        "BENCH_CASE": case.name,
        "BENCH_SESSION": str(session),
    }
    return run_command(
        argv,
        cwd=workdir,
        env=env,
        timeout=spec.timeout,
        stdout=run_dir / f"agent{tag}.out",
        stderr=run_dir / f"agent{tag}.err",
        marker=("BIOPB_CONFIG_DIR", str(tree.root)),
    )


Progress = Callable[[dict[str, Any], int, int, float], None]
"""Told of each finished run (under the results lock): its row, runs done, runs planned, seconds
since the start."""


def print_progress(row: dict[str, Any], done: int, total: int, elapsed: float) -> None:
    """The default progress line: counter, case, arm, verdict, and why."""
    verdict = "ERROR" if row["harness_error"] else ("pass" if row["passed"] else "fail")
    print(
        f"[{done}/{total} {elapsed:6.1f}s] {row['case']} {row['arm']} r{row['repeat']}: "
        f"{verdict} ({row['duration_s']} s) {row['detail'][:100]}",
        flush=True,
    )


def run_bench(spec: RunSpec, *, progress: bool | Progress = True, jobs: int = 1) -> list[dict[str, Any]]:
    """Every case in every arm, ``repeat`` times; results.jsonl grows one line per finished run.

    Arms alternate within a case so that drift over a long run (a rate limit, a warm cache) hits
    both arms alike. ``jobs`` > 1 runs that many at once (each run is its own processes and
    directories); rows come back in plan order whatever order they finish in. ``progress``:
    True prints ``print_progress`` lines, False nothing, a ``Progress`` is called instead.
    """
    report: Progress | None = print_progress if progress is True else (progress or None)
    spec.out.mkdir(parents=True, exist_ok=True)
    results_path = spec.out / "results.jsonl"
    results_path.write_text("", encoding="utf-8")
    plan: list[tuple[Case, str, int]] = []
    for repeat in range(spec.repeat):
        for index, case in enumerate(spec.cases):
            arms = spec.arms if (repeat + index) % 2 == 0 else list(reversed(spec.arms))
            plan += [(case, arm, repeat) for arm in arms]
    started = time.monotonic()
    lock = threading.Lock()
    done: list[dict[str, Any]] = []

    def one(item: tuple[Case, str, int]) -> dict[str, Any]:
        case, arm, repeat = item
        row = run_one(spec, case, arm, repeat)
        with lock:
            done.append(row)
            with results_path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")
            if report is not None:
                report(row, len(done), len(plan), time.monotonic() - started)
        return row

    if jobs <= 1:
        return [one(item) for item in plan]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, plan))
