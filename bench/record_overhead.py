"""``python -m bench.record_overhead``: what the session notebook adds to an ``execute_code`` call,
and whether that grows with the session's length.

Two in-process servers, one recording (``[record] enabled = true``) and one not, each with its own
kernel, answer the same ``execute_code`` calls (by default a 2 kB print) through real client
sessions, one call each in turn, so machine noise hits both alike. The session grows by one cell a
call; the report gives, per window of calls (cells 1–100, 101–200, …), the median of each server
and their difference: flat differences mean recording costs the same at cell 1,000 as at cell 1
(target: within 0.5 ms of recording off at 1,000 cells). The notebook is written on a writer
thread, so what shows is the recording's cost on the call's path plus whatever the writer takes
from the call (CPU, the GIL) while it works.

The script also times the on-path work alone (the collector fed a call's messages, then the cell
queued) with the writer running: on a loaded machine the two medians drift by more than that.
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

DEFAULT_CODE = "print('x' * 2000)"
"""A 2 kB print: the size of an ordinary cell's output."""


def _settings(root: Path, record: bool) -> Any:
    from biopb_mcp.config.settings import load_settings

    cdir = root / "config"
    cdir.mkdir(parents=True)
    (cdir / "config.toml").write_text(
        f'[server]\nstate_dir = "{root / "state"}"\nruntime_dir = "{root / "rt"}"\n'
        f"[record]\nenabled = {'true' if record else 'false'}\n",
        encoding="utf-8",
    )
    return load_settings(cdir)


async def _measure(root: Path, cells: int, code: str) -> dict[str, list[float]]:
    from mcp import Client

    from biopb_mcp.server import build_server

    samples: dict[str, list[float]] = {"on": [], "off": []}
    servers = {name: build_server(_settings(root / name, name == "on")) for name in samples}
    try:
        async with Client(servers["on"][0], mode="legacy") as on, Client(servers["off"][0], mode="legacy") as off:
            clients = {"on": on, "off": off}
            for client in clients.values():
                await client.call_tool("start_kernel", {})
                for _ in range(10):  # warm up (these cells count in the session's length)
                    await client.call_tool("execute_code", {"code": "1+1"})
            for _ in range(cells):
                for name, client in clients.items():
                    t0 = clock()
                    result = await client.call_tool("execute_code", {"code": code})
                    samples[name].append((clock() - t0) * 1000)
                    assert not result.is_error
    finally:
        for _, state in servers.values():
            state.kernel.shutdown()
            if state.kernel.recorder is not None:
                state.kernel.recorder.close()
    return samples


def _direct_us(root: Path, reps: int, text: str) -> float:
    """Median microseconds of the recording work one call printing ``text`` does on its own path."""
    from biopb_mcp.kernel.notebook import SessionRecorder

    rec = SessionRecorder(root / "direct")
    rec.start_notebook(kernel_name="python3", display_name="Python", about="bench")
    messages: list[tuple[str, dict[str, Any]]] = [
        ("status", {"execution_state": "busy"}),
        ("execute_input", {"code": "print()", "execution_count": 1}),
        ("stream", {"name": "stdout", "text": text}),
        ("status", {"execution_state": "idle"}),
    ]
    samples = []
    for n in range(reps):
        t0 = clock()
        collector = rec.collector()
        for kind, content in messages:
            collector.add(kind, content)
        rec.code_cell("print()", collector, {"job_id": f"job-{n}", "status": "ok", "seconds": 0.001, "promoted": False})
        samples.append((clock() - t0) * 1e6)
        time.sleep(0.002)  # calls come one at a time: let the writer catch up as it would
    rec.close()
    return statistics.median(samples)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.record_overhead",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cells", type=int, default=1000, help="calls per server, one cell each (default 1000)")
    parser.add_argument("--window", type=int, default=100, help="calls per reported window (default 100)")
    parser.add_argument("--code", default=DEFAULT_CODE, help=f"the code each call runs (default {DEFAULT_CODE!r})")
    args = parser.parse_args(argv)
    import anyio

    logging.disable(logging.INFO)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="biopb-record-bench-") as tmp:
        os.environ.setdefault("MPLBACKEND", "Agg")
        samples = anyio.run(_measure, Path(tmp), args.cells, args.code)
    on, off = samples["on"], samples["off"]
    print(f"execute_code({args.code!r}), {len(on)} calls each, in-process client sessions, alternating")
    print(f"{'cells':>11}  {'on (ms)':>8}  {'off (ms)':>8}  {'added (ms)':>10}")
    for start in range(0, len(on), args.window):
        w_on, w_off = on[start : start + args.window], off[start : start + args.window]
        m_on, m_off = statistics.median(w_on), statistics.median(w_off)
        print(f"{start + 1:>5}-{start + len(w_on):<5}  {m_on:8.3f}  {m_off:8.3f}  {m_on - m_off:+10.3f}")
    for name, values in samples.items():
        print(f"  recording {name:<3}: median {statistics.median(values):.3f} ms, p95 {_p95(values):.3f} ms")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="biopb-record-bench-") as tmp:
        direct = _direct_us(Path(tmp), min(args.cells, 400), "x" * 2000 + "\n")
    print(f"  recording work on the call's path alone: median {direct:.1f} us per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
