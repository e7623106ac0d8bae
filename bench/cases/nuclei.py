"""Nuclei cases: segment and count, measure given labels, drop border nuclei, count per frame."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

from bench.cases import Case, CheckFailed, Each, Procedure, Run, Truth, register, score
from bench.cases._kit import disks, load_tiff, read_csv, read_number, save_tiff, to_uint16

SHAPE = (256, 256)


def nuclei_image(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A DAPI-like uint16 image of the labelled nuclei: per-nucleus brightness, blur, noise."""
    brightness = rng.uniform(700, 1300, labels.max() + 1)
    brightness[0] = 0
    signal = ndi.gaussian_filter(brightness[labels].astype(np.float64), 1.2)
    return to_uint16(120 + signal + rng.normal(0, 25, labels.shape))


def matched_f1(predicted: np.ndarray, truth: np.ndarray, iou: float = 0.5) -> float:
    """F1 of object matching: a truth object counts as found when one predicted object overlaps
    it with IoU ≥ ``iou`` (one-to-one is implied for IoU > 0.5)."""
    predicted = predicted.astype(np.int64)
    n_true, n_pred = int(truth.max()), int(predicted.max())
    true_objects = len(np.unique(truth[truth > 0]))
    predicted_objects = len(np.unique(predicted[predicted > 0]))
    if true_objects == 0 or predicted_objects == 0:
        return 0.0
    joint = np.bincount(truth.ravel() * (n_pred + 1) + predicted.ravel(), minlength=(n_true + 1) * (n_pred + 1))
    joint = joint.reshape(n_true + 1, n_pred + 1)
    area_true, area_pred = joint.sum(1), joint.sum(0)
    union = area_true[:, None] + area_pred[None, :] - joint
    scores = np.where(union > 0, joint / np.maximum(union, 1), 0.0)[1:, 1:]
    hits = int((scores.max(1) >= iou).sum())
    return 2 * hits / (true_objects + predicted_objects)


def _check_labels(path: Path, truth_labels: np.ndarray, min_f1: float = 0.9) -> tuple[int, float]:
    labels = load_tiff(path, ndim=2, shape=truth_labels.shape)
    if not np.issubdtype(labels.dtype, np.integer):
        if not np.all(np.equal(np.mod(labels, 1), 0)):
            raise CheckFailed(f"{path.name} is not an integer label image (dtype {labels.dtype})")
        labels = labels.astype(np.int64)
    count = len(np.unique(labels[labels > 0]))
    f1 = matched_f1(labels, truth_labels)
    if f1 < min_f1:
        raise CheckFailed(
            f"{path.name}: {count} objects, matching F1 {f1:.2f} < {min_f1} (IoU ≥ 0.5) against {len(np.unique(truth_labels[truth_labels > 0]))} nuclei"
        )
    return count, f1


# --- count-nuclei --------------------------------------------------------------------------


def _setup_count(workdir: Path, rng: np.random.Generator) -> Truth:
    labels, _ = disks(SHAPE, int(rng.integers(25, 36)), rng, radius=(6, 10))
    save_tiff(workdir / "nuclei.tif", nuclei_image(labels, rng))
    return {"labels": labels, "count": int(labels.max())}


def _check_count(workdir: Path, truth: Truth) -> tuple[bool, str]:
    reported = read_number(workdir / "count.txt")
    score(reported, truth["count"], "nuclei", limit=1)
    count, f1 = _check_labels(workdir / "labels.tif", truth["labels"])
    if abs(reported - truth["count"]) > 1:
        return False, f"count.txt says {reported:g}, truth {truth['count']} (tolerance ±1)"
    return True, f"{count} labelled, count.txt {reported:g}, truth {truth['count']}, F1 {f1:.2f}"


_NUCLEI_INPUTS = """
import tifffile
image = tifffile.imread("nuclei.tif")
source_path = "nuclei.tif"
nucleus_diameter_px = None
"""
_SAVE_COUNT = 'open(out_path("count", "txt", "count.txt"), "w").write(str(n_nuclei))\n'

_SEGMENT = """
import numpy as np, tifffile
from skimage import filters, measure, morphology, segmentation
img = tifffile.imread("nuclei.tif").astype(float)
smooth = filters.gaussian(img, sigma=1.5, preserve_range=True)
mask = smooth > filters.threshold_otsu(smooth)
mask = morphology.remove_small_objects(mask, max_size=29)
labels = measure.label(mask)
"""

register(
    Case(
        name="count-nuclei",
        request=(
            "nuclei.tif in this folder is a DAPI image of a cell monolayer. Please segment the "
            "nuclei and save the label image as labels.tif (0 = background, one integer per "
            "nucleus), and write how many nuclei there are to count.txt (just the number)."
        ),
        setup=_setup_count,
        check=_check_count,
        blind_solution=_SEGMENT
        + """
tifffile.imwrite("labels.tif", labels.astype(np.uint16))
with open("count.txt", "w") as f:
    f.write(str(int(labels.max())))
print(labels.max(), "nuclei")
""",
        procedure=Procedure(
            (
                _NUCLEI_INPUTS + 'exclude_edge = False\nuser_names = {"nuclei-labels": "labels.tif"}\n',
                Run("outputs"),
                Run("segment-nuclei"),
                _SAVE_COUNT,
            )
        ),
        docs=("segment-nuclei",),
    )
)


