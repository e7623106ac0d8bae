"""Hard cases: data on which the textbook method fails and the shipped procedure, as written, works.

Each case's ``blind_solution`` is what a capable agent does without the procedure (a global Otsu
threshold, trusting the stated overlap, a wide blur as the illumination estimate), written here in
full; its docs-arm solution is the procedure itself, run from the doc as written, with only a
prelude that loads the files and passes the inputs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

from bench.cases import Case, Procedure, Run, Truth, register
from bench.cases import score as declare
from bench.cases._kit import (
    best_shift_ncc,
    disks,
    load_tiff,
    read_number,
    save_tiff,
    smooth_texture,
    to_uint16,
)
from bench.cases.illumination import _FIELD_ALONE, _flatness, vignetting
from bench.cases.nuclei import _NUCLEI_INPUTS, _SAVE_COUNT, _check_labels, nuclei_image
from bench.cases.spots import _SPOTS_INPUTS, _check_spots, random_points
from bench.cases.stacks import TILE_INPUTS, write_tile_grid

SHAPE = (256, 256)


# --- hard-touching-nuclei ------------------------------------------------------------------


def touching_nuclei(shape: tuple[int, int], rng: np.random.Generator, pairs: int, singles: int) -> np.ndarray:
    """Labels of ``pairs`` pairs of nuclei that touch (centres 0.85 × the radii sum apart, the
    shared pixels split by nearest centre) and ``singles`` free ones (7 pairs + 16: 47 % touch)."""
    centres: list[tuple[float, float, float]] = []
    for _ in range(4000):
        if len(centres) >= 2 * pairs:
            break
        r1, r2 = rng.uniform(8, 11, 2)
        y, x = rng.uniform(14, shape[0] - 14 - 20, 2)
        angle = rng.uniform(0, np.pi)
        d = 0.85 * (r1 + r2)
        y2, x2 = y + d * np.sin(angle), x + d * np.cos(angle)
        if not (12 <= y2 <= shape[0] - 12 and 12 <= x2 <= shape[1] - 12):
            continue
        if all(
            np.hypot(py - cy, px - cx) > pr + cr + 6
            for py, px, pr in centres
            for cy, cx, cr in ((y, x, r1), (y2, x2, r2))
        ):
            centres += [(y, x, r1), (y2, x2, r2)]
    for _ in range(4000):
        if len(centres) >= 2 * pairs + singles:
            break
        r = rng.uniform(8, 11)
        y, x = rng.uniform(12, shape[0] - 12, 2)
        if all(np.hypot(py - y, px - x) > pr + r + 6 for py, px, pr in centres):
            centres.append((y, x, r))
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    labels = np.zeros(shape, np.int32)
    best = np.full(shape, np.inf)
    for i, (y, x, r) in enumerate(centres, start=1):
        dist = np.hypot(yy - y, xx - x)
        inside = (dist <= r) & (dist / r < best)
        labels[inside] = i
        best[inside] = (dist / r)[inside]
    return labels


def _setup_touching(workdir: Path, rng: np.random.Generator) -> Truth:
    labels = touching_nuclei(SHAPE, rng, pairs=7, singles=16)
    image = nuclei_image(labels, rng)
    save_tiff(workdir / "nuclei.tif", image)
    return {"labels": labels, "count": int(labels.max())}


def _check_touching(workdir: Path, truth: Truth) -> tuple[bool, str]:
    reported = read_number(workdir / "count.txt")
    declare(reported, truth["count"], "nuclei", limit=1)
    count, f1 = _check_labels(workdir / "labels.tif", truth["labels"], min_f1=0.9)
    if abs(reported - truth["count"]) > 1:
        return False, f"count.txt says {reported:g}, truth {truth['count']} (±1); labels F1 {f1:.2f}"
    return True, f"{count} labelled, count.txt {reported:g}, truth {truth['count']}, F1 {f1:.2f}"


_OTSU = """
import numpy as np, tifffile
from skimage import filters, measure, morphology, segmentation, feature
img = tifffile.imread("nuclei.tif").astype(float)
smooth = filters.gaussian(img, sigma=1.5, preserve_range=True)
mask = morphology.remove_small_objects(smooth > filters.threshold_otsu(smooth), max_size=29)
"""
_SAVE_LABELS = """
labels = segmentation.relabel_sequential(labels)[0]
tifffile.imwrite("labels.tif", labels.astype(np.uint16))
open("count.txt", "w").write(str(int(labels.max())))
print(labels.max(), "nuclei")
"""

register(
    Case(
        name="hard-touching-nuclei",
        request=(
            "nuclei.tif is a DAPI image of a dense monolayer where many nuclei touch. Segment "
            "every nucleus (touching ones separately), save the label image as labels.tif and "
            "write the number of nuclei to count.txt."
        ),
        setup=_setup_touching,
        check=_check_touching,
        procedure=Procedure(
            (
                _NUCLEI_INPUTS + 'exclude_edge = False\nuser_names = {"nuclei-labels": "labels.tif"}\n',
                Run("outputs"),
                Run("segment-nuclei"),
                _SAVE_COUNT,
            )
        ),
        blind_solution=_OTSU
        + """
