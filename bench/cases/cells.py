"""Whole cells around their nuclei, and nuclei in 3-D stacks: a textbook and a hard case each.

The hard cells case is a sheet of cells of unequal size with off-centre nuclei: splitting each
pixel to its nearest nucleus (a Voronoi split) cuts most cells in the wrong place, the watershed on
the cell signal does not. The hard 3-D case has nuclei stacked in Z: a 2-D count (on the max
projection) merges each stacked pair.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

from _tests.support.synthetic_cells import cell_edges, cell_layout, nuclei_stack
from bench.cases import Case, CheckFailed, Procedure, Run, Truth, register, score
from bench.cases._kit import load_tiff, read_csv, read_number, save_tiff, to_uint16

# --- cells -----------------------------------------------------------------------------------


def cell_sheet(
    rng: np.random.Generator, n: int, touching: bool, shape: tuple[int, int] = (256, 256)
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cytoplasm image, nuclei labels, truth cells): cells split by a size-weighted boundary,
    nuclei off-centre, a dark line where two cells meet, the dye kept out of the nuclei."""
    owner, nuclei = cell_layout(rng, n, touching=touching, shape=shape, radius=(11.0, 22.0), nucleus_offset=0.4)
    bright = np.concatenate([[0.0], rng.uniform(0.7, 1.3, int(nuclei.max()))])
    edge = cell_edges(owner)
    scene = bright[owner]
    scene[nuclei > 0] *= 0.6
    scene[edge & ~ndi.binary_dilation(owner == 0)] *= 0.35
    image = 100 + 1000 * ndi.gaussian_filter(scene, 1.5) + rng.normal(0, 20, shape)
    return to_uint16(image), nuclei, owner


def _matched_share(path: Path, truth: np.ndarray) -> float:
    """Share of truth cells whose found cell of the same label (its nucleus's) has IoU >= 0.8."""
    cells = load_tiff(path, ndim=2, shape=truth.shape)
    if not np.issubdtype(cells.dtype, np.integer):
        raise CheckFailed(f"{path.name} is not an integer label image (dtype {cells.dtype})")
    cells = cells.astype(np.int64)
    ids = np.unique(truth[truth > 0])
    n = int(max(truth.max(), cells.max())) + 1
    joint = np.bincount(truth.ravel().astype(np.int64) * n + cells.ravel(), minlength=n * n).reshape(n, n)
    a_true, a_found = joint.sum(1), joint.sum(0)
    iou = np.array([joint[i, i] / (a_true[i] + a_found[i] - joint[i, i]) for i in ids])
    return float(np.mean(iou >= 0.8))


def _setup_cells(touching: bool, n: int) -> Callable[[Path, np.random.Generator], Truth]:
    def setup(workdir: Path, rng: np.random.Generator) -> Truth:
        image, nuclei, truth = cell_sheet(rng, n, touching)
        save_tiff(workdir / "cytoplasm.tif", image)
        save_tiff(workdir / "nuclei_labels.tif", nuclei.astype(np.uint16))
        return {"cells": truth}

    return setup


def _check_cells(workdir: Path, truth: Truth) -> tuple[bool, str]:
    share = _matched_share(workdir / "cells.tif", truth["cells"])
    n = len(np.unique(truth["cells"][truth["cells"] > 0]))
    score(share, 1.0, "share of cells unmatched (IoU < 0.8)", limit=0.1)
    detail = f"{share:.0%} of {n} cells match their truth at IoU >= 0.8 under their nucleus's label (need 90 %)"
    return share >= 0.9, detail


_CELLS_REQUEST = (
    "cytoplasm.tif is a cytoplasm stain (CellTracker) of {what}, and nuclei_labels.tif the label image "
    "of their nuclei, already segmented. Outline every whole cell, one per nucleus, and save the cell "
    "label image as cells.tif, each cell carrying its nucleus's label (0 = background)."
)
_CELLS_INPUTS = """
import tifffile
cells_image = tifffile.imread("cytoplasm.tif")
nuclei = tifffile.imread("nuclei_labels.tif")
source_path = "cytoplasm.tif"
stain = "cytoplasm"
user_names = {"cell-labels": "cells.tif"}
"""
_VORONOI = """
import numpy as np, tifffile
from scipy import ndimage as ndi
from skimage import filters, segmentation
img = filters.gaussian(tifffile.imread("cytoplasm.tif").astype(float), 1, preserve_range=True)
nuclei = tifffile.imread("nuclei_labels.tif").astype(np.int32)
foreground = ndi.binary_fill_holes(img > filters.threshold_otsu(img))
cells = np.where(foreground, segmentation.expand_labels(nuclei, distance=sum(img.shape)), 0)
tifffile.imwrite("cells.tif", cells.astype(np.uint16))
"""

register(
    Case(
        name="cells-around-nuclei",
        request=_CELLS_REQUEST.format(what="scattered cells"),
        setup=_setup_cells(touching=False, n=25),
        check=_check_cells,
        procedure=Procedure((_CELLS_INPUTS, Run("outputs"), Run("segment-cells"))),
        blind_solution=_VORONOI,
        docs=("segment-cells",),
    )
)

register(
    Case(
        name="hard-cell-sheet",
        request=_CELLS_REQUEST.format(what="a confluent sheet of cells of very different sizes"),
        setup=_setup_cells(touching=True, n=60),
        check=_check_cells,
        procedure=Procedure((_CELLS_INPUTS, Run("outputs"), Run("segment-cells"))),
        blind_solution=_VORONOI,
        docs=("segment-cells",),
        category="hard",
    )
)


