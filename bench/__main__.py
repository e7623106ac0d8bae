"""``python -m bench``: prepare ablation trees, run agents over the cases, self-test the harness.

From the repository root ``python -m bench …``; from anywhere else ``python <checkout>/bench …``
(the directory runs as a script and puts its checkout on the import path).

Exit codes: 0 done; 1 the harness failed (a run could not be set up, a check crashed, or the
self-test found a check that does not discriminate); 2 bad usage (including an agent command that
does not exist). An agent failing cases is a result, not a harness failure.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys

if not __package__:  # run as `python path/to/bench`: make `import bench` find this checkout
    from pathlib import Path as _Path

    sys.path.insert(0, str(_Path(__file__).resolve().parent.parent))
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
    from _tests.support.prepared_trees import prepare_tree
    from bench.prepare import child_env

    tree = prepare_tree(args.out, bench_docs=args.bench_docs)
    print(f"config tree: {tree.root} (bench docs {'on' if tree.bench_docs else 'off'})")
    if tree.withheld:
        print(f"withheld: {', '.join(tree.withheld)}")
    print("use it with:")
    for key, value in child_env(tree).items():
        print(f"  export {key}={value}")
    return 0


def _select_cases(spec: str) -> list[Case]:
    """``all``, or comma-separated case names and categories (textbook, lab, hard, two-session)."""
    from bench.cases import CATEGORIES, all_cases, get_case

    if spec == "all":
        return all_cases()
    chosen: list[Case] = []
    for name in (part.strip() for part in spec.split(",")):
        if not name:
            continue
        picked = [case for case in all_cases() if case.category == name] if name in CATEGORIES else [get_case(name)]
        chosen += [case for case in picked if case not in chosen]
    return chosen


def _cases(args: argparse.Namespace) -> int:
    """The case list as a markdown table: what each needs, and why the data cannot reveal it."""
    cases = _select_cases(args.cases)
    print("| case | category | needs (docs) | why the data cannot reveal it |")
    print("|---|---|---|---|")
    for case in cases:
        print(f"| {case.name} | {case.category} | {', '.join(case.docs) or '(none)'} | {case.why_hidden or '–'} |")
    return 0


def _write_summary(out: Path, rows: list[dict[str, Any]], *, agent: str, wall: float, cases: int, repeat: int) -> str:
    from bench.report import summarize

    text = summarize(rows, agent=agent, wall_s=wall, cases=cases, repeat=repeat)
    (out / "summary.md").write_text(text, encoding="utf-8")
    return text


def _run(args: argparse.Namespace) -> int:
    from bench.agents import make_agent, missing_command
    from bench.run import RunSpec, run_bench

    arms = _select_arms(args.arms)
    agent = make_agent(args.agent)
    missing = missing_command(agent)
    if missing is not None:
        print(
            f"error: agent command not found: {missing} (give a built-in agent name, or a command on PATH)",
            file=sys.stderr,
        )
        return 2
    spec = RunSpec(
        agent=agent,
        arms=arms,
        cases=_select_cases(args.cases),
        out=args.out,
        repeat=args.repeat,
        timeout=args.timeout,
        seed=args.seed,
        same_data=args.same_data,
    )
    started = time.monotonic()
    rows = run_bench(spec, jobs=args.jobs)
    text = _write_summary(
        args.out,
        rows,
        agent=spec.agent.name,
        wall=time.monotonic() - started,
        cases=len(spec.cases),
        repeat=args.repeat,
    )
    print(text)
    print(f"results: {args.out / 'results.jsonl'}")
    return 1 if any(row["harness_error"] for row in rows) else 0


def _select_arms(spec: str) -> list[str]:
    """``both`` (docs, nodocs), ``all`` (docs, procedures-off, nodocs) or comma-separated arm names."""
    from bench.run import ARMS

    named = {"both": ["docs", "nodocs"], "all": ["docs", "procedures-off", "nodocs"]}
    arms = named.get(spec) or [part.strip() for part in spec.split(",") if part.strip()]
    unknown = [arm for arm in arms if arm not in ARMS]
    if unknown or not arms:
        raise ValueError(f"--arms takes both, all or a comma-separated list of {', '.join(ARMS)}; got {spec!r}")
    return list(dict.fromkeys(arms))


SELFTEST_AGENTS = ("scripted", "docs-blind", "nothing")
SELFTEST_ARMS = ["docs", "procedures-off", "nodocs"]


def expected_pass(agent: str, category: str, arm: str, needs: tuple[str, ...] = ()) -> bool:
    """What the self-test demands of each built-in agent.

    scripted reads what its arm lists: it passes everything with the docs, and without them only
    what needs no doc (textbook): a two-session case's session 2 starts on a fresh tree there, so
    the memo session 1 wrote is gone. With the procedures off it passes what needs no shipped
    procedure (``needs``: the withheld procedures the case's solution reads): the lab's docs and
    the memos stay. docs-blind passes the textbook cases only, in every arm: every other case
    needs what the docs hold. nothing fails all.
    """
    if agent == "scripted":
        if arm == "procedures-off":
            return category == "textbook" or not needs
        return arm == "docs" or category == "textbook"
    if agent == "docs-blind":
        return category == "textbook"
    return False


def withheld_needs(case: Case) -> tuple[str, ...]:
    """The shipped procedures a case's docs-arm solution reads: what the procedures-off arm withholds from it."""
    from _tests.support.prepared_trees import ablate_index, shipped_index_path

    withheld = set(ablate_index(shipped_index_path().read_text(encoding="utf-8")).withheld)
    needed = set(case.docs) | set(case.procedure.docs if case.procedure else ())
    return tuple(sorted(needed & withheld))


def _expected(agent: str, row: dict[str, Any]) -> bool:
    from bench.cases import get_case

    return expected_pass(agent, row["category"], row["arm"], withheld_needs(get_case(row["case"])))


def _verdict(agent: str, row: dict[str, Any]) -> tuple[str, bool]:
    """A self-test run's verdict as printed, and whether it is what ``expected_pass`` demands."""
    if row["harness_error"]:
        return "ERROR", False
    want = _expected(agent, row)
    verdict = "pass" if row["passed"] else "fail"
    if row["passed"] == want:
        return f"{verdict} (expected)", True
    return f"{verdict} (UNEXPECTED: it should {'pass' if want else 'fail'})", False


def _selftest_progress(agent: str) -> Callable[[dict[str, Any], int, int, float], None]:
    """Progress lines that name the agent and read a demanded failure as expected."""

    def report(row: dict[str, Any], done: int, total: int, elapsed: float) -> None:
        verdict, as_expected = _verdict(agent, row)
        why = "" if as_expected else f" {row['harness_error'] or row['detail'][:100]}"
        print(
            f"[{agent} {done}/{total} {elapsed:6.1f}s] {row['case']} {row['arm']}: {verdict} "
            f"({row['duration_s']} s){why}",
            flush=True,
        )

    return report


def _score_problems(agent: str, rows: list[dict[str, Any]]) -> list[str]:
    """The scores must agree with the verdicts: a passing run has a score within its tolerance; a
    failing run of an agent that answered has one beyond it (or none); ``nothing`` answers nothing;
    and every run's trace priced it (a run that called a tool read some answer)."""
    problems: list[str] = []
    for r in rows:
        score, where = r.get("score"), f"{agent}: {r['case']} {r['arm']}"
        if r["harness_error"]:
            continue
        if agent == "nothing" and score is not None:
            problems.append(f"{where}: scored {score} with no answer written")
        elif r["passed"] and (score is None or score["limit"] is None or score["error"] > score["limit"] + 1e-9):
            problems.append(f"{where}: passed but its score {score} is not within its tolerance")
        elif not r["passed"] and score is not None and score["limit"] is not None and score["error"] <= score["limit"]:
            if r["category"] != "textbook":
                problems.append(f"{where}: failed with a score within its tolerance {score}")
        cost = r.get("cost") or {}
        if cost.get("calls") and not cost.get("answer_chars"):
            problems.append(f"{where}: {cost['calls']:g} tool calls but no answer characters in the trace")
    return problems


def _selftest(args: argparse.Namespace) -> int:
    from bench.agents import make_agent
    from bench.run import RunSpec, run_bench

    out = args.out or Path(tempfile.mkdtemp(prefix="bench-selftest-"))
    cases = _select_cases(args.cases)
    agents = [name.strip() for name in args.agents.split(",") if name.strip()]
    unknown = [name for name in agents if name not in SELFTEST_AGENTS]
    if unknown:
        raise ValueError(f"--agents takes {', '.join(SELFTEST_AGENTS)}; got {', '.join(unknown)}")
    started = time.monotonic()
    problems: list[str] = []
    for number, name in enumerate(agents, start=1):
        arms = _select_arms(args.arms)
        runs = len(arms) * len(cases) * args.repeat
        print(f"selftest: agent {name} ({number} of {len(agents)}), {runs} runs", flush=True)
        agent_started = time.monotonic()
        rows = run_bench(
            # repeats on the same data: the agreement table then shows a built-in agent agreeing with itself
            RunSpec(
                make_agent(name),
                arms,
                cases,
                out / name,
                timeout=args.timeout,
                repeat=args.repeat,
                same_data=args.repeat > 1,
            ),
            progress=_selftest_progress(name),
            jobs=args.jobs,
        )
        _write_summary(
            out / name, rows, agent=name, wall=time.monotonic() - started, cases=len(cases), repeat=args.repeat
        )
        problems += _score_problems(name, rows)
        for r in rows:
            want = _expected(name, r)
            if r["harness_error"]:
                problems.append(f"{name}: {r['case']} {r['arm']}: harness error: {r['harness_error']}")
            elif r["passed"] != want:
                problems.append(
                    f"{name}: {r['case']} ({r['category']}) {r['arm']}: {'passed' if r['passed'] else 'failed'}, expected to {'pass' if want else 'fail'}: {r['detail']}"
                )
            if r.get("contaminated"):
                problems.append(f"{name}: {r['case']} {r['arm']}: reached a withheld procedure {r['contaminated']}")
        passed = sum(1 for r in rows if r["passed"])
        off = sum(1 for r in rows if not _verdict(name, r)[1])
        print(
            f"selftest: {name}: {len(rows)} runs in {time.monotonic() - agent_started:.0f} s, {passed} passed, "
            f"{len(rows) - passed} failed, " + (f"{off} NOT as expected" if off else "all as expected"),
            flush=True,
        )
    wall = time.monotonic() - started
    print(f"selftest: {len(cases)} cases, agents {', '.join(agents)}, in {wall:.0f} s; output in {out}")
    for problem in problems:
        print(f"  PROBLEM {problem}")
    print("selftest " + ("FAILED" if problems else "passed: every agent passed and failed exactly the cases it should"))
    return 1 if problems else 0


def build_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Ablation bench for biopb-mcp's docs: the same cases with the docs and without them.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    prep = sub.add_parser(
        "prepare",
        help="write an isolated config tree (docs arm or ablated)",
        description="Example: python -m bench prepare --bench-docs=false --out /tmp/nodocs",
    )
    prep.add_argument(
        "--bench-docs",
        type=_bool,
        required=True,
        metavar="true|false",
        help="true: the shipped index and the lab tier; false: procedures withheld (unlisted and unreadable), no lab tier",
    )
    prep.add_argument("--out", type=Path, required=True, help="directory to create (used as BIOPB_CONFIG_DIR)")
    prep.set_defaults(handler=_prepare)

    run = sub.add_parser(
        "run",
        help="run an agent over the cases in both arms",
        description="Example: python -m bench run --agent scripted --arms both --out /tmp/bench",
    )
    run.add_argument(
        "--agent",
        required=True,
        help="scripted | docs-blind | nothing | claude | handoff | a command template using {prompt} {workdir} {mcp_config}",
    )
    run.add_argument(
        "--arms",
        default="both",
        help="both (docs, nodocs), all (docs, procedures-off, nodocs), or comma-separated arm names (default both)",
    )
    run.add_argument(
        "--same-data",
        action="store_true",
        help="every repeat on the same data, so the spread across repeats is the agent's own disagreement",
    )
    run.add_argument(
        "--cases",
        default="all",
        help="all, or comma-separated case names and categories (textbook, lab, hard, two-session)",
    )
    run.add_argument("--out", type=Path, required=True, help="output directory (results.jsonl, summary.md, runs/)")
    run.add_argument("--repeat", type=int, default=1, help="repeats per case and arm (default 1)")
    run.add_argument("--timeout", type=float, default=600.0, help="seconds per agent run before its tree is killed")
    run.add_argument("--seed", type=int, default=0, help="data seed (same data in both arms of a pair)")
    run.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs at once (default 1; model runs may hit rate limits; with handoff, runs handed out at once)",
    )
    run.set_defaults(handler=_run)

    selftest = sub.add_parser(
        "selftest",
        help="each built-in agent passes and fails exactly the cases it should",
        description="Example: python -m bench selftest",
    )
    selftest.add_argument("--cases", default="all", help="all, or comma-separated case names and categories")
    selftest.add_argument("--out", type=Path, default=None, help="output directory (default: a new temp dir)")
    selftest.add_argument(
        "--agents",
        default=",".join(SELFTEST_AGENTS),
        help="comma-separated, from scripted, docs-blind, nothing (default all three)",
    )
    selftest.add_argument(
        "--arms", default="all", help="all (docs, procedures-off, nodocs), both, or comma-separated arm names"
    )
    selftest.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs per case and arm, on the same data (2 or more adds the agreement table; default 1)",
    )
    selftest.add_argument("--timeout", type=float, default=180.0, help="seconds per run")
    selftest.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    selftest.set_defaults(handler=_selftest)

    cases = sub.add_parser(
        "cases",
        help="list the cases: what each needs and why the data cannot reveal it",
        description="Example: python -m bench cases --cases lab,two-session",
    )
    cases.add_argument("--cases", default="all", help="all, or comma-separated case names and categories")
    cases.set_defaults(handler=_cases)

    # `python -m bench perf` lives in bench/perf.py, which registers its own subparser.
    if importlib.util.find_spec("bench.perf") is not None:
        from bench import perf

        perf.register(sub)
    # `python -m bench ooc` (the out-of-core run) lives in bench/ooc.py, the same way.
    if importlib.util.find_spec("bench.ooc") is not None:
        from bench import ooc

        ooc.register(sub)
    if importlib.util.find_spec("bench.soak") is not None:
        from bench import soak

        soak.register(sub)
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
