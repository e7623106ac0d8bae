"""Cases where the file holds the answer: its pixel size, its channel names, its frame interval.

A scientist's file records these facts; an agent that reads them answers in µm² and per second,
one that assumes 1 µm per pixel, channel 0 or one second per frame does not. They are textbook
cases in both arms: no procedure covers them, and the docs-off arm keeps the reference docs
(``data`` among them), so they measure whether reading metadata is taught there. Each file is
written by a writer no code here controls (tifffile's OME and ImageJ writers).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tifffile
from scipy import ndimage as ndi

from bench.cases import Case, Truth, register, score
from bench.cases._kit import disks, read_number, to_uint16

PIXEL_UM = 0.1083
"""A 60x objective on a 6.5 µm camera pixel: what the OME-TIFF records."""

FRAME_S = 2.5
"""The ImageJ TIFF's ``finterval``."""

BLEACH_PER_S = 0.02


# --- nucleus area in µm² from an OME-TIFF ------------------------------------------------------


def _setup_area(workdir: Path, rng: np.random.Generator) -> Truth:
    shape = (256, 256)
    nuclei, placed = disks(shape, 14, rng, radius=(9.0, 14.0), gap=22.0)
    # the other channel stains whole cells: discs twice a nucleus' radius around each
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    cells = np.zeros(shape, bool)
    for y, x, r in placed:
        cells |= (yy - y) ** 2 + (xx - x) ** 2 <= (2 * r) ** 2
    dapi = ndi.gaussian_filter(np.where(nuclei > 0, 1200.0, 0.0), 0.7)
    gfp = ndi.gaussian_filter(np.where(cells, 800.0, 0.0), 0.7)
    stack = to_uint16(np.stack([gfp, dapi]) + 100 + rng.normal(0, 8, (2, *shape)))
    tifffile.imwrite(
        workdir / "nuclei.ome.tif",
        stack,
        metadata={
            "axes": "CYX",
            "PhysicalSizeX": PIXEL_UM,
            "PhysicalSizeY": PIXEL_UM,
            "Channel": {"Name": ["GFP", "DAPI"]},
        },
    )
    areas = np.bincount(nuclei.ravel())[1:]
    return {"area_um2": float(np.median(areas)) * PIXEL_UM**2, "area_px": float(np.median(areas))}


def _check_area(workdir: Path, truth: Truth) -> tuple[bool, str]:
    got = read_number(workdir / "nucleus_area_um2.txt")
    want = truth["area_um2"]
    ok = abs(got - want) <= 0.1 * want
    score(got, want, "|area ratio - 1|", error=got / want - 1, limit=0.1)
    return (
        ok,
        f"median nucleus area {got:.3g} µm², truth {want:.3g} µm² (±10%; {truth['area_px']:.0f} px at the file's pixel size)",
    )


register(
    Case(
        name="nucleus-area-um2",
        request=(
            "nuclei.ome.tif is a two-channel image a collaborator sent; the nuclei are stained with "
            "DAPI. What is the median nucleus area in square micrometres? Write the number alone to "
            "nucleus_area_um2.txt."
        ),
        setup=_setup_area,
        check=_check_area,
        solution="""
import numpy as np
from skimage import filters, measure

im = open_image("nuclei.ome.tif")   # the pixel size and channel names are in the file
print(im)
dapi = im.get(C="DAPI").astype(float)
mask = dapi > filters.threshold_otsu(dapi)
areas_px = [region.area for region in measure.regionprops(measure.label(mask))]
_, y_um, x_um = im.pixel_size_um
area_um2 = float(np.median(areas_px)) * y_um * x_um
with open("nucleus_area_um2.txt", "w") as fh:
    fh.write(f"{area_um2:.4f}\\n")
""",
    )
)


# --- count nuclei in the channel the file names DAPI ---------------------------------------------


