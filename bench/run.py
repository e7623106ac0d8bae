"""Run cases × arms × repeats against one agent; write results.jsonl and summary.md.

Each run gets a fresh directory ``<out>/runs/<case>--<arm>--r<k>/`` holding its config tree
(``config/``, the run's BIOPB_CONFIG_DIR), its work dir (``work/``), the MCP client config, the
server's tool-call trace and the agent's stdout/stderr. Both arms of a pair get the same data
(the generator is seeded by case and repeat, not by arm), so a per-case comparison is paired.
"""

from __future__ import annotations

import json
import os
import threading
import time
import traceback
import zlib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.agents import PROMPT_SUFFIX, REPO_ROOT, Agent, run_command
from bench.cases import Case, run_check
from bench.prepare import prepare_tree, write_mcp_config

__all__ = ["ARMS", "RunSpec", "parse_trace", "run_bench", "run_one"]

ARMS = {"docs": True, "nodocs": False}
"""Arm name -> the ``--bench-docs`` value of its config tree."""


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


def _data_rng(seed: int, case: Case, repeat: int) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(case.name.encode()), repeat])


def run_one(spec: RunSpec, case: Case, arm: str, repeat: int) -> dict[str, Any]:
    """One case in one arm: fresh tree and work dir, setup, agent, check, trace. Never raises:
    a harness failure is recorded in ``harness_error``."""
    run_dir = spec.out / "runs" / f"{case.name}--{arm}--r{repeat}"
    row: dict[str, Any] = {
        "case": case.name,
        "arm": arm,
        "repeat": repeat,
        "agent": spec.agent.name,
        "covered_by": list(case.docs),
        "passed": False,
        "detail": "",
        "duration_s": None,
        "exit_code": None,
        "timed_out": False,
        "tool_calls": {},
        "read_doc_called": False,
        "docs_read": [],
        "harness_error": None,
        "run_dir": str(run_dir),
    }
    try:
        run_dir.mkdir(parents=True)
        tree = prepare_tree(run_dir / "config", bench_docs=ARMS[arm])
        workdir = run_dir / "work"
        workdir.mkdir()
        truth = case.setup(workdir, _data_rng(spec.seed, case, repeat))
        trace = run_dir / "trace.jsonl"
        mcp_config = run_dir / "mcp.json"
        write_mcp_config(mcp_config, tree, trace)
        prompt = case.request + PROMPT_SUFFIX.replace("{workdir}", str(workdir))
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
        }
        ran = run_command(
            argv,
            cwd=workdir,
            env=env,
            timeout=spec.timeout,
            stdout=run_dir / "agent.out",
            stderr=run_dir / "agent.err",
            marker=("BIOPB_CONFIG_DIR", str(tree.root)),
        )
        row.update(exit_code=ran.exit_code, timed_out=ran.timed_out, duration_s=ran.duration_s)
        try:
            passed, detail = run_check(case, workdir, truth)
        except Exception as exc:  # a crashing check is a bench bug, not the agent's failure
            row["harness_error"] = f"check crashed: {exc!r}"
            passed, detail = False, f"check crashed: {exc!r}"
        if ran.timed_out:
            detail = f"timed out after {spec.timeout:g} s; {detail}"
        calls, docs, bad = parse_trace(trace)
        row.update(passed=bool(passed), detail=detail, tool_calls=calls, docs_read=docs, read_doc_called=bool(docs))
        if bad:
            row["trace_unparsable_lines"] = bad
    except Exception as exc:  # the harness itself failed this run; the row says how
        row["harness_error"] = f"{type(exc).__name__}: {exc}"
        row["detail"] = row["detail"] or row["harness_error"]
        with (spec.out / "harness-errors.log").open("a", encoding="utf-8") as log:
            log.write(f"--- {case.name} {arm} r{repeat}\n{traceback.format_exc()}\n")
    return row


def run_bench(spec: RunSpec, *, progress: bool = True, jobs: int = 1) -> list[dict[str, Any]]:
    """Every case in every arm, ``repeat`` times; results.jsonl grows one line per finished run.

    Arms alternate within a case so that drift over a long run (a rate limit, a warm cache) hits
    both arms alike. ``jobs`` > 1 runs that many at once (each run is its own processes and
    directories); rows come back in plan order whatever order they finish in.
    """
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
            if progress:
                verdict = "ERROR" if row["harness_error"] else ("pass" if row["passed"] else "fail")
                print(
                    f"[{len(done)}/{len(plan)} {time.monotonic() - started:6.1f}s] {case.name} {arm} r{repeat}: "
                    f"{verdict} ({row['duration_s']} s) {row['detail'][:100]}",
                    flush=True,
                )
        return row

    if jobs <= 1:
        return [one(item) for item in plan]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, plan))
