"""``python -m bench``: prepare ablation trees, run agents over the cases, self-test the harness.

Exit codes: 0 done; 1 the harness failed (a run could not be set up, a check crashed, or the
self-test found a check that does not discriminate); 2 bad usage. An agent failing cases is a
result, not a harness failure.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.cases import Case

__all__ = ["main"]

Handler = Callable[[argparse.Namespace], int]


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _prepare(args: argparse.Namespace) -> int:
    from bench.prepare import child_env, prepare_tree

    tree = prepare_tree(args.out, bench_docs=args.bench_docs)
    print(f"config tree: {tree.root} (bench docs {'on' if tree.bench_docs else 'off'})")
    if tree.moved:
        print(f"moved to ignored: {', '.join(tree.moved)}")
    print("use it with:")
    for key, value in child_env(tree).items():
        print(f"  export {key}={value}")
    return 0


def _select_cases(spec: str) -> list[Case]:
    from bench.cases import all_cases, get_case

    if spec == "all":
        return all_cases()
    return [get_case(name.strip()) for name in spec.split(",") if name.strip()]


def _write_summary(out: Path, rows: list[dict[str, Any]], *, agent: str, wall: float, cases: int, repeat: int) -> str:
    from bench.report import summarize

    text = summarize(rows, agent=agent, wall_s=wall, cases=cases, repeat=repeat)
    (out / "summary.md").write_text(text, encoding="utf-8")
    return text


def _run(args: argparse.Namespace) -> int:
    from bench.agents import make_agent
    from bench.run import RunSpec, run_bench

    arms = {"both": ["docs", "nodocs"], "docs": ["docs"], "nodocs": ["nodocs"]}[args.arms]
    spec = RunSpec(
        agent=make_agent(args.agent),
        arms=arms,
        cases=_select_cases(args.cases),
        out=args.out,
        repeat=args.repeat,
        timeout=args.timeout,
        seed=args.seed,
    )
    started = time.monotonic()
    rows = run_bench(spec, jobs=args.jobs)
    text = _write_summary(args.out, rows, agent=spec.agent.name, wall=time.monotonic() - started, cases=len(spec.cases), repeat=args.repeat)
    print(text)
    print(f"results: {args.out / 'results.jsonl'}")
    return 1 if any(row["harness_error"] for row in rows) else 0


def _selftest(args: argparse.Namespace) -> int:
    from bench.agents import make_agent
    from bench.run import RunSpec, run_bench

    out = args.out or Path(tempfile.mkdtemp(prefix="bench-selftest-"))
    cases = _select_cases(args.cases)
    started = time.monotonic()
    scripted = run_bench(RunSpec(make_agent("scripted"), ["docs", "nodocs"], cases, out / "scripted", timeout=args.timeout), jobs=args.jobs)
    nothing = run_bench(RunSpec(make_agent("nothing"), ["docs", "nodocs"], cases, out / "nothing", timeout=args.timeout), jobs=args.jobs)
    wall = time.monotonic() - started
    _write_summary(out / "scripted", scripted, agent="scripted", wall=wall, cases=len(cases), repeat=1)
    _write_summary(out / "nothing", nothing, agent="nothing", wall=wall, cases=len(cases), repeat=1)
    problems = [f"{r['case']} {r['arm']}: scripted failed: {r['detail']}" for r in scripted if not r["passed"]]
    problems += [f"{r['case']}: do-nothing PASSED: {r['detail']}" for r in nothing if r["passed"]]
    problems += [f"{r['case']} {r['arm']}: harness error: {r['harness_error']}" for r in scripted + nothing if r["harness_error"]]
    problems += [f"{r['case']} nodocs: scripted read a procedure doc {r['docs_read']}" for r in scripted if r["arm"] == "nodocs" and r["docs_read"]]
    print(f"selftest: {len(cases)} cases in {wall:.0f} s; output in {out}")
    for problem in problems:
        print(f"  PROBLEM {problem}")
    print("selftest " + ("FAILED" if problems else "passed: the scripted agent passes every check, the do-nothing agent fails every check"))
    return 1 if problems else 0


def build_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    parser = argparse.ArgumentParser(prog="python -m bench", description="Ablation bench for biopb-mcp's docs (seed 001 §6).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    prep = sub.add_parser("prepare", help="write an isolated config tree (docs arm or ablated)",
                          description="Example: python -m bench prepare --bench-docs=false --out /tmp/nodocs")
    prep.add_argument("--bench-docs", type=_bool, required=True, metavar="true|false",
                      help="true: the shipped index as is; false: procedures moved to the ignored: line")
    prep.add_argument("--out", type=Path, required=True, help="directory to create (used as BIOPB_CONFIG_DIR)")
    prep.set_defaults(handler=_prepare)

    run = sub.add_parser("run", help="run an agent over the cases in both arms",
                         description="Example: python -m bench run --agent scripted --arms both --out /tmp/bench")
    run.add_argument("--agent", required=True,
                     help="scripted | nothing | claude | a command template using {prompt} {workdir} {mcp_config}")
    run.add_argument("--arms", choices=("both", "docs", "nodocs"), default="both", help="which arms (default both)")
    run.add_argument("--cases", default="all", help="all, or comma-separated case names")
    run.add_argument("--out", type=Path, required=True, help="output directory (results.jsonl, summary.md, runs/)")
    run.add_argument("--repeat", type=int, default=1, help="repeats per case and arm (default 1)")
    run.add_argument("--timeout", type=float, default=600.0, help="seconds per agent run before its tree is killed")
    run.add_argument("--seed", type=int, default=0, help="data seed (same data in both arms of a pair)")
    run.add_argument("--jobs", type=int, default=1, help="runs at once (default 1; model runs may hit rate limits)")
    run.set_defaults(handler=_run)

    selftest = sub.add_parser("selftest", help="scripted passes every check, nothing fails every check",
                              description="Example: python -m bench selftest")
    selftest.add_argument("--cases", default="all", help="all, or comma-separated case names")
    selftest.add_argument("--out", type=Path, default=None, help="output directory (default: a new temp dir)")
    selftest.add_argument("--timeout", type=float, default=180.0, help="seconds per run")
    selftest.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    selftest.set_defaults(handler=_selftest)

    # --- perf hook (issue 7) -------------------------------------------------------------------
    # `python -m bench perf` lives in bench/perf.py, written by the perf helper. It registers its
    # own subparser: define `register(sub: argparse._SubParsersAction) -> None` there, which adds
    # a "perf" parser and sets `handler=<function(args) -> int>` with set_defaults.
    if importlib.util.find_spec("bench.perf") is not None:
        from bench import perf

        perf.register(sub)
    return parser, sub


def main(argv: list[str] | None = None) -> int:
    parser, _ = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "repeat", 1) < 1 or getattr(args, "jobs", 1) < 1:
        parser.error("--repeat and --jobs must be at least 1")
    handler: Handler = args.handler
    try:
        return handler(args)
    except (FileExistsError, KeyError, ValueError) as exc:
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
