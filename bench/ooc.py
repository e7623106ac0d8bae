"""``python -m bench ooc``: the large-image procedure on an image larger than the workers' memory.

Writes a synthetic TIFF (discs of a known size on a 64-px grid over noise, so the true object
count is known), starts a real kernel with ``[compute] scheduler = "local"`` (by default 2
workers x 256 MB, one thread each), runs the shipped ``large-image`` procedure's code blocks in
it, and prints:

* first-use cost: kernel start, ``dask_client()`` starting the local cluster, and a second client
  connecting to that running scheduler by address (the attach path's cost);
* the procedure's time per step and its throughput in MB/s of source image on the cluster,
  beside single-process numpy + scipy doing the same per-pixel work (smooth, threshold, label,
  areas and intensity sums) on a crop that fits in memory: their ratio, and the fraction of the
  machine's floor (cores x the single-process rate) the cluster reached;
* the workers' peak resident memory (sampled), against their limit;
* the objects against the drawn truth: median area against the drawn disc (113 px), median
  intensity against the drawn one;
* the checks: the object count equals the discs drawn, the median area is within 10 % of the
  drawn disc, and on a crop across chunk borders the mask equals the in-memory method's and the
  labels give the same partition.

The machine's load average is printed beside every figure (on a shared machine it explains most
of the spread), and a warning when the 1-minute load passes the core count. Nothing here is
asserted in a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Self

import numpy as np

from _tests.support.disc_grid import (
    DIAMETER,
    DISC_AREA,
    disc_mask,
    expected_objects,
    in_memory,
    same_partition,
    synthetic_patch,
    synthetic_region,
    write_synthetic_tiff,
)

_FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def procedure_blocks(doc: str = "large-image") -> list[str]:
    """The shipped procedure's python code blocks, in order."""
    return [code for _, code in procedure_steps(doc)]


def procedure_steps(doc: str = "large-image") -> list[tuple[str, str]]:
    """The shipped procedure's code blocks, each with the heading of the step it is under."""
    import biopb_mcp

    shipped = Path(biopb_mcp.__file__).parent / "_docs_data"
    text = (shipped / f"{doc}.md").read_text(encoding="utf-8")
    steps = []
    for section in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        title = section.splitlines()[0].split(":")[0]
        steps += [(title, code) for code in _FENCE.findall(section)]
    return steps


class LoadMeter:
    """The load average as printed beside every figure, and the highest 1-minute load it showed.

    On a shared machine the load explains most of the spread: a throughput is never printed
    without it, and a run whose load passed the core count says its figures understate the method.
    """

    def __init__(self) -> None:
        self.peak = 0.0

    def __call__(self) -> str:
        loads = os.getloadavg()
        self.peak = max(self.peak, loads[0])
        return "load {:.1f} {:.1f} {:.1f}".format(*loads)


def load_warning(load: float, cores: int, own: int = 0) -> str | None:
    """What to say when the 1-minute load passed the core count plus the ``own`` busy processes
    the run itself adds (its workers and the kernel: 0 before it starts them), else None."""
    if load <= cores + own:
        return None
    mine = f" (this run's own {own} busy processes included)" if own else ""
    return (
        f"WARNING: the 1-minute load reached {load:.1f} on {cores} cores{mine}: other processes shared "
        f"the CPUs, so these MB/s understate the method; re-run when `uptime` shows a load below {cores}"
    )


def throughput_line(figures: dict[str, Any], blocks: int, compute_s: float, load_now: str) -> str:
    """The throughput figures, with the load they were measured at (never one without the other)."""
    return (
        f"throughput: cluster {figures['cluster_mb_s']:.2f} MB/s (code blocks 2-{blocks}, {compute_s:.1f} s; "
        f"{figures['with_copy_mb_s']:.2f} MB/s with the TIFF copy) vs single-process numpy "
        f"{figures['numpy_mb_s']:.2f} MB/s on a {figures['numpy_crop_mb']:.0f} MB crop: "
        f"{figures['cluster_mb_s'] / figures['numpy_mb_s']:.2f}x one process, "
        f"{figures['cluster_mb_s'] / (figures['cores'] * figures['numpy_mb_s']):.0%} of the machine's floor "
        f"({figures['cores']} cores x the single-process rate) ({load_now})"
    )


