"""Illumination cases: flat-field with a blank, flat-field estimated from the image, background."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

from bench.cases import Case, Procedure, Run, Truth, register, score
from bench.cases._kit import disks, load_tiff, save_tiff, to_uint16

SHAPE = (256, 256)
GRID = 3
"""Evaluation grid: the field is cut into GRID×GRID tiles and their medians compared."""


def vignetting(shape: tuple[int, int], rng: np.random.Generator, depth: float = 0.55) -> np.ndarray:
    """A smooth, off-centre illumination profile: 1 at its peak, ``1 - depth`` in the far corner."""
    yy, xx = np.mgrid[: shape[0], : shape[1]].astype(np.float64)
    cy = shape[0] * rng.uniform(0.35, 0.65)
    cx = shape[1] * rng.uniform(0.35, 0.65)
    r2 = (yy - cy) ** 2 + (xx - cx) ** 2
    return 1 - depth * r2 / r2.max()


def tile_medians(values: np.ndarray, mask: np.ndarray) -> list[float]:
    """Median of ``values`` under ``mask`` in each tile of the GRID×GRID evaluation grid."""
    h, w = values.shape
    medians = []
    for i in range(GRID):
        for j in range(GRID):
            window = (slice(i * h // GRID, (i + 1) * h // GRID), slice(j * w // GRID, (j + 1) * w // GRID))
            medians.append(float(np.median(values[window][mask[window]])))
    return medians


def _flatness(corrected: np.ndarray, scene: np.ndarray, mask: np.ndarray, limit: float) -> tuple[bool, str]:
    """Pass when corrected/scene is the same across the field: max/min tile median ≤ ``limit``."""
    ratio = corrected.astype(np.float64) / scene
    medians = tile_medians(ratio, mask)
    if min(medians) <= 0:
        return False, "corrected image is zero or negative where the sample is bright"
    spread = max(medians) / min(medians)
    score(spread, 1.0, "max/min tile ratio - 1", limit=round(limit - 1, 9))
    verdict = spread <= limit
    return (
        verdict,
        f"illumination spread (max/min of {GRID}x{GRID} tile medians of corrected/true) {spread:.3f}, limit {limit}",
    )


# --- flatfield-blank -----------------------------------------------------------------------


def _setup_flat_blank(workdir: Path, rng: np.random.Generator) -> Truth:
    labels, _ = disks(SHAPE, 30, rng, radius=(6, 12))
    scene = 200 + ndi.gaussian_filter(rng.uniform(400, 900, labels.max() + 1)[labels] * (labels > 0), 1.0)
    flat = vignetting(SHAPE, rng)
    dark = 100.0
    save_tiff(workdir / "sample.tif", to_uint16(scene * flat + dark + rng.normal(0, 5, SHAPE)))
    save_tiff(workdir / "blank.tif", to_uint16(1500 * flat + dark + rng.normal(0, 5, SHAPE)))
    save_tiff(workdir / "dark.tif", to_uint16(dark + rng.normal(0, 5, SHAPE)))
    return {"scene": scene}


def _check_flat(workdir: Path, truth: Truth) -> tuple[bool, str]:
    scene = truth["scene"]
    corrected = load_tiff(workdir / "corrected.tif", ndim=2, shape=scene.shape)
    return _flatness(corrected, scene, np.ones(scene.shape, bool), 1.08)


register(
    Case(
        name="flatfield-blank",
        request=(
            "sample.tif is unevenly illuminated (bright in the middle, dim toward the corners). "
            "I also took blank.tif, an image of an empty, uniformly fluorescent slide with the "
            "same settings, and dark.tif with the shutter closed. Correct the illumination of "
            "sample.tif and save the result as corrected.tif (float32 is fine)."
        ),
        setup=_setup_flat_blank,
        check=_check_flat,
        procedure=Procedure(
            (
                """
import tifffile
image = tifffile.imread("sample.tif")
blank = tifffile.imread("blank.tif")
dark_level = tifffile.imread("dark.tif")  # a dark frame: the procedure takes its median
source_path = "sample.tif"
user_names = {"flatfield": "corrected.tif"}
""",
                Run("outputs"),
                Run("flatfield"),
            )
        ),
        blind_solution="""