# --- border-nuclei -------------------------------------------------------------------------


def _setup_border(workdir: Path, rng: np.random.Generator) -> Truth:
    labels, placed = disks(SHAPE, 32, rng, radius=(7, 10), gap=6, margin=-3)
    # A nucleus that ends 1-3 px from the edge is cut or not depending on blur and threshold:
    # keep only nuclei clearly crossing the edge or clearly inside, so the truth is unambiguous.
    inset = [min(y, x, SHAPE[0] - 1 - y, SHAPE[1] - 1 - x) - r for y, x, r in placed]
    keep = np.array([0] + [i for i, d in enumerate(inset, start=1) if d >= 4 or d <= -3])
    lookup = np.zeros(labels.max() + 1, np.int32)
    lookup[keep] = np.arange(len(keep))
    labels = lookup[labels]
    save_tiff(workdir / "nuclei.tif", nuclei_image(labels, rng))
    edge = np.unique(np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]]))
    interior = np.where(np.isin(labels, edge), 0, labels)
    return {"labels": interior, "count": len(np.unique(interior[interior > 0])), "edge": len(edge[edge > 0])}


def _check_border(workdir: Path, truth: Truth) -> tuple[bool, str]:
    path = workdir / "labels_interior.tif"
    reported = read_number(workdir / "count.txt")
    score(reported, truth["count"], "nuclei", limit=1)
    count, f1 = _check_labels(path, truth["labels"])
    labels = load_tiff(path)
    rim = np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]])
    if np.any(rim > 0):
        return False, f"{path.name} still has objects touching the border"
    if abs(reported - truth["count"]) > 1:
        return False, f"count.txt says {reported:g}, truth {truth['count']} interior nuclei (tolerance ±1)"
    return True, f"{count} interior nuclei (truth {truth['count']}, {truth['edge']} on the border), F1 {f1:.2f}"


register(
    Case(
        name="border-nuclei",
        request=(
            "Segment the nuclei in nuclei.tif, but leave out every nucleus that touches the image "
            "edge since those are cut off. Save the remaining nuclei as a label image "
            "labels_interior.tif and write their number to count.txt."
        ),
        setup=_setup_border,
        check=_check_border,
        blind_solution=_SEGMENT
        + """
labels = segmentation.clear_border(labels)
labels, _, _ = segmentation.relabel_sequential(labels)
tifffile.imwrite("labels_interior.tif", labels.astype(np.uint16))
with open("count.txt", "w") as f:
    f.write(str(int(labels.max())))
""",
        procedure=Procedure(
            (
                _NUCLEI_INPUTS + 'exclude_edge = True\nuser_names = {"nuclei-labels": "labels_interior.tif"}\n',
                Run("outputs"),
                Run("segment-nuclei"),
                _SAVE_COUNT,
            )
        ),
        docs=("segment-nuclei",),
    )
)


# --- measure-nuclei ------------------------------------------------------------------------


def _setup_measure(workdir: Path, rng: np.random.Generator) -> Truth:
    labels, _ = disks(SHAPE, 25, rng, radius=(6, 11))
    image = nuclei_image(labels, rng)
    save_tiff(workdir / "nuclei.tif", image)
    save_tiff(workdir / "labels.tif", labels.astype(np.uint16))
    ids = np.arange(1, labels.max() + 1)
    area = ndi.sum_labels(np.ones_like(labels), labels, ids)
    mean = ndi.mean(image.astype(np.float64), labels, ids)
    return {
        "area": dict(zip(ids.tolist(), area.tolist(), strict=True)),
        "mean": dict(zip(ids.tolist(), mean.tolist(), strict=True)),
    }


def _check_measure(workdir: Path, truth: Truth) -> tuple[bool, str]:
    rows = read_csv(workdir / "nuclei.csv", ("label", "area", "mean_intensity"))
    seen = {int(row["label"]): row for row in rows}
    expected = set(truth["area"])
    if set(seen) != expected:
        return (
            False,
            f"nuclei.csv has labels {sorted(seen)[:10]}…; expected exactly {len(expected)} labels 1..{max(expected)}",
        )
    worst = max(abs(seen[label]["mean_intensity"] / truth["mean"][label] - 1) for label in expected)
    areas = sum(seen[label]["area"] for label in expected)
    score(areas, sum(truth["area"].values()), "|mean intensity ratio - 1|, worst label", error=worst, limit=0.005)
    for label in expected:
        row = seen[label]
        if abs(row["area"] - truth["area"][label]) > 0.5:
            return False, f"label {label}: area {row['area']:g}, truth {truth['area'][label]:g} px (exact)"
        if abs(row["mean_intensity"] - truth["mean"][label]) > 0.005 * truth["mean"][label]:
            return False, f"label {label}: mean {row['mean_intensity']:.1f}, truth {truth['mean'][label]:.1f} (±0.5%)"
    return True, f"{len(expected)} nuclei: area exact, mean intensity within 0.5%"


