"""``python -m bench.first_cell``: how long the first analysis cell takes, with and without the
kernel's background imports (``kernel.warm_imports``).

Each round starts one in-process server per arm (warm imports off = ``[]``, on = the default
list), each with its own real kernel, through a real client session: ``start_kernel`` (timed),
then a pause standing for the agent reading the docs (``--think`` seconds), then the first
``execute_code`` of a segmentation procedure (numpy, scipy.ndimage, five scikit-image modules and a
threshold on a small image), followed to its end with ``poll_job`` if it became a job. The arms
alternate within a round so machine noise hits both alike. ``--busy N`` runs N processes that
spin the CPU for the whole measurement, to state the load the figures were taken at; the load
average is printed before and after.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

clock = time.perf_counter

FIRST_CELL = (
    "import numpy as np\n"
    "from scipy import ndimage as ndi\n"
    "from skimage import feature, filters, measure, morphology, segmentation\n"
    "img = ndi.gaussian_filter(np.random.default_rng(0).random((256, 256)), 2)\n"
    "print(round(float(filters.threshold_otsu(img)), 3))\n"
)


def _settings(root: Path, warm: bool) -> Any:
    from biopb_mcp.config.settings import load_settings

    cdir = root / "config"
    cdir.mkdir(parents=True)
    lines = [
        f'[server]\nstate_dir = "{root / "state"}"\nruntime_dir = "{root / "rt"}"\n',
        "[record]\nenabled = false\n",
    ]
    if not warm:
        lines.append("[kernel]\nwarm_imports = []\n")
    (cdir / "config.toml").write_text("".join(lines), encoding="utf-8")
    return load_settings(cdir)


async def _one(root: Path, warm: bool, think: float) -> dict[str, float | bool]:
    import anyio
    from mcp import Client
    from mcp.types import TextContent

    from biopb_mcp.server import build_server
    from biopb_mcp.text.kernel import parse_job_line

    def text(result: Any) -> str:
        return "\n".join(b.text for b in result.content if isinstance(b, TextContent))

    mcp, state = build_server(_settings(root, warm))
    try:
        async with Client(mcp) as client:
            t0 = clock()
            await client.call_tool("start_kernel", {})
            start_s = clock() - t0
            await anyio.sleep(think)
            t0 = clock()
            result = await client.call_tool("execute_code", {"code": FIRST_CELL})
            line = parse_job_line(text(result))
            inline = not (line is not None and line.running)
            while line is not None and line.running:
                await anyio.sleep(0.1)
                result = await client.call_tool("poll_job", {"job_id": line.job_id})
                line = parse_job_line(text(result))
            cell_s = clock() - t0
            if result.is_error:
                raise RuntimeError(text(result))
            return {"start_s": start_s, "cell_s": cell_s, "inline": inline}
    finally:
        state.kernel.shutdown()


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.first_cell", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each starts one kernel per arm (default 3)")
    parser.add_argument("--think", type=float, default=3.0, help="seconds between start_kernel and the cell (3)")
    parser.add_argument("--busy", type=int, default=0, help="CPU-spinning processes to run meanwhile (0)")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    import anyio

    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL) for _ in range(args.busy)
    ]
    results: dict[bool, list[dict[str, float | bool]]] = {False: [], True: []}
    try:
        print(f"before: {_load()}; {args.busy} spinning processes", flush=True)
        with tempfile.TemporaryDirectory(prefix="biopb-first-cell-") as tmp:
            for r in range(args.rounds):
                for warm in (False, True) if r % 2 == 0 else (True, False):
                    one = anyio.run(_one, Path(tmp) / f"{r}-{warm}", warm, args.think)
                    results[warm].append(one)
                    print(f"round {r + 1} warm={'on ' if warm else 'off'}: {one}", flush=True)
        print(f"after: {_load()}", flush=True)
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()
    print(
        f"\nfirst execute_code (numpy, scipy.ndimage, 5 skimage modules), think time {args.think:g} s, "
        f"{args.busy} spinning processes, {args.rounds} rounds:"
    )
    for warm in (False, True):
        rows = results[warm]
        cell = statistics.median(float(x["cell_s"]) for x in rows)
        start = statistics.median(float(x["start_s"]) for x in rows)
        inline = sum(bool(x["inline"]) for x in rows)
        print(
            f"  warm imports {'on ' if warm else 'off'}: cell median {cell:.2f} s "
            f"(min {min(float(x['cell_s']) for x in rows):.2f}, max {max(float(x['cell_s']) for x in rows):.2f}), "
            f"start_kernel median {start:.2f} s, answered inline {inline}/{len(rows)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