labels = measure.label(mask)
"""
        + _SAVE_LABELS,
        docs=("segment-nuclei",),
        category="hard",
    )
)


# --- hard-spots-background -----------------------------------------------------------------


def _setup_spots_background(workdir: Path, rng: np.random.Generator) -> Truth:
    points = random_points(SHAPE, int(rng.integers(60, 80)), rng, gap=7)
    image = np.zeros(SHAPE, np.float64)
    for y, x in points:
        image[int(y), int(x)] += rng.uniform(2500, 5000)
    yy, xx = np.mgrid[: SHAPE[0], : SHAPE[1]].astype(np.float64)
    cy, cx = rng.uniform(60, 196, 2)
    background = 150 + 3 * xx + 1500 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * 45**2))
    save_tiff(workdir / "spots.tif", to_uint16(background + ndi.gaussian_filter(image, 1.5) + rng.normal(0, 8, SHAPE)))
    return {"points": points}


_SAVE_SPOTS = """
np.savetxt("spots.csv", np.asarray(found, float).reshape(-1, 2), delimiter=",", header="y,x", comments="")
print(len(found), "spots")
"""

register(
    Case(
        name="hard-spots-background",
        request=(
            "spots.tif shows FISH spots on top of strong, uneven autofluorescence (a bright haze "
            "over part of the field and a gradient across it). Detect every spot and save "
            "spots.csv with columns y and x (pixel coordinates of each spot centre)."
        ),
        setup=_setup_spots_background,
        check=_check_spots,
        procedure=Procedure(
            (_SPOTS_INPUTS + 'mask = None\nuser_names = {"spots": "spots.csv"}\n', Run("outputs"), Run("count-spots"))
        ),
        blind_solution="""
import numpy as np, tifffile
from skimage import filters, measure
img = tifffile.imread("spots.tif").astype(float)
smooth = filters.gaussian(img, 1, preserve_range=True)
labels = measure.label(smooth > filters.threshold_otsu(smooth))
found = [p.centroid for p in measure.regionprops(labels) if p.area >= 3]
"""
        + _SAVE_SPOTS,
        docs=("count-spots",),
        category="hard",
    )
)


# --- hard-flatfield-big-objects ------------------------------------------------------------


def _setup_flat_big(workdir: Path, rng: np.random.Generator) -> Truth:
    labels, _ = disks(SHAPE, 40, rng, radius=(18, 34), gap=4)
    scene = 300 + ndi.gaussian_filter(700.0 * (labels > 0), 2.0)
    flat = vignetting(SHAPE, rng, depth=0.5)
    save_tiff(workdir / "field.tif", to_uint16(scene * flat + rng.normal(0, 6, SHAPE)))
    background = ~ndi.binary_dilation(labels > 0, iterations=4)
    return {"scene": scene, "background": background, "cover": float((labels > 0).mean())}


def _check_flat_big(workdir: Path, truth: Truth) -> tuple[bool, str]:
    scene = truth["scene"]
    corrected = load_tiff(workdir / "corrected.tif", ndim=2, shape=scene.shape)
    passed, detail = _flatness(corrected, scene, truth["background"], 1.06)
    return passed, detail + f" (on background pixels; objects cover {truth['cover']:.0%})"


register(
    Case(
        name="hard-flatfield-big-objects",
        request=(
            "field.tif has strong vignetting, and large cell clusters cover a good part of it. I "
            "have no blank image: estimate the illumination from the image itself, correct it so "
            "the background is even across the field, and save the result as corrected.tif."
        ),
        setup=_setup_flat_big,
        check=_check_flat_big,
        procedure=Procedure((_FIELD_ALONE, Run("outputs"), Run("flatfield"))),
        blind_solution="""
