"""The soak's phases and its report: big counts of what the reliability tests try at CI scale.

Each phase adds to one Counter: what it tried ("tried" rows) and what it found ("found" rows,
0 expected), keeping a few examples of each finding. The run ends with a sweep for orphan
processes: anything still alive that belongs to one of the soak's config trees.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from random import Random
from typing import Any

from _tests.support import raw_server as servers
from _tests.support.soak import crash as crashes
from _tests.support.soak import hostile_ids as hostile
from _tests.support.soak import http_flood
from _tests.support.soak import writers as writing
from bench.soak import bounds, kernel_output, search_cost, size_caps
from bench.soak import noise as noisy
from biopb_mcp.docs.limits import FILE_MAX_BYTES
from biopb_mcp.docs.store import DocStore
from biopb_mcp.text.doc_views import read_doc

__all__ = ["FOUND", "FULL", "QUICK", "SoakResult", "SoakScale", "run_soak"]


@dataclass(frozen=True)
class SoakScale:
    """How much of each phase to run."""

    store_ids: int = 10_000
    mcp_ids: int = 1_000
    kills: int = 1_000
    server_kill_every: int = 25
    minutes: float = 5.0
    calls: int = 1_000
    kernel_kills: int = 3
    slowloris: int = 1_100
    slowloris_nofile: int = 1_024
    slowloris_close_wait: float | None = 40.0
    malformed: int = 18_207
    search_docs: int = 5_000
    long_queries: int = 200
    one_word_bytes: int = FILE_MAX_BYTES
    costly_rounds: int = 3
    size_writes: int = 200
    hostile_names: int = 1_000
    wide_inputs: int = 100_000
    edits: int = 60
    edit_doc_bytes: int = 4_500_000
    seed: int = 0
    # kernel output (bench/soak/kernel_output.py)
    big_prints: int = 8
    print_mb: int = 70
    error_mb: int = 50
    layer_name_chars: int = 2_000_000


FULL = SoakScale()
QUICK = SoakScale(
    store_ids=30,
    mcp_ids=10,
    kills=4,
    server_kill_every=4,
    minutes=0.0,
    calls=20,
    kernel_kills=1,
    slowloris=300,
    slowloris_nofile=512,
    slowloris_close_wait=None,
    malformed=300,
    search_docs=60,
    long_queries=5,
    one_word_bytes=200_000,
    costly_rounds=1,
    size_writes=10,
    hostile_names=30,
    wide_inputs=2_000,
    edits=2,
    edit_doc_bytes=300_000,
    big_prints=1,
    print_mb=1,
    error_mb=1,
    layer_name_chars=10_000,
)
"""Seconds of each phase: the suite runs it so the soak cannot rot; it checks the harness, not the product at scale."""

FOUND = {
    "escapes": "a write outside the tier, a read of the sentinel, anything changed beside the tier",
    "unclear refusals": "a refusal that is not one of ours, or that does not say why",
    "torn docs": "a file that is not one whole text somebody wrote",
    "lost docs": "a write that is neither the final text nor in history; an index line without its doc",
    "surfaced temp files": "a leftover temp file shown as a doc (ids, index, resources, search)",
    "old/new races not won exactly once": "the same old/new from two servers: not one winner, one clear refusal",
    "wire: stray lines on stdout": "a line on the server's stdout that is not one JSON-RPC message",
    "pipelined calls unanswered": "a request that never got its answer",
    "pipelined calls answered with a protocol error": "a JSON-RPC error instead of a tool result",
    "executions with a wrong answer": "an execute_code answer that is not its own code's output",
    "servers not exiting 0 on stdin EOF": "a server that hung or failed on a clean shutdown",
    "orphan kernels": "a kernel alive 5 s after its server ended",
    "orphan processes at the end": "anything of the soak's trees alive after every phase",
    "slowloris: real requests unanswered": "a client with the token not answered while idle half-sent requests held the port",
    "slowloris: idle connections still open after the wait": "a half-sent request the server never timed out",
    "slowloris: tracebacks or 'Too many open files' lines logged": "the descriptor limit reached, or a traceback per failed accept",
    "malformed flood: log or stderr grew past the bound": "a log line per malformed request (past 64 KiB over the flood)",
    "malformed flood: log rotations": "the real log rotated away by a flood",
    "search: queries ending past the budget": "a search answered or refused later than its budget plus a second",
    "search: ordinary long queries refused as too costly": "a pasted passage of a doc refused instead of answered",
    "search: plain queries refused": "a plain query refused while a costly one ran",
    "size caps: docs or index left past a cap or unreadable": "a write that left a file no read can take back",
    **kernel_output.FOUND,
}
FOUND.update(bounds.FOUND)
"""What the soak looks for, each a count that must be 0."""

_KIND = {
    "torn": "torn docs",
    "lost": "lost docs",
    "surfaced": "surfaced temp files",
    "race": "old/new races not won exactly once",
}


@dataclass
class SoakResult:
    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def found(self, kind: str, what: str) -> None:
        self.counts[kind] += 1
        keep = self.examples.setdefault(kind, [])
        if len(keep) < 5:
            keep.append(what)

    @property
    def problems(self) -> int:
        return sum(self.counts[k] for k in FOUND)


LOG_LEVEL = "ERROR"
"""The servers' and the store's log level: refusals and skipped symlinks are the point, not news."""


@contextmanager
def _quiet_logs() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in ("biopb_mcp", "mcp")]
    saved = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(LOG_LEVEL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, saved, strict=True):
            logger.setLevel(level)


def _progress(msg: str) -> None:
    sys.stderr.write(f"[soak] {msg}\n")
    sys.stderr.flush()


# --------------------------------------------------------------------------- phases


def hostile_store(root: Path, scale: SoakScale, out: SoakResult) -> None:
    """Generated hostile ids (and a tenth as many valid ones) through a DocStore beside a sentinel."""

    base = root / "hostile-store"
    local = base / "docs"
    sentinel = hostile.build_tier(base, local)
    sentinel_before, outside_before = hostile.snapshot(sentinel), hostile.snapshot(base, exclude=(local,))
    ids = hostile.draw(hostile.hostile_ids, scale.store_ids, scale.seed)
    ids += hostile.draw(hostile.valid_ids, max(1, scale.store_ids // 10), scale.seed)
    store = DocStore(local)
    tally: Counter[str] = Counter()
    for k, doc_id in enumerate(ids):
        for problem in hostile.store_id_round(store, local, doc_id, k, tally):
            out.found("escapes" if problem.startswith("escape") else "unclear refusals", problem)
        if (k + 1) % 1000 == 0:
            _progress(f"hostile-store: {k + 1} of {len(ids)} ids")
    for problem in hostile.escapes_after(local, sentinel, sentinel_before, base, outside_before):
        out.found("escapes", problem)
    out.counts["hostile ids tried (store)"] += tally["ids"]
    out.counts["hostile ids: store writes landed inside the tier"] += tally["written"]
    out.counts["hostile ids: store writes refused"] += tally["refused"]


async def hostile_mcp(root: Path, scale: SoakScale, out: SoakResult) -> None:
    """Generated ids through read_doc, write_doc and resource reads of a real in-process MCP session."""
    from mcp import Client

    from biopb_mcp.config.settings import load_settings
    from biopb_mcp.server import build_server

    base = root / "hostile-mcp"
    env = servers.write_config(base, log_level=LOG_LEVEL)
    local = Path(env["BIOPB_CONFIG_DIR"]) / "docs"
    sentinel = hostile.build_tier(base, local)
    sentinel_before, outside_before = hostile.snapshot(sentinel), hostile.snapshot(base, exclude=(local,))
    ids = hostile.draw(hostile.mixed_ids, scale.mcp_ids, scale.seed + 1)
    server, state = build_server(load_settings(Path(env["BIOPB_CONFIG_DIR"])))
    tally: Counter[str] = Counter()
    try:
        async with Client(server, mode="legacy") as client:
            for k, doc_id in enumerate(ids):
                for problem in await hostile.mcp_id_round(client, local, doc_id, tally):
                    out.found("escapes" if problem.startswith("escape") else "unclear refusals", problem)
                if (k + 1) % 250 == 0:
                    _progress(f"hostile-mcp: {k + 1} of {len(ids)} ids")
            if (await client.call_tool("read_doc", {"id": "index"})).is_error:
                out.found("unclear refusals", "the session did not survive the hostile calls")
    finally:
        state.kernel.shutdown()
    for problem in hostile.escapes_after(local, sentinel, sentinel_before, base, outside_before):
        out.found("escapes", problem)
    out.counts["hostile ids tried (MCP tools + URIs)"] += tally["ids"]
    out.counts["hostile ids: MCP writes refused"] += tally["refused"]
    out.counts["hostile ids: resource reads refused"] += tally["uri refused"]


TIER_ROUNDS = 40
"""Kill rounds per tier: each round may add up to 3 index entries, and the index holds at most 200."""


def crash(root: Path, scale: SoakScale, out: SoakResult) -> None:
    """SIGKILL mid-write: mostly forked DocStore writers, every Nth the real server over stdio."""

    rng = Random(scale.seed + 2)
    check: crashes.TierCheck | None = None
    env: dict[str, str] = {}
    before_index = ""
    stray = 0
    for i in range(scale.kills):
        if i % TIER_ROUNDS == 0:  # a fresh tier, to stay under the index's entry cap
            if check is not None:
                stray += check.stray_temp_files
                _found(out, check.check_surfaces(DocStore(check.local)))
            env = servers.write_config(root / "crash" / f"tier-{i // TIER_ROUNDS:03d}", log_level=LOG_LEVEL)
            local = Path(env["BIOPB_CONFIG_DIR"]) / "docs"
            DocStore(local).write_doc("big", body=crashes.big_body("init"))  # so every later write replaces it
            before_index = (local / "index.md").read_text()
            check = crashes.TierCheck(local)
        assert check is not None
        via_server = scale.server_kill_every > 0 and i % scale.server_kill_every == scale.server_kill_every - 1
        if via_server:
            log = Path(env["BIOPB_CONFIG_DIR"]).parent / f"server-{i}.log"
            orders = crashes.kill_server_mid_write(env, log, f"srv-{i}", rng, 0.3)
            out.counts["crash injections (SIGKILL, real server mid write_doc)"] += 1
        else:
            orders = [crashes.kill_store_writer(check.local, i, 3, rng, 0.25)]
            out.counts["crash injections (SIGKILL, store writer mid write_doc)"] += 1
        before_index, problems = check.check(before_index, orders, surfaces=i % 10 == 9)
        _found(out, problems)
        if (i + 1) % 100 == 0:
            _progress(f"crash: {i + 1} kills")
    if check is not None:
        stray += check.stray_temp_files
        _found(out, check.check_surfaces(DocStore(check.local)))
    out.counts["crash: stray temp files left in tiers (never surfaced)"] += stray


def _found(out: SoakResult, problems: list[tuple[str, str]]) -> None:
    for kind, what in problems:
        out.found(_KIND[kind], what)


async def writers(root: Path, scale: SoakScale, out: SoakResult) -> None:
    """Two servers and a hand editor on one tier, round after round for ``minutes`` (one round at least)."""
    from mcp import Client

    keep = 1000
    env = servers.write_config(root / "writers", f"[docs]\nhistory_keep = {keep}\n", log_level=LOG_LEVEL)
    local = Path(env["BIOPB_CONFIG_DIR"]) / "docs"
    store = DocStore(local, history_keep=keep)
    read_doc(store, "index@diff")  # seeds the local index
    small = scale.minutes <= 0
    deadline = time.monotonic() + scale.minutes * 60
    n = 0
    async with (
        Client(servers.server_params(env), mode="legacy", read_timeout_seconds=60) as a,
        Client(servers.server_params(env), mode="auto", read_timeout_seconds=60) as b,
    ):
        while n == 0 or time.monotonic() < deadline:
            r = (
                writing.Round(f"r{n:05d}", body_writes=3, creates=2, hand_edits=3)
                if small
                else writing.Round(f"r{n:05d}")
            )
            writing.prepare_round(store, r)
            result = await writing.run_round({"A": a, "B": b}, local, r, history_keep=keep)
            _found(out, result.problems)
            out.counts["concurrent: rounds (2 servers + hand editor)"] += 1
            out.counts["concurrent: operations"] += result.calls + result.hand_edits
            out.counts.update({f"concurrent: {k}": v for k, v in result.tally.items()})
            writing.retire_round(store, r)
            n += 1
            if n % 10 == 0:
                _progress(f"writers: {n} rounds")


def noise(root: Path, scale: SoakScale, out: SoakResult) -> None:
    """Pipelined calls against a kernel printing all the while; then servers SIGKILLed with a live kernel."""

    env = servers.write_config(root / "noise", log_level=LOG_LEVEL)
    plugins = Path(env["BIOPB_CONFIG_DIR"]) / "kernel"
    plugins.mkdir()
    (plugins / "noisy.py").write_text(noisy.NOISY_PLUGIN)
    out.counts.update(noisy.pipeline_with_noise(env, root / "noise" / "server.log", scale.calls))
    for k in range(scale.kernel_kills):
        out.counts.update(noisy.kill_with_kernel(env, root / "noise" / f"killed-{k}.log"))


def http(root: Path, scale: SoakScale, out: SoakResult) -> None:
    """Idle half-sent requests under a descriptor limit; then a flood of malformed requests."""
    slow = http_flood.HttpServer(root / "http-slow", nofile=scale.slowloris_nofile)
    try:
        out.counts.update(http_flood.slowloris(slow, scale.slowloris, close_wait=scale.slowloris_close_wait))
    finally:
        slow.stop()
    flood = http_flood.HttpServer(root / "http-flood")
    try:
        out.counts.update(http_flood.malformed_flood(flood, scale.malformed))
    finally:
        flood.stop()


def search(root: Path, scale: SoakScale, out: SoakResult) -> None:
    """Long pasted queries over a generated corpus; then costly queries over a doc of one word."""
    from bench.perf_fixtures import make_tree

    tree = make_tree(
        root / "search", n_files=scale.search_docs, doc_bytes=2_000, index_entries=150, seed=scale.seed + 5
    )
    store = DocStore(tree.docs, search_db=root / "search" / "state" / "search.sqlite3", history_keep=2)
    out.counts.update(
        search_cost.long_queries(store, search_cost.corpus_texts(tree.docs), scale.long_queries, scale.seed + 5)
    )
    out.counts["search: one-word doc written (bytes)"] = search_cost.one_word_doc(store, size=scale.one_word_bytes)
    out.counts.update(search_cost.costly_queries(store, scale.costly_rounds))


def caps(root: Path, scale: SoakScale, out: SoakResult) -> None:
    """Writes at and past the size caps, then every doc and the index checked."""
    store = DocStore(root / "caps" / "docs", history_keep=2)
    counts, problems = size_caps.size_writes(store, scale.size_writes, scale.seed + 6)
    out.counts.update(counts)
    for problem in problems:
        out.found("size caps: docs or index left past a cap or unreadable", problem)


# --------------------------------------------------------------------------- the run


def bounded(root: Path, scale: SoakScale, out: SoakResult, phase: str) -> None:
    """The phases of ``bench.soak.bounds``: names, doc-answers, wide-inputs, edit-memory."""
    import anyio

    if phase == "names":
        counts, problems = bounds.names(root, scale.hostile_names, scale.seed + 7)
    elif phase == "doc-answers":
        counts, problems = anyio.run(bounds.doc_answers, root)
    elif phase == "wide-inputs":
        counts, problems = anyio.run(bounds.wide_inputs, root, scale.wide_inputs)
    else:
        counts, problems = bounds.edit_memory(root, scale.edits, scale.edit_doc_bytes)
    out.counts.update(counts)
    for kind, what in problems:
        out.found(kind, what)


BOUNDED_PHASES = ("names", "doc-answers", "wide-inputs", "edit-memory")

PHASES = (
    "hostile-store",
    "hostile-mcp",
    "crash",
    "writers",
    "noise",
    "http",
    "search",
    "caps",
    *BOUNDED_PHASES,
    *kernel_output.PHASES,
)


def run_soak(scale: SoakScale, workdir: Path | None = None, phases: tuple[str, ...] = PHASES) -> SoakResult:
    """Every phase in a short-named temp root (kernel IPC socket paths must fit in sun_path)."""
    out = SoakResult()
    root = Path(tempfile.mkdtemp(prefix="soak-", dir=workdir or ("/tmp" if Path("/tmp").is_dir() else None)))
    with _quiet_logs():
        _run_phases(root, scale, phases, out)
    for kind in FOUND:
        out.counts.setdefault(kind, 0)
    return out


def _run_phases(root: Path, scale: SoakScale, phases: tuple[str, ...], out: SoakResult) -> None:
    import anyio

    try:
        for phase in phases:
            t0 = time.monotonic()
            _progress(f"{phase} ...")
            if phase == "hostile-store":
                hostile_store(root, scale, out)
            elif phase == "hostile-mcp":
                anyio.run(hostile_mcp, root, scale, out)
            elif phase == "crash":
                crash(root, scale, out)
            elif phase == "writers":
                anyio.run(writers, root, scale, out)
            elif phase == "noise":
                noise(root, scale, out)
            elif phase == "http":
                http(root, scale, out)
            elif phase == "search":
                search(root, scale, out)
            elif phase == "caps":
                caps(root, scale, out)
            elif phase in BOUNDED_PHASES:
                bounded(root, scale, out, phase)
            elif phase in kernel_output.PHASES:
                kernel_output.run_phase(phase, root, scale, out)
            else:
                raise ValueError(f"unknown phase {phase!r}; the phases are {', '.join(PHASES)}")
            out.seconds[phase] = round(time.monotonic() - t0, 1)
            _progress(f"{phase} done in {out.seconds[phase]} s")
        time.sleep(1.0)  # a server that just exited may still be reaping its kernel
        leftovers = servers.processes_under(root)
        for pid in leftovers:
            out.found("orphan processes at the end", f"pid {pid}")
        _kill(leftovers)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _kill(pids: list[int]) -> None:
    """The soak's own leftovers (found under its root), counted already: end them."""
    import psutil

    for pid in pids:
        try:
            psutil.Process(pid).kill()
        except psutil.NoSuchProcess:
            pass