def _setup_count(workdir: Path, rng: np.random.Generator) -> Truth:
    shape = (256, 256)
    nuclei, placed = disks(shape, 30, rng, radius=(6.0, 9.0), gap=6.0)
    membrane, _ = disks(shape, 9, rng, radius=(14.0, 20.0), gap=4.0)
    spots, _ = disks(shape, 70, rng, radius=(1.5, 2.5), gap=3.0)
    planes = [np.where(layer > 0, level, 0.0) for layer, level in ((membrane, 700.0), (nuclei, 1000.0), (spots, 900.0))]
    stack = to_uint16(np.stack([ndi.gaussian_filter(p, 0.7) for p in planes]) + 100 + rng.normal(0, 8, (3, *shape)))
    tifffile.imwrite(
        workdir / "cells.ome.tif",
        stack,
        metadata={"axes": "CYX", "Channel": {"Name": ["mCherry", "DAPI", "GFP"]}},
    )
    return {"count": len(placed)}


def _check_count(workdir: Path, truth: Truth) -> tuple[bool, str]:
    got = read_number(workdir / "nuclei_count.txt")
    want = truth["count"]
    score(got, want, "nuclei", limit=max(1, 0.05 * want))
    return abs(got - want) <= max(1, 0.05 * want), f"{got:g} nuclei counted, {want} in the DAPI channel (±5%)"


register(
    Case(
        name="count-in-named-channel",
        request=(
            "cells.ome.tif, from a collaborator, has three channels; DAPI marks the nuclei. How many nuclei "
            "are there? Write the count alone to nuclei_count.txt."
        ),
        setup=_setup_count,
        check=_check_count,
        solution="""
from skimage import filters, measure

im = open_image("cells.ome.tif")    # the file names its channels
print(im)
dapi = im.get(C="DAPI").astype(float)
count = int(measure.label(dapi > filters.threshold_otsu(dapi)).max())
with open("nuclei_count.txt", "w") as fh:
    fh.write(f"{count}\\n")
""",
    )
)


# --- bleaching rate per second from an ImageJ time-lapse ------------------------------------------


def _setup_bleach(workdir: Path, rng: np.random.Generator) -> Truth:
    n_t, shape = 40, (64, 64)
    times = np.arange(n_t) * FRAME_S
    field = 0.8 + 0.4 * ndi.gaussian_filter(rng.random(shape), 6)
    movie = 2000 * np.exp(-BLEACH_PER_S * times)[:, None, None] * field / field.mean()
    movie = to_uint16(movie + rng.normal(0, 5, (n_t, *shape)))
    tifffile.imwrite(
        workdir / "bleach.tif",
        movie,
        imagej=True,
        resolution=(1 / 0.65, 1 / 0.65),
        metadata={"axes": "TYX", "unit": "um", "finterval": FRAME_S},
    )
    return {"rate": BLEACH_PER_S}


def _check_bleach(workdir: Path, truth: Truth) -> tuple[bool, str]:
    got = read_number(workdir / "bleach_rate.txt")
    want = truth["rate"]
    ok = abs(got - want) <= 0.05 * want
    score(got, want, "|rate ratio - 1|", error=got / want - 1, limit=0.05)
    return ok, f"bleaching rate {got:.4g}/s, truth {want:g}/s (±5%; per frame it is {want * FRAME_S:g})"


register(
    Case(
        name="bleach-rate-per-second",
        request=(
            "bleach.tif is a time-lapse of a uniformly stained sample that bleaches. Fit a single "
            "exponential to its mean intensity over time and write the bleaching rate constant, in "
            "1/s, alone to bleach_rate.txt."
        ),
        setup=_setup_bleach,
        check=_check_bleach,
        solution="""
import numpy as np

im = open_image("bleach.tif")       # the frame interval is in the file (ImageJ finterval)
print(im)
movie = im.get(C=0, Z=0).astype(float)   # (T, Y, X)
times_s = np.arange(movie.shape[0]) * im.time_interval_s
means = movie.reshape(len(times_s), -1).mean(axis=1)
rate = -np.polyfit(times_s, np.log(means), 1)[0]
with open("bleach_rate.txt", "w") as fh:
    fh.write(f"{rate:.6f}\\n")
""",
    )
)
