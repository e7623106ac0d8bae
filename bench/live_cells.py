"""``python -m bench.live_cells``: how soon the agent's cell appears in the scientist's notebook.

A real JupyterLab with real-time collaboration on loopback, one notebook and its kernel made
through the REST API, ``%load_ext biopb_mcp`` run in that kernel, biopb-mcp attached with
``--existing`` over stdio, and jupyter-nbmodel-client in the notebook's room in the browser's
place. Each of ``--calls`` ``execute_code`` calls (a short print) is timed from just before the
call to the moment the room's document holds the new agent cell (its source), and to the moment
it holds the cell's printed output; the call's own round trip is given beside. The room is read
every ``POLL`` seconds, so each figure is late by half of that on average. The load average is
printed before and after: on a shared machine it explains most of the spread.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _tests.support.jupyter_lab import JupyterLab
from biopb_mcp.config.isolated import IsolatedDirs

POLL = 0.002
"""Seconds between two looks at the room's document."""

clock = time.perf_counter


def _agent_cells(doc: Any) -> list[dict[str, Any]]:
    cells = json.loads(json.dumps(doc.as_dict()["cells"]))
    return [c for c in cells if c.get("metadata", {}).get("biopb", {}).get("agent")]


async def _until(doc: Any, check: Any, bound: float = 60.0) -> float:
    deadline = clock() + bound
    while not check(_agent_cells(doc)):
        if clock() > deadline:
            raise TimeoutError("the agent's cell did not appear in the room within 60 s")
        await asyncio.sleep(POLL)
    return clock()


async def measure(root: Path, calls: int) -> dict[str, list[float]]:
    from jupyter_client import BlockingKernelClient
    from jupyter_nbmodel_client import NbModelClient
    from mcp import Client, StdioServerParameters

    dirs = IsolatedDirs.side_by_side(root)
    dirs.config_dir.mkdir()
    dirs.runtime_dir.mkdir(mode=0o700)
    env = dirs.variables()
    lab = JupyterLab(root, env)
    try:
        path = lab.new_notebook("bench.ipynb", [])
        notebook = lab.open_session(path)
        kernel = BlockingKernelClient(connection_file=str(notebook.connection_file))
        kernel.load_connection_file()
        kernel.start_channels(hb=False)
        kernel.wait_for_ready(timeout=90)
        out: list[str] = []
        kernel.execute_interactive(
            "%load_ext biopb_mcp", output_hook=lambda m: out.append(str(m["content"].get("text", ""))), timeout=60
        )
        if "Live:" not in "".join(out):
            raise RuntimeError("the kernel did not go live:\n" + "".join(out))
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "biopb_mcp", "--existing", str(notebook.connection_file)],
            env={**os.environ, **lab.env},
        )
        times: dict[str, list[float]] = {"cell": [], "output": [], "call": []}
        async with NbModelClient(lab.room_url(path)) as doc, Client(params, mode="legacy") as agent:
            await agent.call_tool("start_kernel", {})
            await agent.call_tool("execute_code", {"code": "print('warm up')"})
            await _until(doc, lambda cells: len(cells) == 1 and cells[0]["outputs"])
            for i in range(calls):
                n = i + 2
                start = clock()
                call = asyncio.create_task(agent.call_tool("execute_code", {"code": f"print('call', {i})"}))
                appeared = await _until(doc, lambda cells, n=n: len(cells) >= n)
                shown = await _until(doc, lambda cells, n=n: len(cells) >= n and cells[n - 1]["outputs"])
                await call
                ended = clock()
                times["cell"].append(appeared - start)
                times["output"].append(shown - start)
                times["call"].append(ended - start)
        kernel.stop_channels()
        return times
    finally:
        lab.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.live_cells",
        description="Time from execute_code to the agent's cell in the notebook's room. "
        "Example: python -m bench.live_cells --calls 50",
    )
    parser.add_argument("--calls", type=int, default=50, help="execute_code calls timed (default 50)")
    args = parser.parse_args(argv)
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="biopb-live-bench-") as tmp:
        times = asyncio.run(measure(Path(tmp), args.calls))
    load_after = os.getloadavg()
    print(f"{args.calls} execute_code calls of a short print; the room read every {POLL * 1000:g} ms")
    for name, label in (
        ("cell", "execute_code → the agent's cell in the room"),
        ("output", "execute_code → its printed output in the room"),
        ("call", "execute_code round trip (result back to the agent)"),
    ):
        values = sorted(times[name])
        p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
        print(f"  {label}: median {statistics.median(values) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms")
    print(
        f"load average (1/5/15 min): before {' '.join(f'{v:.2f}' for v in load_before)}, "
        f"after {' '.join(f'{v:.2f}' for v in load_after)}; {os.cpu_count()} cores"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
