"""Spot and two-channel cases: detect spots, spots per cell, Pearson and Manders colocalization."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

from bench.cases import Case, Procedure, Run, Truth, register, score
from bench.cases._kit import disks, match_points, read_csv, save_tiff, smooth_texture, to_uint16


def spot_image(shape: tuple[int, int], points: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Diffraction-limited spots (Gaussian, sigma 1.5 px) of varied brightness on a noisy floor."""
    image = np.zeros(shape, np.float64)
    for y, x in points:
        image[round(y), round(x)] += rng.uniform(2500, 5000)
    return to_uint16(100 + ndi.gaussian_filter(image, 1.5) + rng.normal(0, 8, shape))


def random_points(
    shape: tuple[int, int], count: int, rng: np.random.Generator, gap: float, mask: np.ndarray | None = None
) -> np.ndarray:
    """Up to ``count`` integer points at least ``gap`` apart, inside ``mask`` when given."""
    points: list[tuple[int, int]] = []
    for _ in range(count * 100):
        if len(points) == count:
            break
        y, x = int(rng.integers(4, shape[0] - 4)), int(rng.integers(4, shape[1] - 4))
        if mask is not None and not mask[y, x]:
            continue
        if all((y - py) ** 2 + (x - px) ** 2 >= gap * gap for py, px in points):
            points.append((y, x))
    return np.array(points, np.float64).reshape(-1, 2)


_SPOTS_INPUTS = """
import tifffile
image = tifffile.imread("spots.tif")
spot_fwhm_px = None  # measured by the procedure
source_path = "spots.tif"
"""


# --- count-spots ---------------------------------------------------------------------------


def _setup_spots(workdir: Path, rng: np.random.Generator) -> Truth:
    points = random_points((256, 256), int(rng.integers(60, 90)), rng, gap=7)
    save_tiff(workdir / "spots.tif", spot_image((256, 256), points, rng))
    return {"points": points}


def _check_spots(workdir: Path, truth: Truth) -> tuple[bool, str]:
    rows = read_csv(workdir / "spots.csv", ("y", "x"))
    found = np.array([[row["y"], row["x"]] for row in rows]).reshape(-1, 2)
    points = truth["points"]
    hits = match_points(found, points, radius=2.0)
    recall = hits / len(points)
    precision = hits / len(found) if len(found) else 0.0
    score(
        len(found),
        len(points),
        "1 - F1 of spot matching (2 px)",
        error=1 - 2 * hits / (len(found) + len(points)),
        limit=0.1,
    )
    detail = f"{len(found)} found, {len(points)} true, {hits} matched within 2 px: recall {recall:.2f}, precision {precision:.2f} (both ≥ 0.9)"
    return recall >= 0.9 and precision >= 0.9, detail


register(
    Case(
        name="count-spots",
        request=(
            "spots.tif shows single-molecule FISH spots. Detect every spot and save spots.csv "
            "with columns y, x (pixel coordinates of each spot's centre, one row per spot)."
        ),
        setup=_setup_spots,
        check=_check_spots,
        procedure=Procedure(
            (_SPOTS_INPUTS + 'mask = None\nuser_names = {"spots": "spots.csv"}\n', Run("outputs"), Run("count-spots"))
        ),
        blind_solution="""
import numpy as np, tifffile, csv
from skimage import feature, filters
img = tifffile.imread("spots.tif").astype(float)
smooth = filters.gaussian(img, 1.5, preserve_range=True)
floor = np.median(smooth)
noise = 1.4826 * np.median(np.abs(smooth - floor))
peaks = feature.peak_local_max(smooth, min_distance=3, threshold_abs=floor + 10 * noise)
with open("spots.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["y", "x"])
    w.writerows(peaks.tolist())
print(len(peaks), "spots")
""",
        docs=("count-spots",),
    )
)


# --- spots-per-cell ------------------------------------------------------------------------