import numpy as np, tifffile
from scipy import ndimage as ndi
img = tifffile.imread("field.tif").astype(np.float32)
flat = ndi.gaussian_filter(img, 40)
tifffile.imwrite("corrected.tif", (img / flat * flat.mean()).astype(np.float32))
""",
        docs=("flatfield",),
        category="hard",
    )
)


# --- hard-stitch-low-texture ---------------------------------------------------------------

_TILE = 160


def _setup_stitch_faint(workdir: Path, rng: np.random.Generator) -> Truth:
    scene = 1000 + 120 * smooth_texture((360, 360), rng, sigma=3)
    overlap = int(rng.integers(36, 44))  # the request says 10 %: 16 px
    step = _TILE - overlap
    return write_tile_grid(workdir, scene, _TILE, step, 20.0, rng)


def _check_stitch_faint(workdir: Path, truth: Truth) -> tuple[bool, str]:
    expected = truth["canvas"]
    got = load_tiff(workdir / "stitched.tif", ndim=2)
    if any(abs(a - b) > 4 for a, b in zip(got.shape, expected.shape, strict=True)):
        return False, f"stitched.tif is {got.shape}, the covered area is {expected.shape} (±4 px)"
    # the tiles are noisy: compare denoised images, the canvas's empty corners (0 or NaN) filled
    # first so the blur does not smear an edge into the sample
    got = got.astype(np.float64)
    empty = ~np.isfinite(got) | (got == 0)
    got[empty] = np.median(got[~empty]) if (~empty).any() else 0.0
    smooth = ndi.gaussian_filter(got, 2)
    score, shift = best_shift_ncc(smooth, ndi.gaussian_filter(expected, 2), max_shift=4, mask=truth["covered"])
    declare(score, 1.0, "1 - NCC (blurred 2 px)", limit=0.1)
    if score < 0.9:
        return (
            False,
            f"stitched.tif (blurred 2 px) matches the true scene with NCC {score:.3f} < 0.9 (best offset {shift})",
        )
    return True, f"stitched {got.shape} vs true {expected.shape}, NCC {score:.3f} (blurred 2 px) at offset {shift}"


_TILES = """
import numpy as np, tifffile
tiles = {(r, c): tifffile.imread(f"tile_r{r}_c{c}.tif").astype(np.float32) for r in range(2) for c in range(2)}
T = tiles[0, 0].shape[0]
"""
_PLACE = """
pos = {(0, 0): np.array([0, 0])}
pos[0, 1] = pos[0, 0] + offset(tiles[0, 0], tiles[0, 1], 1)
pos[1, 0] = pos[0, 0] + offset(tiles[0, 0], tiles[1, 0], 0)
pos[1, 1] = pos[1, 0] + offset(tiles[1, 0], tiles[1, 1], 1)
origin = np.min(list(pos.values()), axis=0)
size = np.max(list(pos.values()), axis=0) - origin + T
canvas = np.zeros(size, np.float32)
for key, tile in tiles.items():
    y, x = pos[key] - origin
    canvas[y:y + T, x:x + T] = tile
print({k: v.tolist() for k, v in pos.items()}, canvas.shape)
tifffile.imwrite("stitched.tif", canvas)
"""

register(
    Case(
        name="hard-stitch-low-texture",
        request=(
            "tile_r0_c0.tif, tile_r0_c1.tif, tile_r1_c0.tif and tile_r1_c1.tif are a 2 by 2 grid "
            "(r = row, c = column) of a faint, low-contrast sample. The acquisition was set to a "
            "10% overlap between neighbours. Stitch them into one image and save it as stitched.tif."
        ),
        setup=_setup_stitch_faint,
        check=_check_stitch_faint,
        procedure=Procedure(
            (
                TILE_INPUTS + "overlap_fraction = 0.10  # as the acquisition was set\n",
                Run("outputs"),
                Run("stitch-tiles"),
            )
        ),
        blind_solution=_TILES
        + """
from skimage.registration import phase_cross_correlation
overlap = round(0.10 * T)  # as acquired

def offset(a, b, axis):
    # refine the nominal placement by phase correlation of the overlapping strips
    if axis == 1:
        shift, _, _ = phase_cross_correlation(a[:, T - overlap:], b[:, :overlap], upsample_factor=1)
        return np.array([0, T - overlap]) + np.round(shift).astype(int)
    shift, _, _ = phase_cross_correlation(a[T - overlap:, :], b[:overlap, :], upsample_factor=1)
    return np.array([T - overlap, 0]) + np.round(shift).astype(int)
"""
        + _PLACE,
        docs=("stitch-tiles",),
        category="hard",
    )
)