register(
    Case(
        name="measure-nuclei",
        request=(
            "I already have a segmentation: labels.tif labels the nuclei of nuclei.tif. For every "
            "nucleus, measure its area in pixels and its mean intensity in nuclei.tif, and save a "
            "table nuclei.csv with columns label, area, mean_intensity (one row per nucleus)."
        ),
        setup=_setup_measure,
        check=_check_measure,
        procedure=Procedure(
            (
                """
import tifffile
labels = tifffile.imread("labels.tif")
image = tifffile.imread("nuclei.tif")
source_path = "nuclei.tif"
pixel_size_um = None  # the request asks for pixels
""",
                Run("outputs"),
                Run("measure-labels"),
                'save_table({"label": table["label"], "area": table["area_px2"], "mean_intensity": table["intensity_mean"]}, '
                '"nuclei", "nuclei.csv")\n',
            )
        ),
        blind_solution="""
import tifffile, csv
from skimage import measure
labels = tifffile.imread("labels.tif")
img = tifffile.imread("nuclei.tif")
props = measure.regionprops_table(labels, intensity_image=img, properties=("label", "area", "intensity_mean"))
with open("nuclei.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["label", "area", "mean_intensity"])
    for row in zip(props["label"], props["area"], props["intensity_mean"]):
        w.writerow([int(row[0]), int(row[1]), float(row[2])])
""",
        docs=("measure-labels",),
    )
)


# --- timelapse-count -----------------------------------------------------------------------


def _setup_timelapse_count(workdir: Path, rng: np.random.Generator) -> Truth:
    frames, counts = [], []
    for t in range(6):
        labels, _ = disks((192, 192), 8 + 3 * t, rng, radius=(5, 8))
        frames.append(nuclei_image(labels, rng))
        counts.append(int(labels.max()))
    save_tiff(workdir / "timelapse.tif", np.stack(frames), axes="TYX")
    return {"counts": counts}


def _check_timelapse_count(workdir: Path, truth: Truth) -> tuple[bool, str]:
    rows = read_csv(workdir / "counts.csv", ("frame", "count"))
    got = {int(row["frame"]): row["count"] for row in rows}
    expected = truth["counts"]
    if sorted(got) not in (list(range(len(expected))), list(range(1, len(expected) + 1))):
        return False, f"counts.csv frames {sorted(got)}; expected {len(expected)} frames numbered from 0 (or 1)"
    base = min(got)
    worst = max(abs(got[t + base] - count) for t, count in enumerate(expected))
    score(sum(got.values()), sum(expected), "nuclei, worst frame", error=worst, limit=1)
    for t, count in enumerate(expected):
        if abs(got[t + base] - count) > 1:
            return False, f"frame {t}: counted {got[t + base]:g}, truth {count} (tolerance ±1)"
    return True, f"{len(expected)} frames within ±1 nucleus: truth {expected}"


register(
    Case(
        name="timelapse-count",
        request=(
            "timelapse.tif is a time-lapse (axes T, Y, X) of proliferating cells with a nuclear "
            "stain. Count the nuclei in every frame and save counts.csv with columns frame, count "
            "(frames numbered from 0)."
        ),
        setup=_setup_timelapse_count,
        check=_check_timelapse_count,
        procedure=Procedure(
            (
                """
import tifffile
stack = tifffile.imread("timelapse.tif")
source_path = "timelapse.tif"
nucleus_diameter_px = None  # measured on the first frame, then kept for every frame
exclude_edge = False
counts = []
""",
                Run("outputs"),
                Each(
                    "for frame_index in range(len(stack)):",
                    (
                        'image = stack[frame_index]\nuser_names = {"nuclei-labels": f"labels_t{frame_index}.tif"}\n',
                        Run("segment-nuclei"),
                        "counts.append(n_nuclei)\n",
                    ),
                ),
                'import numpy as np\nsave_table({"frame": np.arange(len(counts)), "count": counts}, "counts", "counts.csv")\n',
            )
        ),
        blind_solution="""
import numpy as np, tifffile, csv
from skimage import filters, measure, morphology
stack = tifffile.imread("timelapse.tif").astype(float)
with open("counts.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["frame", "count"])
    for t, frame in enumerate(stack):
        smooth = filters.gaussian(frame, sigma=1.5, preserve_range=True)
        mask = morphology.remove_small_objects(smooth > filters.threshold_otsu(smooth), max_size=19)
        w.writerow([t, int(measure.label(mask).max())])
""",
        docs=("segment-nuclei",),
    )
)
