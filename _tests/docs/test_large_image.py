"""The large-image procedure, run chunk-wise in a real kernel: seams absent, equal on a crop.

It runs on dask's threads in the kernel (``[compute] scheduler = "none"``): dask-image's
labelling is slow on a local cluster of a shared 2-core machine, and the suite's time budget
is small. The cluster itself is tested in _tests/kernel/test_compute.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tifffile
from scipy import ndimage as ndi

from _tests.support import seedlib
from biopb_mcp.config import load_settings
from biopb_mcp.kernel import KernelHost

PATCH = 4096
"""The synthetic image repeats one patch; 2048-px chunks split it, and 64-px disc spacing puts
a row and a column of discs on every chunk border."""
SHAPE = (PATCH, PATCH)
SPACING, DIAMETER = 64, 12


def synthetic_patch() -> np.ndarray:
    rng = np.random.default_rng(7)
    patch = rng.normal(20, 3, (PATCH, PATCH))
    yy, xx = np.mgrid[:PATCH, :PATCH]
    dy, dx = (yy + SPACING // 2) % SPACING - SPACING // 2, (xx + SPACING // 2) % SPACING - SPACING // 2
    patch[dy**2 + dx**2 <= (DIAMETER / 2) ** 2] += 100  # discs centred on every multiple of 64
    return np.clip(patch, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelHost]:
    root = tmp_path_factory.mktemp("large")
    cdir = root / "config"
    cdir.mkdir()
    (cdir / "config.toml").write_text(
        f'[server]\nstate_dir = "{root / "state"}"\nruntime_dir = "{root / "rt"}"\n'
        "[kernel]\nrequest_timeout = 20.0\n",
        encoding="utf-8")
    h = KernelHost(load_settings(cdir))
    h.start()
    try:
        yield h
    finally:
        h.shutdown()


def run(host: KernelHost, code: str) -> str:
    ex = host.submit(code)
    assert host.wait(ex, 240), f"still running: {code[:200]}"
    text = host.render(ex).text
    assert ex.status == "ok", f"{code[:2000]}\n---\n{text}"
    return text


def test_large_image_labels_chunk_wise_without_seams_and_equal_to_in_memory(
    host: KernelHost, tmp_path: Path
) -> None:
    patch = synthetic_patch()
    source = tmp_path / "big.tif"
    image = np.tile(patch, (SHAPE[0] // PATCH, SHAPE[1] // PATCH))
    tifffile.imwrite(source, image, tile=(1024, 1024))
    run(host, f"source_path = {str(source)!r}\nobject_diameter_px = {DIAMETER}\n"
              f"out_path = {str(tmp_path / 'labels.zarr')!r}")
    for block in seedlib.code_blocks(seedlib.read("large-image")):
        run(host, block)
    assert run(host, "print(client)").strip() == "None"  # no cluster configured: kernel threads

    # seams absent: every disc once, including the rows and columns of discs on chunk borders
    # (discs are centred on every multiple of 64, so the far edges hold a half row and column)
    expected = (SHAPE[0] // SPACING + 1) * (SHAPE[1] // SPACING + 1)
    got = json.loads(run(host, "print(__import__('json').dumps([n_objects, int(areas.min()), "
                                "int(np.median(areas))]))").strip().splitlines()[-1])
    assert got[0] == expected
    disc_area = int(np.count_nonzero(patch[SPACING:2 * SPACING, SPACING:2 * SPACING] > 70))
    assert disc_area <= got[2] <= 3 * disc_area  # smoothing widens a disc; a split one is smaller

    # equal on a crop (across a chunk border) to the in-memory method
    y0, x0, size = 2048 - 300, 4096 - 300, 600
    crop_file = tmp_path / "crop.npz"
    run(host, f"np.savez({str(crop_file)!r}, smoothed=smoothed[{y0}:{y0 + size}, {x0}:{x0 + size}].compute(), "
              f"labels=labels[{y0}:{y0 + size}, {x0}:{x0 + size}].compute(), threshold=threshold, sigma=sigma)")
    with np.load(crop_file) as got_crop:
        sigma, threshold = float(got_crop["sigma"]), float(got_crop["threshold"])
        margin = int(np.ceil(4 * sigma)) + 1
        reference = ndi.gaussian_filter(image[y0:y0 + size, x0:x0 + size].astype(np.float32), sigma)
        inner = np.s_[margin:-margin, margin:-margin]
        np.testing.assert_allclose(got_crop["smoothed"][inner], reference[inner], rtol=1e-5, atol=1e-3)
        np.testing.assert_array_equal(got_crop["labels"][inner] > 0, (reference > threshold)[inner])