def _setup_spots_per_cell(workdir: Path, rng: np.random.Generator) -> Truth:
    shape = (256, 256)
    labels, _ = disks(shape, 7, rng, radius=(24, 34), gap=6)
    points = []
    counts: dict[int, int] = {}
    for label in range(1, labels.max() + 1):
        inner = ndi.binary_erosion(labels == label, iterations=3)
        cell_points = random_points(shape, int(rng.integers(2, 16)), rng, gap=7, mask=inner)
        counts[label] = len(cell_points)
        points.append(cell_points)
    outside = ~ndi.binary_dilation(labels > 0, iterations=4)
    points.append(random_points(shape, 6, rng, gap=7, mask=outside))
    save_tiff(workdir / "cells.tif", labels.astype(np.uint16))
    save_tiff(workdir / "spots.tif", spot_image(shape, np.concatenate(points), rng))
    return {"counts": counts}


def _check_spots_per_cell(workdir: Path, truth: Truth) -> tuple[bool, str]:
    rows = read_csv(workdir / "spots_per_cell.csv", ("label", "spot_count"))
    got = {int(row["label"]): row["spot_count"] for row in rows}
    counts = truth["counts"]
    missing = sorted(set(counts) - set(got))
    if missing:
        return False, f"spots_per_cell.csv lacks cells {missing}"
    worst = max(abs(got[label] - count) for label, count in counts.items())
    score(sum(got[label] for label in counts), sum(counts.values()), "spots, worst cell", error=worst, limit=1)
    off = {label: (got[label], count) for label, count in counts.items() if abs(got[label] - count) > 1}
    if off:
        return False, f"cells off by more than one spot (label: got, true): {off}"
    return True, f"{len(counts)} cells within ±1 spot: {counts}"


register(
    Case(
        name="spots-per-cell",
        request=(
            "cells.tif is a label image of cells (0 = background) and spots.tif the matching "
            "smFISH channel. How many spots does each cell contain? Save spots_per_cell.csv with "
            "columns label, spot_count, one row per cell (including cells with no spots)."
        ),
        setup=_setup_spots_per_cell,
        check=_check_spots_per_cell,
        procedure=Procedure(
            (
                _SPOTS_INPUTS
                + 'mask = tifffile.imread("cells.tif")\nuser_names = {"spots-per-cell": "spots_per_cell.csv"}\n',
                Run("outputs"),
                Run("count-spots"),
            )
        ),
        blind_solution="""
import numpy as np, tifffile, csv
from skimage import feature, filters
cells = tifffile.imread("cells.tif")
img = tifffile.imread("spots.tif").astype(float)
smooth = filters.gaussian(img, 1.5, preserve_range=True)
floor = np.median(smooth)
noise = 1.4826 * np.median(np.abs(smooth - floor))
peaks = feature.peak_local_max(smooth, min_distance=3, threshold_abs=floor + 10 * noise)
owner = cells[peaks[:, 0], peaks[:, 1]]
with open("spots_per_cell.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["label", "spot_count"])
    for label in np.unique(cells[cells > 0]):
        w.writerow([int(label), int((owner == label).sum())])
""",
        docs=("count-spots",),
    )
)


# --- colocalization ------------------------------------------------------------------------


