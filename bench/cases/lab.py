"""Lab-knowledge cases: the truth depends on a convention only the lab tier states.

The lab's scope (bench/lab/microscope.md): 0.325 µm pixels that the files do not record, a
500-count camera offset, channels in the order DAPI, mCherry, GFP. The lab counts a cell as
positive at a fixed 1000 counts above offset, drops objects under 40 µm² as debris, and files
tables as ``results/<stem>/objects.csv``. No request states any of it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

from bench.cases import Case, CheckFailed, Truth, register
from bench.cases._kit import (
    disks,
    read_csv,
    read_number,
    save_tiff,
    to_uint16,
)
from bench.cases.illumination import _check_flat, vignetting
from bench.cases.nuclei import nuclei_image

SHAPE = (256, 256)
PIXEL_UM = 0.325
OFFSET = 500.0
GFP = 2  # channel order: DAPI, mCherry, GFP
POSITIVE_ABOVE_OFFSET = 1000.0

_SCOPE = ("lab/microscope",)


def _areas_um2(labels: np.ndarray) -> np.ndarray:
    return np.bincount(labels.ravel())[1:] * PIXEL_UM**2


def _check_areas(rows: list[dict[str, float]], truth_um2: np.ndarray, name: str) -> tuple[bool, str]:
    if not rows:
        raise CheckFailed(f"{name} has no rows")
    got = np.array([row["area_um2"] for row in rows])
    ratio = float(np.median(got) / np.median(truth_um2))
    count_ok = abs(len(got) - len(truth_um2)) <= max(1, round(0.1 * len(truth_um2)))
    detail = f"{len(got)} rows ({len(truth_um2)} true); median area_um2 {np.median(got):.1f} vs true {np.median(truth_um2):.1f} (ratio {ratio:.2f}, allowed 0.85-1.15)"
    return count_ok and 0.85 <= ratio <= 1.15, detail


_SEGMENT = """
import numpy as np, tifffile
from skimage import filters, measure, morphology
img = tifffile.imread("nuclei.tif").astype(float)
smooth = filters.gaussian(img, sigma=1.5, preserve_range=True)
labels = measure.label(morphology.remove_small_objects(smooth > filters.threshold_otsu(smooth), max_size=29))
areas_px = np.bincount(labels.ravel())[1:]
"""


# --- lab-area-um2 --------------------------------------------------------------------------


def _setup_nuclei(workdir: Path, rng: np.random.Generator) -> Truth:
    labels, _ = disks(SHAPE, int(rng.integers(20, 28)), rng, radius=(9, 13))
    save_tiff(workdir / "nuclei.tif", nuclei_image(labels, rng))
    return {"areas_um2": _areas_um2(labels)}


def _check_area_um2(workdir: Path, truth: Truth) -> tuple[bool, str]:
    return _check_areas(read_csv(workdir / "areas.csv", ("label", "area_um2")), truth["areas_um2"], "areas.csv")


register(
    Case(
        name="lab-area-um2",
        request=(
            "nuclei.tif is a DAPI image from our scope. Segment the nuclei and give me the area of "
            "each one in square microns: save areas.csv with columns label and area_um2."
        ),
        setup=_setup_nuclei,
        check=_check_area_um2,
        solution=_SEGMENT + """
