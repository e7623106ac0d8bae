"""``python -m bench soak``: the reliability tests' attacks at full counts, outside CI.

Generated hostile ids through the store and through MCP tools and resource URIs; SIGKILL in the
middle of write_doc, over and over; two servers and a hand editor writing for minutes; pipelined
calls while the kernel prints; idle and malformed HTTP requests without the token; costly
searches; writes past the size caps. It prints what it tried and what it found: escapes, torn or lost
docs, orphan processes, each a count with 0 expected (exit 1 when any is not). The reliability
tests import the same generators and checks from these modules, at CI's small counts.

Example: ``python -m bench soak --minutes 5 --json soak.json``; ``--quick`` runs every phase in
seconds (the suite does, so the soak cannot rot).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

__all__ = ["register"]


def _handler(args: argparse.Namespace) -> int:
    from bench.soak import run as soak_run

    base = soak_run.QUICK if args.quick else soak_run.FULL
    given = {
        k: getattr(args, k)
        for k in (
            "store_ids",
            "mcp_ids",
            "kills",
            "minutes",
            "calls",
            "kernel_kills",
            "slowloris",
            "malformed",
            "long_queries",
            "size_writes",
            "seed",
        )
        if getattr(args, k) is not None
    }
    if any(v < 0 for v in given.values()):
        raise ValueError("counts and minutes must not be negative")
    scale = dataclasses.replace(base, **given)
    phases = tuple(p.strip() for p in args.phases.split(",") if p.strip()) if args.phases else soak_run.PHASES
    unknown = [p for p in phases if p not in soak_run.PHASES]
    if unknown:
        raise ValueError(f"unknown phase(s) {', '.join(unknown)}; the phases are {', '.join(soak_run.PHASES)}")
    started = time.monotonic()
    out = soak_run.run_soak(scale, args.workdir, phases)
    wall = time.monotonic() - started
    print(soak_run.report(out, wall))
    if args.json is not None:
        soak_run.write_json(args.json, soak_run.to_json(out, scale, wall))
    return 1 if out.problems else 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``soak`` to ``python -m bench``."""
    p = sub.add_parser(
        "soak",
        help="the reliability attacks at full counts: escapes, torn or lost docs, orphans",
        description="Example: python -m bench soak --minutes 5 --json soak.json. "
        "Exit 0: every found count is 0; 1: something was found.",
    )
    p.add_argument(
        "--store-ids",
        type=int,
        default=None,
        help="generated hostile ids through the store (default 10,000; plus a tenth as many valid ids)",
    )
    p.add_argument(
        "--mcp-ids", type=int, default=None, help="generated ids through MCP tools and resource URIs (default 1,000)"
    )
    p.add_argument(
        "--kills",
        type=int,
        default=None,
        help="SIGKILL injections mid-write (default 1,000; every 25th through the real server)",
    )
    p.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="minutes of two servers and a hand editor writing (default 5; 0 = one round)",
    )
    p.add_argument("--calls", type=int, default=None, help="pipelined calls while the kernel prints (default 1,000)")
    p.add_argument(
        "--kernel-kills", type=int, default=None, help="servers SIGKILLed with a live kernel, for orphans (default 3)"
    )
    p.add_argument(
        "--slowloris", type=int, default=None, help="idle half-sent HTTP requests under ulimit -n 1024 (default 1,100)"
    )
    p.add_argument("--malformed", type=int, default=None, help="malformed HTTP requests in a flood (default 18,207)")
    p.add_argument(
        "--long-queries", type=int, default=None, help="pasted passages searched over 5,000 docs (default 200)"
    )
    p.add_argument("--size-writes", type=int, default=None, help="writes at and past the size caps (default 200)")
    p.add_argument("--seed", type=int, default=None, help="generator seed (default 0)")
    p.add_argument(
        "--phases",
        default=None,
        help="comma-separated subset of hostile-store, hostile-mcp, crash, writers, "
        "noise, http, search, caps (default all)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="every phase at a tiny count (seconds): checks the harness, not the product",
    )
    p.add_argument("--json", type=Path, default=None, help="also write the counts as JSON to FILE")
    p.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where the temp root goes (default /tmp: kernel socket paths must be short)",
    )
    p.set_defaults(handler=_handler)
