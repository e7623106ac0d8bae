"""Shared plumbing for the procedure tests: run a shipped doc's python blocks in a real kernel.

A test sets the variables a doc's Inputs section names, runs the doc's blocks in order in one
kernel (shared per test module, namespace reset per run), and reads back what its Produces
section names, to compare with generated truth.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import ndimage as ndi

from _tests.support import seedlib

DOCS_ENV = "BIOPB_SWEEP_DOCS"
"""Optional folder to read the procedure docs from instead of the package (e.g. an older release's
docs, to tabulate old against new on the same conditions)."""

Inputs = dict[str, Any]
Outputs = dict[str, np.ndarray]


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[seedlib.KernelRunner]:
    """One kernel for the module; each procedure starts from an empty namespace (%reset -f)."""
    runner = seedlib.KernelRunner(tmp_path_factory.mktemp("kernel"))
    try:
        # a procedure that calls a deprecated API fails here, not only in a user's future upgrade
        runner.run(
            "import warnings as _w\n"
            "_w.simplefilter('error', DeprecationWarning)\n"
            "_w.simplefilter('error', FutureWarning)\n"
            "del _w"
        )
        yield runner
    finally:
        runner.shutdown()


def run_doc(
    kernel: seedlib.KernelRunner,
    doc_id: str,
    inputs: Inputs,
    produces: list[str],
    workdir: Path,
    edit: Callable[[str], str] | None = None,
) -> Outputs:
    """Set `inputs` in a fresh namespace, run the doc's blocks in order, return `produces`.

    A procedure saves through the kernel's preloaded helpers (no other doc runs first), which put
    files beside `source_path` (default: a file in `workdir`).
    """
    kernel.reset()
    if doc_id != "outputs":
        inputs = {"source_path": str(workdir / "raw.tif"), **inputs}
    arrays: dict[str, Any] = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray)}
    in_file = workdir / f"{doc_id}-inputs.npz"
    np.savez(in_file, **arrays)
    lines = ["import numpy as _np", f"_d = _np.load({str(in_file)!r})"]
    for name, value in inputs.items():
        lines.append(f"{name} = _d[{name!r}]" if name in arrays else f"{name} = {value!r}")
    lines.append("del _np, _d")
    kernel.run("\n".join(lines))
    folder = os.environ.get(DOCS_ENV)
    text = seedlib.read(doc_id, Path(folder)) if folder else seedlib.read(doc_id)
    if edit is not None:
        text = edit(text)
    blocks = seedlib.code_blocks(text)
    assert blocks, f"{doc_id} has no python blocks"
    images = 0
    for block in blocks:
        kernel.run(block)
        images += len(kernel.last_images)
    out_file = workdir / f"{doc_id}-outputs.npz"
    kernel.run(
        "import numpy as _np\n"
        f"_np.savez({str(out_file)!r}, **{{k: _np.asarray(globals()[k]) for k in {produces!r}}})\n"
        "del _np"
    )
    with np.load(out_file, allow_pickle=True) as data:  # our own file; Path values are objects
        result = {k: data[k] for k in data.files}
    result["_images_shown"] = np.asarray(images)
    return result


def replace_once(old: str, new: str) -> Callable[[str], str]:
    """An edit that replaces exactly one occurrence (so a doc change cannot make it a silent no-op)."""

    def edit(text: str) -> str:
        assert text.count(old) == 1, f"core line not found once: {old!r}"
        return text.replace(old, new)

    return edit


def disc(shape: tuple[int, int], center: tuple[float, float], radius: float) -> np.ndarray:
    yy, xx = np.ogrid[: shape[0], : shape[1]]
    return (yy - center[0]) ** 2 + (xx - center[1]) ** 2 <= radius**2


def scatter(
    rng: np.random.Generator,
    n: int,
    shape: tuple[int, int],
    sep: float,
    border: float,
    taken: list[tuple[float, float]] | None = None,
) -> list[tuple[float, float]]:
    """n random points at least `sep` apart and `border` from the edge."""
    pts: list[tuple[float, float]] = list(taken or [])
    start = len(pts)
    for _ in range(200_000):
        p = (rng.uniform(border, shape[0] - border), rng.uniform(border, shape[1] - border))
        if all(math.dist(p, q) >= sep for q in pts):
            pts.append(p)
            if len(pts) - start == n:
                return pts[start:]
    raise RuntimeError("could not place points")


def texture(rng: np.random.Generator, shape: tuple[int, int], sigma: float = 2.0) -> np.ndarray:
    t = ndi.gaussian_filter(rng.normal(size=shape), sigma)
    return (t - t.mean()) / t.std()