import csv
with open("areas.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["label", "area_um2"])
    for i, a in enumerate(areas_px, 1):
        w.writerow([i, a * 0.325 ** 2])  # the lab's pixel size: the file has none
""",
        blind_solution=_SEGMENT + """
import csv
print(tifffile.TiffFile("nuclei.tif").pages[0].resolution)  # no calibration: 1 unit per pixel
with open("areas.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["label", "area_um2"])
    for i, a in enumerate(areas_px, 1):
        w.writerow([i, float(a)])
""",
        docs=_SCOPE,
        category="lab",
    )
)


# --- lab-results-layout --------------------------------------------------------------------


def _check_layout(workdir: Path, truth: Truth) -> tuple[bool, str]:
    path = workdir / "results" / "nuclei" / "objects.csv"
    if not path.is_file():
        found = sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*.csv"))
        raise CheckFailed(f"missing results/nuclei/objects.csv (the lab's layout); CSVs found: {found or 'none'}")
    passed, detail = _check_areas(read_csv(path, ("label", "area_um2")), truth["areas_um2"], "objects.csv")
    if not (workdir / "results" / "nuclei" / "labels.tif").is_file():
        return False, "results/nuclei/labels.tif is missing; " + detail
    return passed, "results/nuclei/objects.csv: " + detail


register(
    Case(
        name="lab-results-layout",
        request=(
            "Segment the nuclei in nuclei.tif and save the label image and a per-nucleus table "
            "with their areas, filed the way we always file results."
        ),
        setup=_setup_nuclei,
        check=_check_layout,
        solution=_SEGMENT + """
import csv, os
os.makedirs("results/nuclei", exist_ok=True)
tifffile.imwrite("results/nuclei/labels.tif", labels.astype(np.uint16))
with open("results/nuclei/objects.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["label", "area_um2"])
    for i, a in enumerate(areas_px, 1):
        w.writerow([i, a * 0.325 ** 2])
""",
        blind_solution=_SEGMENT + """
import csv, os
os.makedirs("results", exist_ok=True)
tifffile.imwrite("results/nuclei_labels.tif", labels.astype(np.uint16))
with open("results/nuclei_measurements.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["label", "area"])
    for i, a in enumerate(areas_px, 1):
        w.writerow([i, int(a)])
""",
        docs=("lab/results-layout", "lab/microscope"),
        category="lab",
    )
)


# --- lab-flatfield-offset ------------------------------------------------------------------


def _setup_flat_offset(workdir: Path, rng: np.random.Generator) -> Truth:
    labels, _ = disks(SHAPE, 30, rng, radius=(6, 12))
    scene = 200 + ndi.gaussian_filter(rng.uniform(400, 900, labels.max() + 1)[labels] * (labels > 0), 1.0)
    flat = vignetting(SHAPE, rng)
    save_tiff(workdir / "sample.tif", to_uint16(scene * flat + OFFSET + rng.normal(0, 5, SHAPE)))
    save_tiff(workdir / "blank.tif", to_uint16(1500 * flat + OFFSET + rng.normal(0, 5, SHAPE)))
    return {"scene": scene}


register(
    Case(
        name="lab-flatfield-offset",
        request=(
            "sample.tif from our scope is unevenly illuminated. blank.tif is a uniformly "
            "fluorescent slide taken with the same settings. Correct the illumination of "
            "sample.tif and save corrected.tif (float32 is fine)."
        ),
        setup=_setup_flat_offset,
        check=_check_flat,
        solution="""
import numpy as np, tifffile
offset = 500.0  # the lab's camera offset: our dark frame
sample = tifffile.imread("sample.tif").astype(np.float32) - offset
blank = tifffile.imread("blank.tif").astype(np.float32) - offset
tifffile.imwrite("corrected.tif", (sample / blank * blank.mean()).astype(np.float32))
""",
        blind_solution="""
import numpy as np, tifffile
sample = tifffile.imread("sample.tif").astype(np.float32)
blank = tifffile.imread("blank.tif").astype(np.float32)
tifffile.imwrite("corrected.tif", (sample / blank * blank.mean()).astype(np.float32))
""",
        docs=_SCOPE,
        category="lab",
    )
)


# --- three-channel cells: lab-gfp-channel, lab-positive-cells -------------------------------


def _setup_cells(workdir: Path, rng: np.random.Generator) -> Truth:
    labels, _ = disks(SHAPE, 36, rng, radius=(8, 11), gap=5)
    n = int(labels.max())
    # GFP above offset: 40 % clearly negative, 40 % dim (600-900, negative by the lab's fixed
    # cutoff), 20 % positive (1100-2000); a per-image threshold lands elsewhere.
    kind = rng.permutation(np.minimum(np.arange(n) % 5 // 2, 2))
    gfp = np.where(kind == 0, rng.uniform(50, 300, n), np.where(kind == 1, rng.uniform(600, 900, n), rng.uniform(1100, 2000, n)))
    mcherry = rng.uniform(200, 2000, n)
    dapi = rng.uniform(800, 1500, n)
    channels = []
    for levels in (dapi, mcherry, gfp):
        table = np.concatenate([[0.0], levels])
        channels.append(OFFSET + 40 + table[labels] + rng.normal(0, 10, SHAPE))
    save_tiff(workdir / "cells.tif", to_uint16(np.stack(channels)), axes="CYX")
    save_tiff(workdir / "labels.tif", labels.astype(np.uint16))
    image = to_uint16(np.stack(channels)).astype(np.float64)
    index = np.arange(1, n + 1)
    means = np.array(ndi.mean(image[GFP], labels, index))
    return {"gfp_means": means, "positive": int(np.sum(means - OFFSET >= POSITIVE_ABOVE_OFFSET))}


def _check_gfp(workdir: Path, truth: Truth) -> tuple[bool, str]:
    rows = read_csv(workdir / "gfp.csv", ("label", "mean_gfp"))
    means = truth["gfp_means"]
    got = {int(row["label"]): row["mean_gfp"] for row in rows}
    common = [label for label in range(1, len(means) + 1) if label in got]
    if len(common) < 0.9 * len(means):
        return False, f"gfp.csv has {len(common)} of the {len(means)} labels"
    r = float(np.corrcoef([got[label] for label in common], [means[label - 1] for label in common])[0, 1])
    return r >= 0.98, f"per-cell mean_gfp vs the true GFP channel: Pearson r {r:.3f} (≥ 0.98) over {len(common)} cells"


_MEANS = """
import numpy as np, tifffile
from scipy import ndimage as ndi
image = tifffile.imread("cells.tif").astype(float)
labels = tifffile.imread("labels.tif")
index = np.arange(1, labels.max() + 1)
"""

register(
    Case(
        name="lab-gfp-channel",
        request=(
            "cells.tif is a three-channel image from our scope and labels.tif outlines the cells. "
            "Measure each cell's mean GFP intensity and save gfp.csv with columns label and mean_gfp."
        ),
        setup=_setup_cells,
        check=_check_gfp,
        solution=_MEANS + """
gfp = ndi.mean(image[2], labels, index)  # our scope: DAPI, mCherry, GFP
np.savetxt("gfp.csv", np.column_stack([index, gfp]), delimiter=",", header="label,mean_gfp", comments="")
""",
        blind_solution=_MEANS + """
gfp = ndi.mean(image[1], labels, index)  # the usual order: DAPI, GFP, RFP
np.savetxt("gfp.csv", np.column_stack([index, gfp]), delimiter=",", header="label,mean_gfp", comments="")
""",
        docs=_SCOPE,
        category="lab",
    )
)


def _check_positive(workdir: Path, truth: Truth) -> tuple[bool, str]:
    reported = read_number(workdir / "positive.txt")
    return reported == truth["positive"], f"positive.txt says {reported:g}, truth {truth['positive']} (exact)"


register(
    Case(
        name="lab-positive-cells",
        request=(
            "cells.tif is a three-channel image from our scope and labels.tif outlines the cells. "
            "How many cells are GFP-positive? Write the number to positive.txt."
        ),
        setup=_setup_cells,
        check=_check_positive,
        solution=_MEANS + """
gfp = np.asarray(ndi.mean(image[2], labels, index)) - 500  # GFP is channel 2; offset 500
positive = int(np.sum(gfp >= 1000))  # the lab's fixed cutoff
open("positive.txt", "w").write(str(positive))
""",
        blind_solution=_MEANS + """
from skimage.filters import threshold_otsu
gfp = np.asarray(ndi.mean(image[1], labels, index))
positive = int(np.sum(gfp > threshold_otsu(gfp)))
open("positive.txt", "w").write(str(positive))
""",
        docs=("lab/positive-cells", "lab/microscope"),
        category="lab",
    )
)


# --- lab-debris-count ----------------------------------------------------------------------


def _setup_debris(workdir: Path, rng: np.random.Generator) -> Truth:
    nuclei, _ = disks(SHAPE, int(rng.integers(14, 20)), rng, radius=(12.5, 15), gap=6)
    debris, _ = disks(SHAPE, 60, rng, radius=(2.5, 5), gap=3)
    debris[ndi.binary_dilation(nuclei > 0, iterations=4)] = 0
    debris_count = len(np.unique(debris[debris > 0]))
    labels = nuclei.copy()
    labels[debris > 0] = debris[debris > 0] + nuclei.max()
    save_tiff(workdir / "field.tif", nuclei_image(labels, rng))
    return {"count": int(nuclei.max()), "debris": debris_count}


def _check_debris(workdir: Path, truth: Truth) -> tuple[bool, str]:
    reported = read_number(workdir / "count.txt")
    ok = abs(reported - truth["count"]) <= 1
    return ok, f"count.txt says {reported:g}, truth {truth['count']} cells (±1) beside {truth['debris']} debris particles"


_FIELD = """
import numpy as np, tifffile
from skimage import filters, measure, morphology
img = tifffile.imread("field.tif").astype(float)
smooth = filters.gaussian(img, sigma=1, preserve_range=True)
labels = measure.label(smooth > filters.threshold_otsu(smooth))
areas = np.bincount(labels.ravel())[1:]
"""

register(
    Case(
        name="lab-debris-count",
        request="field.tif is a nuclear stain from our scope. How many cells are there? Write the number to count.txt.",
        setup=_setup_debris,
        check=_check_debris,
        solution=_FIELD + """
count = int(np.sum(areas * 0.325 ** 2 >= 40))  # the lab's debris gate: 40 µm²
open("count.txt", "w").write(str(count))
""",
        blind_solution=_FIELD + """
count = int(np.sum(areas >= 15))  # drop single-pixel noise
open("count.txt", "w").write(str(count))
""",
        docs=("lab/debris-gate", "lab/microscope"),
        category="lab",
    )
)
