"""``python -m bench.record_overhead``: what the session notebook adds to an ``execute_code`` call.

Two in-process servers, one recording (``[record] enabled = true``) and one not, each with its own
kernel, answer ``execute_code("1+1")`` through a real client session, in alternating blocks so
machine noise hits both alike. Prints the median and p95 of each and the median difference
(target: at most 1 ms added). The notebook is written on a writer thread, so what is measured is
the recording's cost on the call's path: collecting outputs and queueing the cell. On a loaded
machine the two medians drift by more than that cost, so the script also times the on-path work
alone (the collector fed a ``1+1`` call's messages, then the cell queued) with the writer running.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

clock = time.perf_counter


def _settings(root: Path, record: bool) -> Any:
    from biopb_mcp.config import load_settings

    cdir = root / "config"
    cdir.mkdir(parents=True)
    (cdir / "config.toml").write_text(
        f'[server]\nstate_dir = "{root / "state"}"\nruntime_dir = "{root / "rt"}"\n'
        f"[record]\nenabled = {'true' if record else 'false'}\n",
        encoding="utf-8",
    )
    return load_settings(cdir)


async def _measure(root: Path, reps: int, block: int) -> dict[str, list[float]]:
    from mcp import Client

    from biopb_mcp.server import build_server

    samples: dict[str, list[float]] = {"on": [], "off": []}
    servers = {name: build_server(_settings(root / name, name == "on")) for name in samples}
    try:
        async with Client(servers["on"][0], mode="legacy") as on, Client(servers["off"][0], mode="legacy") as off:
            clients = {"on": on, "off": off}
            for client in clients.values():
                await client.call_tool("start_kernel", {})
                for _ in range(20):  # warm up
                    await client.call_tool("execute_code", {"code": "1+1"})
            done = 0
            while done < reps:
                for name, client in clients.items():
                    for _ in range(block):
                        t0 = clock()
                        result = await client.call_tool("execute_code", {"code": "1+1"})
                        samples[name].append((clock() - t0) * 1000)
                        assert not result.is_error
                done += block
    finally:
        for _, state in servers.values():
            state.kernel.shutdown()
            if state.kernel.recorder is not None:
                state.kernel.recorder.close()
    return samples


def _direct_us(root: Path, reps: int) -> float:
    """Median microseconds of the recording work a ``1+1`` call does on its own path."""
    from biopb_mcp.record import SessionRecorder

    rec = SessionRecorder(root / "direct")
    rec.start_notebook(kernel_name="python3", display_name="Python", about="bench")
    messages: list[tuple[str, dict[str, Any]]] = [
        ("status", {"execution_state": "busy"}),
        ("execute_input", {"code": "1+1", "execution_count": 1}),
        ("execute_result", {"data": {"text/plain": "2"}, "metadata": {}, "execution_count": 1}),
        ("status", {"execution_state": "idle"}),
    ]
    samples = []
    for n in range(reps):
        t0 = clock()
        collector = rec.collector()
        for kind, content in messages:
            collector.add(kind, content)
        rec.code_cell("1+1", collector, {"job_id": f"job-{n}", "status": "ok", "seconds": 0.001, "promoted": False})
        samples.append((clock() - t0) * 1e6)
        time.sleep(0.002)  # calls come one at a time: let the writer catch up as it would
    rec.close()
    return statistics.median(samples)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.record_overhead", description=__doc__)
    parser.add_argument("--reps", type=int, default=400, help="calls per server (default 400)")
    parser.add_argument("--block", type=int, default=1, help="calls per block before switching server")
    args = parser.parse_args(argv)
    import anyio

    logging.disable(logging.INFO)
    with tempfile.TemporaryDirectory(prefix="biopb-record-bench-") as tmp:
        os.environ.setdefault("MPLBACKEND", "Agg")
        samples = anyio.run(_measure, Path(tmp), args.reps, args.block)
    on, off = samples["on"], samples["off"]
    print(f"execute_code('1+1'), {len(on)} calls each, in-process client session")
    for name, values in samples.items():
        print(f"  recording {name:<3}: median {statistics.median(values):.3f} ms, p95 {_p95(values):.3f} ms")
    added = statistics.median(on) - statistics.median(off)
    print(f"  added by recording (median on - median off): {added:+.3f} ms (target <= 1 ms)")
    with tempfile.TemporaryDirectory(prefix="biopb-record-bench-") as tmp:
        direct = _direct_us(Path(tmp), args.reps)
    print(f"  recording work on the call's path alone: median {direct:.1f} us per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