def _two_channels(workdir: Path, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    shape = (256, 256)
    labels, _ = disks(shape, 6, rng, radius=(30, 40), gap=6)
    mask = labels > 0
    shared = smooth_texture(shape, rng, sigma=2)
    own = smooth_texture(shape, rng, sigma=2)
    mix = rng.uniform(0.5, 0.8)
    ch1 = 100 + mask * 2000 * shared
    ch2 = 100 + mask * 2000 * (mix * shared + (1 - mix) * own)
    image = to_uint16(np.stack([ch1, ch2]) + rng.normal(0, 20, (2, *shape)))
    save_tiff(workdir / "coloc.tif", image, axes="CYX")
    save_tiff(workdir / "cell_mask.tif", mask.astype(np.uint8) * 255)
    return image.astype(np.float64), mask


_COLOC_INPUTS = """
import tifffile
ch1, ch2 = tifffile.imread("coloc.tif")
mask = tifffile.imread("cell_mask.tif") > 0  # nonzero = cell, as the request says
source_path = "coloc.tif"
"""


def _setup_pearson(workdir: Path, rng: np.random.Generator) -> Truth:
    image, mask = _two_channels(workdir, rng)
    return {"pearson": float(np.corrcoef(image[0][mask], image[1][mask])[0, 1])}


def _check_pearson(workdir: Path, truth: Truth) -> tuple[bool, str]:
    rows = read_csv(workdir / "coloc.csv", ("pearson",))
    if len(rows) != 1:
        return False, f"coloc.csv has {len(rows)} data rows, expected 1"
    got, expected = rows[0]["pearson"], truth["pearson"]
    score(got, expected, "Pearson r", limit=0.02)
    return abs(got - expected) <= 0.02, f"Pearson {got:.3f}, truth within the mask {expected:.3f} (±0.02)"


register(
    Case(
        name="colocalization-pearson",
        request=(
            "coloc.tif has two channels (C, Y, X) and cell_mask.tif marks the cells (nonzero = "
            "cell). Compute Pearson's correlation coefficient between the two channels using only "
            "pixels inside the cells, and save it to coloc.csv with a single column pearson."
        ),
        setup=_setup_pearson,
        check=_check_pearson,
        procedure=Procedure(
            (_COLOC_INPUTS + 'user_names = {"colocalization": "coloc.csv"}\n', Run("outputs"), Run("colocalization"))
        ),
        blind_solution="""
import numpy as np, tifffile, csv
img = tifffile.imread("coloc.tif").astype(float)
mask = tifffile.imread("cell_mask.tif") > 0
r = np.corrcoef(img[0][mask], img[1][mask])[0, 1]
with open("coloc.csv", "w", newline="") as f:
    csv.writer(f).writerows([["pearson"], [r]])
print(r)
""",
        docs=("colocalization",),
    )
)


def _manders(image: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    from skimage.filters import threshold_otsu

    a, b = image[0][mask], image[1][mask]
    above_a, above_b = a > threshold_otsu(a), b > threshold_otsu(b)
    return float(a[above_b].sum() / a.sum()), float(b[above_a].sum() / b.sum())


def _setup_manders(workdir: Path, rng: np.random.Generator) -> Truth:
    image, mask = _two_channels(workdir, rng)
    m1, m2 = _manders(image, mask)
    return {"m1": m1, "m2": m2}


def _check_manders(workdir: Path, truth: Truth) -> tuple[bool, str]:
    rows = read_csv(workdir / "manders.csv", ("m1", "m2"))
    if len(rows) != 1:
        return False, f"manders.csv has {len(rows)} data rows, expected 1"
    m1, m2 = rows[0]["m1"], rows[0]["m2"]
    score(
        m1,
        truth["m1"],
        "M1/M2, the worse difference",
        error=max(abs(m1 - truth["m1"]), abs(m2 - truth["m2"])),
        limit=0.03,
    )
    detail = f"M1 {m1:.3f} (truth {truth['m1']:.3f}), M2 {m2:.3f} (truth {truth['m2']:.3f}), tolerance ±0.03"
    return abs(m1 - truth["m1"]) <= 0.03 and abs(m2 - truth["m2"]) <= 0.03, detail


register(
    Case(
        name="colocalization-manders",
        request=(
            "Using coloc.tif (two channels, C, Y, X) and the cell mask cell_mask.tif, compute "
            "Manders' coefficients inside the cells: M1 = fraction of channel 1 intensity in "
            "pixels where channel 2 is above its Otsu threshold, M2 = the same for channel 2 "
            "with channel 1's Otsu threshold (thresholds computed on the pixels inside the "
            "cells). Save manders.csv with columns m1, m2 (one row)."
        ),
        setup=_setup_manders,
        check=_check_manders,
        procedure=Procedure(
            (_COLOC_INPUTS + 'user_names = {"colocalization": "manders.csv"}\n', Run("outputs"), Run("colocalization"))
        ),
        blind_solution="""
import numpy as np, tifffile, csv
from skimage.filters import threshold_otsu
img = tifffile.imread("coloc.tif").astype(float)
mask = tifffile.imread("cell_mask.tif") > 0
a, b = img[0][mask], img[1][mask]
m1 = a[b > threshold_otsu(b)].sum() / a.sum()
m2 = b[a > threshold_otsu(a)].sum() / b.sum()
with open("manders.csv", "w", newline="") as f:
    csv.writer(f).writerows([["m1", "m2"], [m1, m2]])
""",
        docs=("colocalization",),
    )
)