# --- nuclei in 3-D ------------------------------------------------------------------------------


def _setup_stack(
    n: int, z_ratio: int, stacked: float, axial_um: float = 0.8, gap_um: float = 1.0
) -> Callable[[Path, np.random.Generator], Truth]:
    def setup(workdir: Path, rng: np.random.Generator) -> Truth:
        stack, volumes = nuclei_stack(rng, n, z_ratio, stacked, axial_um=axial_um, gap_um=gap_um)
        save_tiff(workdir / "stack.tif", to_uint16(stack), axes="ZYX")
        return {"count": len(volumes), "median_volume": float(np.median(volumes))}

    return setup


def _check_stack(workdir: Path, truth: Truth) -> tuple[bool, str]:
    count = read_number(workdir / "count.txt")
    rows = read_csv(workdir / "volumes.csv", ("volume_um3",))
    if not rows:
        raise CheckFailed("volumes.csv has no rows")
    median = float(np.median([row["volume_um3"] for row in rows]))
    error = median / truth["median_volume"] - 1
    count_limit = max(1, 0.03 * truth["count"])
    score(
        count,
        truth["count"],
        "worse of count error / its tolerance and volume error / 10 %",
        error=max(abs(count - truth["count"]) / count_limit, abs(error) / 0.10),
        limit=1.0,
    )
    detail = (
        f"count {count:g} (truth {truth['count']}, tolerance max(1, 3 %)), median volume {median:.0f} um3 "
        f"({error:+.0%} of the truth's {truth['median_volume']:.0f}; tolerance 10 %)"
    )
    return abs(count - truth["count"]) <= max(1, 0.03 * truth["count"]) and abs(error) <= 0.10, detail


_STACK_REQUEST = (
    "stack.tif is a z-stack (Z, Y, X) of a Hoechst nuclear stain {what}; the pixel is 0.5 um and the "
    "Z step {step} um. Count the nuclei in 3-D and write the number to count.txt, and save a table "
    "volumes.csv with one row per nucleus and its volume in a column volume_um3."
)
_STACK_INPUTS = """
import tifffile
stack = tifffile.imread("stack.tif")
source_path = "stack.tif"
voxel_size_um = ({step}, 0.5, 0.5)
nucleus_diameter_um = None
user_names = {{"nuclei-3d": "volumes.csv"}}
"""
_SAVE_STACK_COUNT = 'open(out_path("count", "txt", "count.txt"), "w").write(str(n_nuclei))\n'
_MIP_COUNT = """
import numpy as np, tifffile
from scipy import ndimage as ndi
from skimage import feature, filters, measure, segmentation
stack = tifffile.imread("stack.tif").astype(float)
mip = filters.gaussian(stack.max(axis=0), 1, preserve_range=True)
mask = mip > filters.threshold_otsu(mip)
distance = ndi.distance_transform_edt(mask)
peaks = feature.peak_local_max(distance, min_distance=5, labels=measure.label(mask))
markers = np.zeros(mask.shape, int)
markers[tuple(peaks.T)] = np.arange(1, len(peaks) + 1)
labels2d = segmentation.watershed(-distance, markers, mask=mask)
ids = np.arange(1, labels2d.max() + 1)
# each nucleus' volume: its projected area times the planes it spans, in um3
planes = np.array([np.count_nonzero((stack > filters.threshold_otsu(stack))[:, labels2d == i].any(axis=1)) for i in ids])
areas = np.bincount(labels2d.ravel())[1:]
volumes = areas * 0.25 * planes * {step}
open("count.txt", "w").write(str(len(ids)))
np.savetxt("volumes.csv", volumes, header="volume_um3", comments="")
"""

register(
    Case(
        name="nuclei-3d-volumes",
        request=_STACK_REQUEST.format(what="of a few scattered cells", step="1.0"),
        setup=_setup_stack(n=12, z_ratio=2, stacked=0.0, axial_um=0.3, gap_um=3.0),
        check=_check_stack,
        procedure=Procedure(
            (_STACK_INPUTS.format(step="1.0"), Run("outputs"), Run("segment-nuclei-3d"), _SAVE_STACK_COUNT)
        ),
        blind_solution="""
import numpy as np, tifffile
from skimage import filters, measure
stack = tifffile.imread("stack.tif").astype(float)
labels = measure.label(stack > filters.threshold_otsu(stack))
volumes = np.bincount(labels.ravel())[1:] * 0.5 * 0.5 * 1.0     # voxel 1.0 x 0.5 x 0.5 um
volumes = volumes[volumes > 20]                                # noise specks are not nuclei
open("count.txt", "w").write(str(len(volumes)))
np.savetxt("volumes.csv", volumes, header="volume_um3", comments="")
""",
        docs=("segment-nuclei-3d",),
    )
)

register(
    Case(
        name="hard-nuclei-3d-stacked",
        request=_STACK_REQUEST.format(what="of a multilayer where nuclei lie on top of one another", step="2.0"),
        setup=_setup_stack(n=40, z_ratio=4, stacked=0.4),
        check=_check_stack,
        procedure=Procedure(
            (_STACK_INPUTS.format(step="2.0"), Run("outputs"), Run("segment-nuclei-3d"), _SAVE_STACK_COUNT)
        ),
        blind_solution=_MIP_COUNT.replace("{step}", "2.0"),
        docs=("segment-nuclei-3d",),
        category="hard",
    )
)
