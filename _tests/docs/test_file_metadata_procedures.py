"""The procedures read the file's own facts through open_image: given only the path of an OME-TIFF
with physical sizes and named channels, the data reference, segment-nuclei and measure-labels run
as written save areas in µm² (no pixel size passed), and a file without them gives pixels."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import tifffile
from scipy import ndimage as ndi

from _tests.support import seedlib

pytestmark = pytest.mark.slow

PIXEL_UM = 0.1083


def nuclei_file(path: Path, pixel_um: float | None) -> np.ndarray:
    """A GFP + DAPI OME-TIFF of separate round nuclei; returns the nuclei's true labels."""
    rng = np.random.default_rng(5)
    shape = (240, 240)
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    truth = np.zeros(shape, np.int32)
    for k, (y, x) in enumerate([(40 + 55 * i, 40 + 55 * j) for i in range(4) for j in range(4)], start=1):
        r = rng.uniform(10, 14)
        truth[(yy - y) ** 2 + (xx - x) ** 2 <= r * r] = k
    dapi = ndi.gaussian_filter(np.where(truth > 0, 1500.0, 0.0), 1.0) + 200
    gfp = np.full(shape, 300.0)  # a dim, flat other channel: segmenting it finds nothing
    stack = np.stack([gfp, dapi]) + rng.normal(0, 10, (2, *shape))
    meta: dict[str, object] = {"axes": "CYX", "Channel": {"Name": ["GFP", "DAPI"]}}
    if pixel_um is not None:
        meta.update(PhysicalSizeX=pixel_um, PhysicalSizeY=pixel_um)
    tifffile.imwrite(path, np.clip(stack, 0, 65535).astype(np.uint16), metadata=meta)
    return truth


def run_model_free(kernel: seedlib.KernelRunner, path: Path) -> tuple[list[dict[str, str]], str]:
    """The docs as written, in one namespace; the glue only names the file and hands one doc's
    outputs to the next, as a model following them would."""
    kernel.reset()
    kernel.run(f"path = {str(path)!r}\nsource_path = path")
    for block in seedlib.code_blocks(seedlib.read("data")):
        kernel.run(block)
    kernel.run("image = plane\nnucleus_diameter_px = None\nexclude_edge = False\npixel_size_um = None")
    for doc in ("outputs", "segment-nuclei"):
        for block in seedlib.code_blocks(seedlib.read(doc)):
            kernel.run(block)
    printed = "".join(kernel.run(block) for block in seedlib.code_blocks(seedlib.read("measure-labels")))
    csv_path = kernel.run("print(csv_path)").strip()
    with open(csv_path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh)), printed


def test_segment_and_measure_save_areas_in_um2_read_from_the_file(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    truth = nuclei_file(tmp_path / "nuclei.ome.tif", PIXEL_UM)
    rows, printed = run_model_free(kernel, tmp_path / "nuclei.ome.tif")
    assert len(rows) == truth.max()  # the DAPI channel, found by its name, not channel 0
    assert "area_um2" in rows[0] and "area_px2" not in rows[0]
    got = np.sort([float(r["area_um2"]) for r in rows])
    want = np.sort(np.bincount(truth.ravel())[1:] * PIXEL_UM**2)
    np.testing.assert_allclose(got, want, rtol=0.1)
    assert "pixel size from nuclei.ome.tif: 0.1083 um" in printed  # the procedure says where it came from


def test_a_file_without_a_pixel_size_gives_pixels_and_says_so(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    truth = nuclei_file(tmp_path / "bare.ome.tif", None)
    rows, printed = run_model_free(kernel, tmp_path / "bare.ome.tif")
    assert "area_px2" in rows[0] and "area_um2" not in rows[0]  # never an invented 1 µm
    assert "not recorded (lengths in pixels: ask the user)" in printed
    got = np.sort([float(r["area_px2"]) for r in rows])
    np.testing.assert_allclose(got, np.sort(np.bincount(truth.ravel())[1:]), rtol=0.1)