import numpy as np, tifffile
sample = tifffile.imread("sample.tif").astype(np.float32)
blank = tifffile.imread("blank.tif").astype(np.float32)
dark = tifffile.imread("dark.tif").astype(np.float32)
gain = blank - dark
corrected = (sample - dark) / gain * gain.mean()
tifffile.imwrite("corrected.tif", corrected.astype(np.float32))
""",
        docs=("flatfield",),
    )
)


_FIELD_ALONE = """
import tifffile
image = tifffile.imread("field.tif")
blank = None  # no blank: the profile comes from the image's own background
dark_level = 0.0  # no camera offset in these files
source_path = "field.tif"
user_names = {"flatfield": "corrected.tif"}
"""
"""Inputs of a flat-field case without a blank; the hard case with big objects reuses it."""


# --- flatfield-estimate --------------------------------------------------------------------


def _setup_flat_estimate(workdir: Path, rng: np.random.Generator) -> Truth:
    labels, _ = disks(SHAPE, 40, rng, radius=(3, 6), gap=8)
    scene = 300 + ndi.gaussian_filter(700.0 * (labels > 0), 1.0)
    flat = vignetting(SHAPE, rng, depth=0.5)
    save_tiff(workdir / "field.tif", to_uint16(scene * flat + rng.normal(0, 6, SHAPE)))
    background = ~ndi.binary_dilation(labels > 0, iterations=4)
    return {"scene": scene, "background": background}


def _check_flat_estimate(workdir: Path, truth: Truth) -> tuple[bool, str]:
    scene = truth["scene"]
    corrected = load_tiff(workdir / "corrected.tif", ndim=2, shape=scene.shape)
    passed, detail = _flatness(corrected, scene, truth["background"], 1.10)
    return passed, detail + " (on background pixels)"


register(
    Case(
        name="flatfield-estimate",
        request=(
            "field.tif has strong vignetting: the background is much brighter in one area than "
            "at the edges. I don't have a blank reference image, so please estimate the "
            "illumination from the image itself, correct it so the background is even across the "
            "field, and save the result as corrected.tif."
        ),
        setup=_setup_flat_estimate,
        check=_check_flat_estimate,
        procedure=Procedure((_FIELD_ALONE, Run("outputs"), Run("flatfield"))),
        blind_solution="""
import numpy as np, tifffile
from scipy import ndimage as ndi
img = tifffile.imread("field.tif").astype(np.float32)
# the objects are small and sparse: a wide median (on a 4x smaller copy, for speed) then a
# blur follows the illumination only
small = ndi.median_filter(img[::4, ::4], size=9)
flat = ndi.gaussian_filter(ndi.zoom(small, 4, order=1), 6)[: img.shape[0], : img.shape[1]]
corrected = img / flat * flat.mean()
tifffile.imwrite("corrected.tif", corrected.astype(np.float32))
""",
        docs=("flatfield",),
    )
)


# --- background-ramp -----------------------------------------------------------------------


def _setup_background(workdir: Path, rng: np.random.Generator) -> Truth:
    labels, _ = disks(SHAPE, 30, rng, radius=(5, 9), gap=6)
    signal = ndi.gaussian_filter(rng.uniform(600, 1000, labels.max() + 1)[labels] * (labels > 0), 1.0)
    yy, xx = np.mgrid[: SHAPE[0], : SHAPE[1]].astype(np.float64)
    slope = rng.uniform(0.8, 1.6)
    background = 150 + slope * xx + 0.6 * yy + 200 * np.exp(-((yy - 80) ** 2 + (xx - 170) ** 2) / (2 * 50**2))
    save_tiff(workdir / "cells.tif", to_uint16(signal + background + rng.normal(0, 8, SHAPE)))
    far = ~ndi.binary_dilation(labels > 0, iterations=5)
    core = ndi.binary_erosion(labels > 0, iterations=2)
    return {"signal": signal, "far": far, "core": core}


def _check_background(workdir: Path, truth: Truth) -> tuple[bool, str]:
    signal = truth["signal"]
    out = load_tiff(workdir / "background_subtracted.tif", ndim=2, shape=signal.shape).astype(np.float64)
    residual = tile_medians(out, truth["far"])
    worst = max(abs(value) for value in residual)
    score(worst, 0.0, "counts of background left (worst tile median)", limit=40)
    if worst > 40:
        return (
            False,
            f"background left: worst {GRID}x{GRID} tile median {worst:.1f} away from objects (limit 40; the objects are 600-1000 above it)",
        )
    kept = float(np.median(out[truth["core"]] / signal[truth["core"]]))
    if not 0.85 <= kept <= 1.15:
        return False, f"object intensity changed: median output/true signal {kept:.2f} (allowed 0.85-1.15)"
    return True, f"background residual ≤ {worst:.1f} (limit 40), object signal kept at {kept:.2f}x"


register(
    Case(
        name="background-ramp",
        request=(
            "cells.tif sits on an uneven background: a gradient across the field plus a broad "
            "glow. Subtract the background so the empty areas are about zero while the cells keep "
            "their intensity, and save the result as background_subtracted.tif (float is fine)."
        ),
        setup=_setup_background,
        check=_check_background,
        procedure=Procedure(
            (
                """
import tifffile
image = tifffile.imread("cells.tif")
object_diameter_px = None  # measured by the procedure
source_path = "cells.tif"
user_names = {"background-subtracted": "background_subtracted.tif"}
""",
                Run("outputs"),
                Run("background-subtraction"),
            )
        ),
        blind_solution="""
import numpy as np, tifffile
from scipy import ndimage as ndi
img = tifffile.imread("cells.tif").astype(np.float32)
smooth = ndi.gaussian_filter(img, 2)
# an opening wider than any cell removes the cells and keeps the background; blur it to smooth steps
background = ndi.gaussian_filter(ndi.grey_opening(smooth, size=(31, 31)), 8)
background += np.median((smooth - background)[smooth - background < 30])
tifffile.imwrite("background_subtracted.tif", (img - background).astype(np.float32))
""",
        docs=("background-subtraction",),
    )
)