def report(out: SoakResult, wall: float) -> str:
    """Tried rows, then found rows (0 expected) with a few examples of each finding."""
    lines = [f"soak: {wall:.0f} s wall ({', '.join(f'{k} {v:.0f} s' for k, v in out.seconds.items())})", "", "tried:"]
    width = max(len(k) for k in out.counts)
    for key in sorted(k for k in out.counts if k not in FOUND):
        lines.append(f"  {key.ljust(width)}  {out.counts[key]:>8,}")
    lines += ["", "found (0 expected):"]
    for key, meaning in FOUND.items():
        mark = "" if out.counts[key] == 0 else "   <-- " + meaning
        lines.append(f"  {key.ljust(width)}  {out.counts[key]:>8,}{mark}")
        lines += [f"      e.g. {ex}" for ex in out.examples.get(key, [])]
    lines += [
        "",
        f"soak {'FOUND ' + str(out.problems) + ' problem(s)' if out.problems else 'clean: every found count is 0'}",
    ]
    return "\n".join(lines)


def to_json(out: SoakResult, scale: SoakScale, wall: float) -> dict[str, Any]:
    return {
        "scale": asdict(scale),
        "wall_s": round(wall, 1),
        "seconds": out.seconds,
        "counts": dict(out.counts),
        "found": {k: out.counts[k] for k in FOUND},
        "examples": out.examples,
    }


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")