class PeakRss:
    """Samples the resident memory of a process's children (the workers) in a thread."""

    def __init__(self, pid: int, period: float = 0.25) -> None:
        self.pid, self.period = pid, period
        self.peak: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ooc-rss", daemon=True)

    def _run(self) -> None:
        import psutil

        parent = psutil.Process(self.pid)
        while not self._stop.wait(self.period):
            for child in parent.children(recursive=True):
                try:
                    if "spawn_main" not in " ".join(child.cmdline()):
                        continue
                    rss = child.memory_info().rss
                except psutil.Error:
                    continue
                self.peak[child.pid] = max(rss, self.peak.get(child.pid, 0))

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run(
    side_px: int, workers: int, memory_limit: str, workdir: Path, crop_px: int, threads: int = 1, out: Any = print
) -> dict[str, Any]:
    """One out-of-core run; returns the figures and checks as JSON-able data."""
    from biopb_mcp.config.settings import load_settings
    from biopb_mcp.kernel import KernelHost
    from biopb_mcp.text.kernel import rendered_text

    figures: dict[str, Any] = {
        "side_px": side_px,
        "workers": workers,
        "threads_per_worker": threads,
        "memory_limit": memory_limit,
    }
    load = LoadMeter()
    figures["load_at_start"] = load()
    busy = load_warning(load.peak, os.cpu_count() or 1)
    if busy:
        out(f"{busy} (at the start)")
    patch = synthetic_patch()
    source = workdir / "big.tif"
    t = time.perf_counter()
    write_synthetic_tiff(source, side_px, patch)
    mb = side_px * side_px / 1e6
    figures["image_mb"] = mb
    out(
        f"synthetic TIFF {side_px} x {side_px} uint8: {source.stat().st_size / 1e6:.0f} MB on disk, "
        f"written in {time.perf_counter() - t:.1f} s ({load()})"
    )

    cdir = workdir / "config"
    cdir.mkdir()
    (cdir / "config.toml").write_text(
        f'[server]\nstate_dir = "{workdir / "state"}"\nruntime_dir = "{workdir / "rt"}"\n'
        "[kernel]\nrequest_timeout = 60.0\n"
        f'[compute]\nscheduler = "local"\nworkers = {workers}\nthreads_per_worker = {threads}\n'
        f'memory_limit = "{memory_limit}"\nconnect_timeout = 60.0\n',
        encoding="utf-8",
    )
    host = KernelHost(load_settings(cdir))

    def kernel(code: str, timeout: float = 7200.0) -> str:
        ex = host.jobs.submit(code)
        if not host.jobs.wait(ex, timeout):
            raise RuntimeError(f"still running after {timeout:g} s: {code[:200]}")
        text = rendered_text(host.jobs.render(ex))
        if ex.status != "ok":
            raise RuntimeError(f"{ex.status}: {code[:300]}\n---\n{text[-3000:]}")
        return text

    def timed(name: str, code: str) -> str:
        t0 = time.perf_counter()
        text = kernel(code)
        figures[name] = round(time.perf_counter() - t0, 2)
        out(f"  {name}: {figures[name]:.1f} s ({load()})")
        return text

    t = time.perf_counter()
    host.start()
    try:
        figures["kernel_start_s"] = round(time.perf_counter() - t, 2)
        out(f"first use ({load()}):\n  kernel start: {figures['kernel_start_s']:.2f} s")
        timed("cluster_start_s", "_c = dask_client()")
        timed(
            "connect_s", "from distributed import Client as _C\n_c2 = _C(_c.scheduler.address, timeout=60)\n_c2.close()"
        )
        kernel(
            f"source_path = {str(source)!r}\nobject_diameter_px = {DIAMETER}\n"
            f"out_path = {str(workdir / 'labels.zarr')!r}"
        )
        steps = procedure_steps()
        blocks = [code for _, code in steps]
        out("procedure steps (block 1 copies a TIFF to zarr; the throughput counts the blocks after it):")
        with PeakRss(int(host.status().pid or 0)) as rss:
            for number, (title, block) in enumerate(steps, start=1):
                out(f"  block {number}: {title}")
                text = timed(f"block{number}_s", block)
                if text.strip() != "(no output)":
                    out("    " + text.strip().splitlines()[-1])
        figures["worker_peak_rss_mb"] = sorted(round(v / 1e6) for v in rss.peak.values())
        got = json.loads(
            kernel(
                "print(__import__('json').dumps({'n_objects': int(n_objects), 'chunk_px': int(chunk_px), "
                "'threshold': float(threshold), 'sigma': float(sigma), 'limit': [w['memory_limit'] for w "
                "in _c.scheduler_info()['workers'].values()], 'median_area': float(np.median(areas)), "
                "'median_intensity': float(np.median(intensities)), 'total_area': int(areas.sum())}))"
            )
            .strip()
            .splitlines()[-1]
        )
        chunk = got["chunk_px"]
        # a crop around a corner where four chunks meet, clear of the image's edges
        corner = chunk * (-(-crop_px // (2 * chunk)) + 1)
        y0 = x0 = corner - crop_px // 2
        if y0 + crop_px > side_px:
            raise ValueError(f"--crop-px {crop_px} does not fit around a chunk corner of a {side_px}-px image")
        crop = np.s_[y0 : y0 + crop_px, x0 : x0 + crop_px]
        crop_file = workdir / "crop.npy"
        kernel(f"np.save({str(crop_file)!r}, zarr.open_array(str(out_path))[{y0}:{y0 + crop_px}, {x0}:{x0 + crop_px}])")
        cluster_labels = np.load(crop_file)
    finally:
        host.shutdown()

    limit_mb = sum(got["limit"]) / 1e6
    compute_s = sum(figures[f"block{n}_s"] for n in range(2, len(blocks) + 1))
    figures.update(
        chunk_px=chunk,
        workers_total_limit_mb=round(limit_mb),
        compute_s=round(compute_s, 2),
        cluster_mb_s=round(mb / compute_s, 2),
        with_copy_mb_s=round(mb / (compute_s + figures["block1_s"]), 2),
    )

    # single process: the same steps on a crop that fits (the TIFF holds exactly these pixels)
    region = synthetic_region(patch, crop[0], crop[1])
    t = time.perf_counter()
    reference = in_memory(region, got["sigma"], got["threshold"])
    inside = np.flatnonzero(reference)  # areas and intensity sums, as the procedure measures them
    np.bincount(reference.ravel()[inside])
    np.bincount(reference.ravel()[inside], weights=region.ravel()[inside])
    numpy_s = time.perf_counter() - t
    figures["numpy_crop_mb"] = round(region.nbytes / 1e6, 1)
    figures["numpy_mb_s"] = round(region.nbytes / 1e6 / numpy_s, 2)
    margin = int(np.ceil(4 * got["sigma"])) + 1
    inner = np.s_[margin:-margin, margin:-margin]
    figures["objects_expected"] = expected_objects((side_px, side_px))
    figures["median_area"] = got["median_area"]
    figures["area_ok"] = abs(got["median_area"] - DISC_AREA) <= 0.1 * DISC_AREA
    figures["median_intensity"] = got["median_intensity"]
    drawn_intensity = float(np.median(patch[disc_mask(patch.shape)]))
    figures["drawn_intensity"] = drawn_intensity
    figures["total_area"] = got["total_area"]
    figures["cores"] = os.cpu_count() or 1
    figures["objects_found"] = got["n_objects"]
    figures["crop_mask_equal"] = bool(np.array_equal(cluster_labels[inner] > 0, reference[inner] > 0))
    figures["crop_partition_equal"] = same_partition(cluster_labels[inner], reference[inner])
    figures["load"] = os.getloadavg()

    out(
        f"workers' peak RSS (sampled every 0.25 s): {figures['worker_peak_rss_mb']} MB, limit "
        f"{limit_mb / workers:.0f} MB each, {limit_mb:.0f} MB in all; image {mb:.0f} MB, "
        f"labels (int32) {4 * mb:.0f} MB; chunks {chunk} px"
    )
    out(throughput_line(figures, len(blocks), compute_s, load()))
    figures["load_peak"] = round(load.peak, 1)
    # the run's own load: its workers and the kernel (which runs the scheduler and the steps)
    warning = load_warning(load.peak, os.cpu_count() or 1, own=workers + 1)
    if warning:
        out(warning)
    out(
        f"areas against the drawn truth: median area {got['median_area']:.0f} px (drawn disc {DISC_AREA} px, "
        f"{got['median_area'] / DISC_AREA - 1:+.1%}); median object intensity {got['median_intensity']:.1f} "
        f"(drawn {drawn_intensity:.1f}); threshold {got['threshold']:.1f}"
    )
    out(
        f"checks: objects {got['n_objects']} (drawn {figures['objects_expected']}); crop "
        f"{crop_px} px across chunk borders: mask equal {figures['crop_mask_equal']}, "
        f"partition equal {figures['crop_partition_equal']}"
    )
    return figures


def _handler(args: argparse.Namespace) -> int:
    if args.open_image:
        from bench.ooc_open import handle

        return handle(args.side_px if args.side_px != 32768 else 4096, args.depth, args.workdir, args.json)
    with tempfile.TemporaryDirectory(prefix="bench-ooc-", dir=args.workdir) as tmp:
        figures = run(args.side_px, args.workers, args.memory_limit, Path(tmp), args.crop_px, args.threads_per_worker)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    ok = (
        figures["objects_found"] == figures["objects_expected"]
        and figures["area_ok"]
        and figures["crop_mask_equal"]
        and figures["crop_partition_equal"]
    )
    print("ooc " + ("passed" if ok else "FAILED: see the checks above"))
    return 0 if ok else 1


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ooc`` to ``python -m bench``."""
    p = sub.add_parser(
        "ooc",
        help="the large-image procedure on an image larger than the workers' memory",
        description="Example: python -m bench ooc --side-px 32768 --memory-limit 256MB",
    )
    p.add_argument(
        "--side-px",
        type=int,
        default=32768,
        help="side of the square uint8 image, a multiple of 1024 (default 32768: 1.07 GB)",
    )
    p.add_argument("--workers", type=int, default=2, help="local workers (default 2, one thread each)")
    p.add_argument(
        "--threads-per-worker", type=int, default=1, help="threads in each worker (default 1; try 1 worker x 2)"
    )
    p.add_argument("--memory-limit", default="256MB", help="memory limit per worker (default 256MB)")
    p.add_argument("--crop-px", type=int, default=4096, help="side of the crop compared in memory (default 4096)")
    p.add_argument("--json", type=Path, default=None, help="also write the figures as JSON to FILE")
    p.add_argument("--workdir", type=Path, default=None, help="where the temp root goes (default: the system temp dir)")
    p.add_argument(
        "--open-image",
        action="store_true",
        help="instead: open_image on a > 2 GB OME-Zarr (repr time and kernel memory), and a max projection over Z "
        "through it beside the store's raw chunk-read rate (--side-px default 4096 there)",
    )
    p.add_argument(
        "--depth", type=int, default=64, help="--open-image: z planes (default 64: 4096 x 4096 x 64 = 2.1 GB)"
    )
    p.set_defaults(handler=_handler)
