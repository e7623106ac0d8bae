"""Lab-knowledge cases: the truth depends on a convention only the lab tier states.

Every image a request says comes from one of the lab's instruments is made by that instrument's
model (``bench.cases.scope``), so the data obeys the lab docs: the camera offset is in the pixels,
nuclei are inside the lab's size range at the stated pixel size, debris is under the gate. What
each case needs is a number or a choice the data cannot reveal (its ``why_hidden`` says why):
where a value could be read off the data (the offset under every pixel, two clean size groups),
it is not what the case turns on. Where a capable agent's textbook answer could land on the
lab's by chance (a per-image threshold at the lab's fixed cutoff), the generator draws again.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import ndimage as ndi
from skimage import measure
from skimage.filters import gaussian, threshold_otsu

from bench.cases import Case, CheckFailed, Truth, register, score
from bench.cases._kit import (
    find_artifact,
    load_tiff,
    per_label,
    read_csv,
    read_number,
    redraws,
    save_tiff,
    threshold_counts,
)
from bench.cases.illumination import _flatness, tile_medians
from bench.cases.scope import (
    PLATE_IMAGER,
    SPINNING_DISK,
    WIDEFIELD,
    Acquired,
    Instrument,
    cells_field,
    write_cells,
)

W = WIDEFIELD
SHAPE = (320, 320)
CELLS_SHAPE = (384, 384)

_SCOPE = ("lab/microscope",)


def _areas_um2(labels: np.ndarray, instrument: Instrument = W) -> np.ndarray:
    return np.bincount(labels.ravel())[1:] * instrument.pixel_um**2


def _blurred(labels: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Per-object levels painted into the labels and blurred as optics would (1 px)."""
    table = np.concatenate([[0.0], levels])
    return ndi.gaussian_filter(table[labels], 1.0)


def _nuclei_image(instrument: Instrument, labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A DAPI image of the labelled objects on the instrument (per-object brightness)."""
    return instrument.acquire(_blurred(labels, rng.uniform(700, 1300, int(labels.max()))), rng)


def _means(image: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return np.asarray(ndi.mean(image.astype(np.float64), labels, np.arange(1, labels.max() + 1)))


def _check_areas(rows: list[dict[str, float]], truth_um2: np.ndarray, name: str) -> tuple[bool, str]:
    if not rows:
        raise CheckFailed(f"{name} has no rows")
    got = np.array([row["area_um2"] for row in rows])
    ratio = float(np.median(got) / np.median(truth_um2))
    score(float(np.median(got)), float(np.median(truth_um2)), "|median area ratio - 1|", error=ratio - 1, limit=0.15)
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

_NO_CALIBRATION = (
    "The TIFF carries no calibration, and nuclear area differs several-fold between cell lines, so "
    "the objects' sizes in pixels do not pin the pixel size within the check's ±15 %."
)


# --- lab-area-um2 --------------------------------------------------------------------------


def _setup_nuclei(workdir: Path, rng: np.random.Generator) -> Truth:
    labels, _ = W.nuclei(SHAPE, int(rng.integers(16, 22)), rng)
    save_tiff(workdir / "nuclei.tif", _nuclei_image(W, labels, rng))
    return {"areas_um2": _areas_um2(labels), "acquired": [Acquired("nuclei.tif", W, nuclei=labels)]}


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
        solution=_SEGMENT
        + """
import csv
with open("areas.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["label", "area_um2"])
    for i, a in enumerate(areas_px, 1):
        w.writerow([i, a * 0.26 ** 2])  # our scope's pixel size: the file has none
""",
        blind_solution=_SEGMENT
        + """
import csv
print(tifffile.TiffFile("nuclei.tif").pages[0].resolution)  # no calibration: 1 unit per pixel
with open("areas.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["label", "area_um2"])
    for i, a in enumerate(areas_px, 1):
        w.writerow([i, float(a)])
""",
        docs=_SCOPE,
        category="lab",
        why_hidden=_NO_CALIBRATION,
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
            "Segment the nuclei in nuclei.tif, from our scope, and save the label image and a "
            "per-nucleus table with their areas, filed the way we always file results."
        ),
        setup=_setup_nuclei,
        check=_check_layout,
        solution=_SEGMENT
        + """
import csv, os
os.makedirs("results/nuclei", exist_ok=True)
tifffile.imwrite("results/nuclei/labels.tif", labels.astype(np.uint16))
with open("results/nuclei/objects.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["label", "area_um2"])
    for i, a in enumerate(areas_px, 1):
        w.writerow([i, a * 0.26 ** 2])
""",
        blind_solution=_SEGMENT
        + """
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
        why_hidden=(
            "Where and under which names a lab files its tables is the lab's habit; no image says "
            "it, and the request names no file. The areas also need the pixel size. " + _NO_CALIBRATION
        ),
    )
)


# --- lab-flatfield-centre ------------------------------------------------------------------

CENTRE = 64
"""The lab normalises its flat over the central CENTRE × CENTRE pixels of the field."""


def _centre(image: np.ndarray) -> np.ndarray:
    h, w = image.shape
    return image[(h - CENTRE) // 2 : (h + CENTRE) // 2, (w - CENTRE) // 2 : (w + CENTRE) // 2]


def _setup_flat_centre(workdir: Path, rng: np.random.Generator) -> Truth:
    labels, _ = W.nuclei(SHAPE, 24, rng)
    light = W.background + _blurred(labels, rng.uniform(400, 900, int(labels.max())))
    flat = W.flat(SHAPE)
    save_tiff(workdir / "sample.tif", W.acquire(light - W.background, rng, flat=flat))
    blank = np.full(SHAPE, 1500.0 - W.background)  # a uniformly fluorescent slide
    save_tiff(workdir / "blank.tif", W.acquire(blank, rng, flat=flat))
    # the lab's correction keeps the counts the field's centre records
    return {
        "scene": light * float(_centre(flat).mean()),
        "acquired": [Acquired("sample.tif", W, nuclei=labels), Acquired("blank.tif", W)],
    }


def _check_flat_centre(workdir: Path, truth: Truth) -> tuple[bool, str]:
    scene = truth["scene"]
    corrected = load_tiff(workdir / "corrected.tif", ndim=2, shape=scene.shape).astype(np.float64)
    flat_ok, detail = _flatness(corrected, scene, np.ones(scene.shape, bool), 1.08)
    level = float(np.median(corrected / scene))
    # two conditions: flatness (scored by _flatness) and the level; the score is the worse, each over its limit
    medians = tile_medians(corrected / scene, np.ones(scene.shape, bool))
    spread = max(medians) / min(medians) if min(medians) > 0 else float("inf")
    score(
        level,
        1.0,
        "worse of |level - 1| / 0.03 and (spread - 1) / 0.08",
        error=max(abs(level - 1) / 0.03, (spread - 1) / 0.08),
        limit=1.0,
    )
    level_ok = 0.97 <= level <= 1.03
    return flat_ok and level_ok, f"{detail}; level against the lab's centre-normalised counts {level:.3f} (0.97-1.03)"


register(
    Case(
        name="lab-flatfield-centre",
        request=(
            "sample.tif from our scope is unevenly illuminated. blank.tif is a uniformly "
            "fluorescent slide taken with the same settings. Correct the illumination of "
            "sample.tif the way we correct ours, so its intensities compare with the rest of our "
            "corrected images, and save corrected.tif (float32 is fine)."
        ),
        setup=_setup_flat_centre,
        check=_check_flat_centre,
        solution="""
import numpy as np, tifffile
offset = 500.0  # our scope's camera offset
sample = tifffile.imread("sample.tif").astype(np.float32) - offset
gain = tifffile.imread("blank.tif").astype(np.float32) - offset
h, w = gain.shape
centre = gain[(h - 64) // 2:(h + 64) // 2, (w - 64) // 2:(w + 64) // 2].mean()  # the lab's normalisation
tifffile.imwrite("corrected.tif", (sample / (gain / centre)).astype(np.float32))
""",
        blind_solution="""
import numpy as np, tifffile
sample = tifffile.imread("sample.tif").astype(np.float32)
blank = tifffile.imread("blank.tif").astype(np.float32)
gain = blank - 500.0  # the camera offset, fitted from the sample against the blank
tifffile.imwrite("corrected.tif", ((sample - 500.0) / gain * gain.mean()).astype(np.float32))
""",
        docs=("lab/flatfield", "lab/microscope"),
        category="lab",
        why_hidden=(
            "The offset can be estimated from the pixels (every image sits on it, with about 60 "
            "counts of autofluorescence above it), but any scaling of the flat corrects the shading "
            "equally well: the output's level is a choice (the flat's mean, median or maximum, its "
            "centre pixel or some centre window), and only the lab's doc says it is the mean over "
            "the central 64 x 64. The scope's light has a dim spot at the field's centre and peaks "
            "off-centre, so the centre pixel and a 16 x 16 or 32 x 32 window give levels 6-9 % "
            "low, a 128 x 128 window, the mean and the median about 10 % high and the maximum "
            "30 % high; the check allows 3 %."
        ),
    )
)


# --- three-channel cells: lab-gfp-channel, lab-spinning-gfp --------------------------------


def _setup_channels(instrument: Instrument, name: str) -> Callable[[Path, np.random.Generator], Truth]:
    """The setup of a cells field from ``instrument`` saved as ``name``, with the cell labels."""

    def setup(workdir: Path, rng: np.random.Generator) -> Truth:
        cells, nuclei, levels = cells_field(instrument, CELLS_SHAPE, 22, rng)
        image = write_cells(instrument, workdir, name, cells, nuclei, levels, rng)
        save_tiff(workdir / "labels.tif", cells.astype(np.uint16))
        gfp = _means(image[instrument.channels.index("GFP")], cells)
        return {"gfp_means": gfp, "acquired": [Acquired(name, instrument, nuclei=nuclei)]}

    return setup


def _check_gfp(workdir: Path, truth: Truth) -> tuple[bool, str]:
    got, true = per_label(workdir / "gfp.csv", "mean_gfp", truth["gfp_means"])
    r = float(np.corrcoef(got, true)[0, 1])
    score(r, 1.0, "1 - Pearson r with the true channel", limit=0.02)
    return r >= 0.98, f"per-cell mean_gfp vs the true GFP channel: Pearson r {r:.3f} (≥ 0.98) over {len(got)} cells"


def _means_code(name: str) -> str:
    return f"""
import numpy as np, tifffile
from scipy import ndimage as ndi
image = tifffile.imread("{name}").astype(float)
labels = tifffile.imread("labels.tif")
index = np.arange(1, labels.max() + 1)
"""


def _save_gfp(channel: int, why: str) -> str:
    return f"""
gfp = ndi.mean(image[{channel}], labels, index)  # {why}
np.savetxt("gfp.csv", np.column_stack([index, gfp]), delimiter=",", header="label,mean_gfp", comments="")
"""


_SAME_DYES = (
    "mCherry and GFP fill the same cells at levels drawn alike; DAPI alone is told apart (it sits "
    "in the nuclei). The file names no channel, so which of the other two is GFP is the "
    "instrument's order, which only the lab doc records."
)

register(
    Case(
        name="lab-gfp-channel",
        request=(
            "cells.tif is a three-channel image from our scope and labels.tif outlines the cells. "
            "Measure each cell's mean GFP intensity and save gfp.csv with columns label and mean_gfp."
        ),
        setup=_setup_channels(W, "cells.tif"),
        check=_check_gfp,
        solution=_means_code("cells.tif") + _save_gfp(2, "our scope: DAPI, mCherry, GFP"),
        blind_solution=_means_code("cells.tif") + _save_gfp(1, "the usual order: DAPI, GFP, RFP"),
        docs=_SCOPE,
        category="lab",
        why_hidden=_SAME_DYES,
    )
)

register(
    Case(
        name="lab-spinning-gfp",
        request=(
            "spin.tif is a three-channel image from our spinning disk, not the widefield, and "
            "labels.tif outlines the cells. Measure each cell's mean GFP intensity and save gfp.csv "
            "with columns label and mean_gfp."
        ),
        setup=_setup_channels(SPINNING_DISK, "spin.tif"),
        check=_check_gfp,
        solution=_means_code("spin.tif") + _save_gfp(0, "the spinning disk: GFP, mCherry, DAPI"),
        blind_solution=_means_code("spin.tif")
        + _save_gfp(1, "DAPI is last here: the other two by wavelength, mCherry then GFP reversed"),
        docs=("lab/spinning-disk",),
        category="lab",
        why_hidden=_SAME_DYES
        + " The spinning disk's order is not our scope's, so knowing one does not give the other.",
    )
)


# --- fixed cutoffs: lab-positive-cells, lab-dead-cells ---------------------------------------


def _differs(truth: int, *guesses: int) -> bool:
    """Whether every textbook guess misses the lab's count by more than the check's tolerance."""
    return all(abs(guess - truth) > 1 for guess in guesses)


def _setup_positive(workdir: Path, rng: np.random.Generator) -> Truth:
    cutoff = 1000.0  # the lab's: mean GFP minus the offset
    for _ in redraws("_setup_positive"):
        cells, nuclei, _ = cells_field(W, CELLS_SHAPE, 22, rng)
        n = int(cells.max())
        # GFP above background, continuous from clearly negative to bright, with more dim cells
        # than bright ones; nothing within 80 counts of the cutoff, so the call is never a coin toss.
        # The bright end reaches 8000, so the cells' mean (and Li, which lands near it) sits well
        # above the cutoff
        above = np.exp(rng.uniform(np.log(80), np.log(8000), n))
        image = W.acquire(_blurred(cells, above), rng)
        means = _means(image, cells) - W.offset
        if np.any(np.abs(means - cutoff) < 80):
            continue
        positive = int(np.sum(means >= cutoff))
        # per-image thresholds on the raw means, above the offset and above the visible background
        floor = float(np.median(image[cells == 0]))
        guesses = [
            count
            for values in (means + W.offset, means, means + W.offset - floor)
            for count in threshold_counts(values).values()
        ]
        if 2 <= positive <= n - 2 and _differs(positive, *guesses):
            break
    save_tiff(workdir / "gfp.tif", image)
    save_tiff(workdir / "labels.tif", cells.astype(np.uint16))
    return {"positive": positive, "acquired": [Acquired("gfp.tif", W, nuclei=nuclei)]}


def _check_count(name: str, key: str, what: str) -> Callable[[Path, Truth], tuple[bool, str]]:
    """A check that the number in ``name`` equals the truth's ``key`` exactly."""

    def check(workdir: Path, truth: Truth) -> tuple[bool, str]:
        reported = read_number(workdir / name)
        score(reported, truth[key], what, limit=0)
        return reported == truth[key], f"{name} says {reported:g}, truth {truth[key]} {what} (exact)"

    return check


_CELL_MEANS = """
import numpy as np, tifffile
from scipy import ndimage as ndi
image = tifffile.imread("{name}").astype(float)
labels = tifffile.imread("labels.tif")
means = np.asarray(ndi.mean(image, labels, np.arange(1, labels.max() + 1)))
"""

register(
    Case(
        name="lab-positive-cells",
        request=(
            "gfp.tif is the GFP channel of an image from our scope and labels.tif outlines the "
            "cells. How many cells are GFP-positive? Write the number to positive.txt."
        ),
        setup=_setup_positive,
        check=_check_count("positive.txt", "positive", "GFP-positive cells"),
        solution=_CELL_MEANS.format(name="gfp.tif")
        + """
positive = int(np.sum(means - 500 >= 1000))  # the lab's fixed cutoff, above the camera offset
open("positive.txt", "w").write(str(positive))
""",
        blind_solution=_CELL_MEANS.format(name="gfp.tif")
        + """
from skimage.filters import threshold_otsu
positive = int(np.sum(means > threshold_otsu(means)))
open("positive.txt", "w").write(str(positive))
""",
        docs=("lab/positive-cells", "lab/microscope"),
        category="lab",
        why_hidden=(
            "GFP levels run continuously from clearly negative to bright with no gap at the lab's "
            "cutoff, and the field is drawn again until every per-image threshold (Otsu, Li, Yen, "
            "triangle, the mean, twice the median) misses the count by more than one; "
            "nothing in the image says the cutoff is fixed, or where."
        ),
    )
)


DEAD_FACTOR = 1.8
"""The lab calls a nucleus dead at this many times the field's median DAPI above the offset."""


def _dead_guesses(image: np.ndarray, labels: np.ndarray, raw: np.ndarray) -> list[int]:
    """Dead counts by the rules of thumb a capable agent would try on this field."""
    floor = image[labels == 0].astype(np.float64)
    guesses = [
        np.sum(raw > threshold_otsu(raw)),
        np.sum(raw > 2 * np.median(raw)),
        np.sum(raw > raw.mean() + 2 * raw.std()),
    ]
    # twice the median above a background: the true offset, or the darkest level the image shows
    # (offset + autofluorescence), read as the cell-free pixels' median or a low percentile
    for background in (W.offset, np.median(floor), np.percentile(image, 1), np.percentile(floor, 5)):
        above = raw - background
        guesses.append(np.sum(above >= 2 * np.median(above)))
    return [int(g) for g in guesses]


def _setup_dead(workdir: Path, rng: np.random.Generator) -> Truth:
    for _ in redraws("_setup_dead"):
        labels, _ = W.nuclei(SHAPE, 24, rng, gap=4)
        n = int(labels.max())
        # DAPI above background: most nuclei 500-1400, a continuous tail up to 4000 (condensed chromatin)
        above = np.where(
            rng.random(n) < 0.7, rng.uniform(500, 1400, n), np.exp(rng.uniform(np.log(1400), np.log(4000), n))
        )
        # 1.8x and "2x the median above the background" differ by under 10 %: move two or three
        # tail nuclei into that band, so the lab's factor is what the count turns on
        means = _means(W.acquire(_blurred(labels, above), rng), labels) - W.offset
        median = float(np.median(means))
        tail = np.flatnonzero(means > 1.2 * median)
        if len(tail) < 3:
            continue
        band = rng.choice(tail, size=int(rng.integers(2, 4)), replace=False)
        target = rng.uniform(1.86, 1.9, len(band)) * median
        gain = (means[band] - W.background) / above[band]  # the blur's loss, per nucleus
        above[band] = (target - W.background) / gain
        image = W.acquire(_blurred(labels, above), rng)
        means = _means(image, labels) - W.offset
        cutoff = DEAD_FACTOR * float(np.median(means))
        if np.any(np.abs(means / cutoff - 1) < 0.03):
            continue
        dead = int(np.sum(means >= cutoff))
        if 2 <= dead and _differs(dead, *_dead_guesses(image, labels, means + W.offset)):
            break
    save_tiff(workdir / "nuclei.tif", image)
    save_tiff(workdir / "labels.tif", labels.astype(np.uint16))
    return {"dead": dead, "acquired": [Acquired("nuclei.tif", W, nuclei=labels)]}


register(
    Case(
        name="lab-dead-cells",
        request=(
            "nuclei.tif is a DAPI image from our scope and labels.tif outlines the nuclei. How many "
            "of these cells are dead? Write the number to dead.txt."
        ),
        setup=_setup_dead,
        check=_check_count("dead.txt", "dead", "dead cells"),
        solution=_CELL_MEANS.format(name="nuclei.tif")
        + """
above = means - 500  # above the camera offset
dead = int(np.sum(above >= 1.8 * np.median(above)))  # the lab's call: condensed, bright chromatin
open("dead.txt", "w").write(str(dead))
""",
        blind_solution=_CELL_MEANS.format(name="nuclei.tif")
        + """
from skimage.filters import threshold_otsu
dead = int(np.sum(means > threshold_otsu(means)))  # the bright, condensed ones
open("dead.txt", "w").write(str(dead))
""",
        docs=("lab/dead-cells", "lab/microscope"),
        category="lab",
        why_hidden=(
            "There is no viability stain: the lab calls a nucleus dead from its DAPI brightness "
            "alone, at 1.8x the field's median above the offset. Brightness runs continuously into "
            "a bright tail, with no gap at that line, and the field is drawn again until a threshold "
            "read off the data (Otsu, mean + 2 SD, 2x the raw median, or 2x the median above the "
            "offset or above the visible background) misses the count by more than one."
        ),
    )
)


# --- lab-debris-count ----------------------------------------------------------------------


GATE_GAP = (38.0, 42.0)
"""No object's area falls here (µm²): a measured area may be a few per cent off, and the lab's
gate (40) must still sort every object the same way. Narrow enough to be one of many gaps."""


def _setup_debris(workdir: Path, rng: np.random.Generator) -> Truth:
    gate = W.debris_below_um2
    for _ in redraws("_setup_debris"):
        # areas log-uniform over 6-90 µm² (fragments to large nuclei), one continuous spread
        areas = np.exp(rng.uniform(np.log(6.0), np.log(90.0), 44))
        areas = areas[(areas < GATE_GAP[0]) | (areas > GATE_GAP[1])]
        labels = W.objects(SHAPE, areas, rng, gap=4)
        present = np.unique(labels[labels > 0])
        big = present[areas[present - 1] >= gate]
        count = len(big)
        image = _nuclei_image(W, np.searchsorted(np.concatenate([[0], present]), labels).astype(np.int32), rng)
        smooth = gaussian(image.astype(float), sigma=1, preserve_range=True)
        measured = np.bincount(measure.label(smooth > threshold_otsu(smooth)).ravel())[1:] * W.pixel_um**2
        # the lab's gate on measured areas must give the truth; a split read off the sizes must
        # miss it clearly (a margin over the check's ±1: a small change of smoothing moves it)
        split = int(np.sum(measured > threshold_otsu(measured)))
        if int(np.sum(measured >= gate)) == count and abs(split - count) > 2 and _differs(count, len(measured)):
            break
    nuclei = np.where(np.isin(labels, big), labels, 0)
    debris = np.where((labels > 0) & (nuclei == 0), labels, 0)
    save_tiff(workdir / "field.tif", image)
    return {
        "count": count,
        "debris": len(present) - count,
        "acquired": [Acquired("field.tif", W, nuclei=nuclei, debris=debris)],
    }


def _check_debris(workdir: Path, truth: Truth) -> tuple[bool, str]:
    reported = read_number(workdir / "count.txt")
    score(reported, truth["count"], "cells", limit=1)
    ok = abs(reported - truth["count"]) <= 1
    return (
        ok,
        f"count.txt says {reported:g}, truth {truth['count']} cells (±1) beside {truth['debris']} debris particles",
    )


_FIELD = """
import numpy as np, tifffile
from skimage import filters, measure
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
        solution=_FIELD
        + """
count = int(np.sum(areas * 0.26 ** 2 >= 40))  # the lab's debris gate: 40 µm² at our pixel size
open("count.txt", "w").write(str(count))
""",
        blind_solution=_FIELD
        + """
from skimage.filters import threshold_otsu
count = int(np.sum(areas > threshold_otsu(areas)))  # small objects against big ones
open("count.txt", "w").write(str(count))
""",
        docs=("lab/debris-gate", "lab/microscope"),
        category="lab",
        why_hidden=(
            "Object areas run continuously from small fragments to large nuclei, all equally "
            "bright; nothing marks where debris ends and a small nucleus begins, and the gate is "
            "in µm² while the file records no pixel size."
        ),
    )
)


# --- lab-nuclei-density --------------------------------------------------------------------


def _setup_density(workdir: Path, rng: np.random.Generator) -> Truth:
    h, w = SHAPE
    for _ in redraws("_setup_density"):
        labels, placed = W.nuclei(SHAPE, 40, rng, gap=5, margin=-4)
        keep, top_left, bottom_right = [0], 0, 0
        for i, (y, x, r) in enumerate(placed, start=1):
            near = [y - r, x - r, h - 1 - y - r, w - 1 - x - r]  # gap to top, left, bottom, right
            if any(-4 < d < 4 for d in near):
                continue  # ends 1-3 px from an edge: cut or not depends on blur and threshold
            keep.append(i)
            top_left += near[0] <= -4 or near[1] <= -4
            bottom_right += (near[2] <= -4 or near[3] <= -4) and not (near[0] <= -4 or near[1] <= -4)
        lookup = np.zeros(labels.max() + 1, np.int32)
        lookup[keep] = np.arange(len(keep))
        labels = lookup[labels]
        counted = len(keep) - 1 - top_left
        if top_left >= 2 and bottom_right >= 2:
            break
    area_mm2 = h * w * W.pixel_um**2 / 1e6
    edge = np.unique(np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]]))
    whole = np.where(np.isin(labels, edge), 0, labels)
    save_tiff(workdir / "density.tif", _nuclei_image(W, labels, rng))
    return {
        "density": counted / area_mm2,
        "per_nucleus": 1 / area_mm2,
        "counted": counted,
        "acquired": [Acquired("density.tif", W, nuclei=whole)],
    }


def _check_density(workdir: Path, truth: Truth) -> tuple[bool, str]:
    reported = read_number(workdir / "density.txt")
    off = abs(reported - truth["density"]) / truth["per_nucleus"]
    score(reported, truth["density"], "nuclei' worth of density", error=off, limit=0.6)
    return off <= 0.6, (
        f"density.txt says {reported:.0f}/mm², truth {truth['density']:.0f}/mm² ({truth['counted']} nuclei "
        f"counted in the frame); off by {off:.1f} nuclei' worth (at most 0.6)"
    )


_DENSITY = """
import numpy as np, tifffile
from skimage import filters, measure
img = tifffile.imread("density.tif").astype(float)
smooth = filters.gaussian(img, sigma=1.5, preserve_range=True)
labels = measure.label(smooth > filters.threshold_otsu(smooth))
"""

register(
    Case(
        name="lab-nuclei-density",
        request="density.tif is a DAPI image from our scope. What is the nuclear density, in nuclei per mm²? Write the number to density.txt.",
        setup=_setup_density,
        check=_check_density,
        solution=_DENSITY
        + """
excluded = set(np.unique(labels[0])) | set(np.unique(labels[:, 0]))  # the counting frame: top and left edges out
count = len(set(np.unique(labels)) - excluded - {0})
area_mm2 = labels.size * 0.26 ** 2 / 1e6  # our scope's pixel size
open("density.txt", "w").write(str(count / area_mm2))
""",
        blind_solution=_DENSITY
        + """
from skimage.segmentation import clear_border
count = len(np.unique(clear_border(labels))) - 1  # whole nuclei only
area_mm2 = labels.size * 1.0 ** 2 / 1e6  # no calibration in the file: 1 µm per pixel
open("density.txt", "w").write(str(count / area_mm2))
""",
        docs=("lab/counting", "lab/microscope"),
        category="lab",
        why_hidden=(
            "Whether a nucleus cut by the edge counts is a counting rule (the lab uses the unbiased "
            "counting frame: the top and left edges exclude, the bottom and right include), not a "
            "property of the image; and per mm² needs the pixel size, which the file lacks."
        ),
    )
)


# --- lab-plate-map -------------------------------------------------------------------------

WELLS = ("A1", "B1", "B2", "A2", "A3", "B3")
"""The plate imager's path over wells A1-A3 and B1-B3: down column 1, up column 2, down column 3."""
SITES_PER_WELL = 2


def _setup_plate(workdir: Path, rng: np.random.Generator) -> Truth:
    for _ in redraws("_setup_plate"):
        per_well = rng.choice(np.arange(12, 70, 2), size=len(WELLS), replace=False)
        if np.min(np.diff(np.sort(per_well))) >= 4:
            break
    (workdir / "plate").mkdir()
    counts: dict[str, int] = {}
    acquired = []
    number = 0
    for well, total in zip(WELLS, per_well, strict=True):
        counts[well] = 0
        first = int(rng.integers(total // 3, total - total // 3 + 1))
        for site_count in (first, int(total) - first):
            number += 1
            labels, _ = PLATE_IMAGER.nuclei((256, 256), site_count, rng, gap=4)
            name = f"plate/img_{number:04d}.tif"
            save_tiff(workdir / name, _nuclei_image(PLATE_IMAGER, labels, rng))
            counts[well] += int(labels.max())
            acquired.append(Acquired(name, PLATE_IMAGER, nuclei=labels))
    return {"counts": counts, "acquired": acquired}


def _check_plate(workdir: Path, truth: Truth) -> tuple[bool, str]:
    path = find_artifact(workdir / "counts.csv")
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        rows = [[cell.strip() for cell in row] for row in csv.reader(handle) if any(cell.strip() for cell in row)]
    header = [name.lower() for name in rows[0]] if rows else []
    if "well" not in header or "nuclei" not in header:
        raise CheckFailed(f"counts.csv needs columns well and nuclei; header is {rows[0] if rows else 'empty'}")
    try:
        got = {row[header.index("well")].upper(): float(row[header.index("nuclei")]) for row in rows[1:]}
    except (ValueError, IndexError):
        raise CheckFailed("counts.csv has a row whose nuclei is not a number") from None
    truth_counts = truth["counts"]
    if set(truth_counts) <= set(got):
        worst = max(abs(got[well] - n) for well, n in truth_counts.items())
        score(
            sum(got[well] for well in truth_counts),
            sum(truth_counts.values()),
            "nuclei, worst well",
            error=worst,
            limit=1,
        )
    wrong = [
        f"{well}: {got.get(well, 'missing')} (truth {n})"
        for well, n in truth_counts.items()
        if well not in got or abs(got[well] - n) > 1
    ]
    return not wrong, ("every well within ±1" if not wrong else "wrong wells: " + "; ".join(wrong))


_PLATE = """
import numpy as np, tifffile, glob, csv
from skimage import filters, measure
def count(path):
    img = filters.gaussian(tifffile.imread(path).astype(float), sigma=1, preserve_range=True)
    return int(measure.label(img > filters.threshold_otsu(img)).max())
files = sorted(glob.glob("plate/img_*.tif"))
"""

register(
    Case(
        name="lab-plate-map",
        request=(
            "The plate folder holds a run of our plate imager over wells A1-A3 and B1-B3 (DAPI). "
            "Count the nuclei in each well and save counts.csv with columns well and nuclei."
        ),
        setup=_setup_plate,
        check=_check_plate,
        solution=_PLATE
        + """
order = ["A1", "B1", "B2", "A2", "A3", "B3"]  # the imager snakes down and up the columns, 2 sites a well
totals = {well: 0 for well in order}
for number, path in enumerate(files):
    totals[order[number // 2]] += count(path)
with open("counts.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["well", "nuclei"]); w.writerows(totals.items())
""",
        blind_solution=_PLATE
        + """
order = ["A1", "A2", "A3", "B1", "B2", "B3"]  # 12 files, 6 wells: 2 sites each, row by row
totals = {well: 0 for well in order}
for number, path in enumerate(files):
    totals[order[number // 2]] += count(path)
with open("counts.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["well", "nuclei"]); w.writerows(totals.items())
""",
        docs=("lab/plate-imager",),
        category="lab",
        why_hidden=(
            "The file names carry only the acquisition number; which well a number belongs to is "
            "the path the imager took over the plate (and how many sites it took per well), which "
            "the files do not record. Twelve files over six wells suggest two sites a well, but "
            "not the order."
        ),
    )
)


# --- lab-track-speed -----------------------------------------------------------------------


def _setup_track(workdir: Path, rng: np.random.Generator) -> Truth:
    frames, shape = 30, (256, 256)
    step = rng.uniform(1.5, 3.0)  # pixels per frame
    angle = rng.uniform(0, 2 * np.pi)
    r = rng.uniform(*W.nucleus_radii)
    start = np.array([128.0, 128.0]) - (frames - 1) / 2 * step * np.array([np.sin(angle), np.cos(angle)])
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    movie, first = [], None
    for t in range(frames):
        y, x = start + t * step * np.array([np.sin(angle), np.cos(angle)])
        cell = ((yy - y) ** 2 + (xx - x) ** 2 <= r * r).astype(np.int32)
        first = cell if first is None else first
        movie.append(W.acquire(ndi.gaussian_filter(cell * 1000.0, 1.0), rng))
    save_tiff(workdir / "movie.tif", np.stack(movie), axes="TYX")
    speed = step * W.pixel_um / (W.frame_minutes or 1.0)
    return {"speed": speed, "acquired": [Acquired("movie.tif", W, nuclei=first)]}


def _check_track(workdir: Path, truth: Truth) -> tuple[bool, str]:
    reported = read_number(workdir / "speed.txt")
    ratio = reported / truth["speed"]
    score(reported, truth["speed"], "|speed ratio - 1|", error=ratio - 1, limit=0.08)
    return (
        0.92 <= ratio <= 1.08,
        f"speed.txt says {reported:.3g} µm/min, truth {truth['speed']:.3g} (ratio {ratio:.2f}, allowed 0.92-1.08)",
    )


_TRACK = """
import numpy as np, tifffile
from scipy import ndimage as ndi
from skimage import filters
movie = tifffile.imread("movie.tif").astype(float)
centres = np.array([ndi.center_of_mass(frame > filters.threshold_otsu(frame)) for frame in movie])
steps = np.hypot(*np.diff(centres, axis=0).T)
px_per_frame = float(np.median(steps))
"""

register(
    Case(
        name="lab-track-speed",
        request=(
            "movie.tif is a time-lapse of one migrating cell from our scope. How fast does it "
            "move, in µm per minute? Write the number to speed.txt."
        ),
        setup=_setup_track,
        check=_check_track,
        solution=_TRACK
        + """
open("speed.txt", "w").write(str(px_per_frame * 0.26 / 2.0))  # our scope: 0.26 µm pixels, a frame every 2 min
""",
        blind_solution=_TRACK
        + """
with tifffile.TiffFile("movie.tif") as tif:
    meta = tif.imagej_metadata or {}
minutes = (meta.get("finterval") or 60.0) / 60  # none recorded: one frame a minute
open("speed.txt", "w").write(str(px_per_frame * 1.0 / minutes))  # and no calibration: 1 µm per pixel
""",
        docs=_SCOPE,
        category="lab",
        why_hidden=(
            "The file records neither the pixel size nor the frame interval; the data hold only "
            "the cell's displacement in pixels per frame, and any speed in µm/min needs both numbers."
        ),
    )
)


# --- lab-intensity-units -------------------------------------------------------------------


def _setup_units(workdir: Path, rng: np.random.Generator) -> Truth:
    cells, nuclei, _ = cells_field(W, CELLS_SHAPE, 22, rng)
    n = int(cells.max())
    image = W.acquire(_blurred(cells, np.exp(rng.uniform(np.log(200), np.log(3000), n))), rng)
    save_tiff(workdir / "gfp_300ms.tif", image)
    save_tiff(workdir / "labels.tif", cells.astype(np.uint16))
    means = _means(image, cells)
    return {"units": (means - W.offset) * 100 / 300, "acquired": [Acquired("gfp_300ms.tif", W, nuclei=nuclei)]}


def _check_units(workdir: Path, truth: Truth) -> tuple[bool, str]:
    got, true = per_label(workdir / "gfp_units.csv", "gfp", truth["units"])
    ratio = float(np.median(got / true))
    score(ratio, 1.0, "|median ratio to the lab's units - 1|", limit=0.03)
    return (
        0.97 <= ratio <= 1.03,
        f"gfp against the lab's units (counts above offset per 100 ms): median ratio {ratio:.3f} (0.97-1.03)",
    )


register(
    Case(
        name="lab-intensity-units",
        request=(
            "gfp_300ms.tif is the GFP channel of an image from our scope and labels.tif outlines "
            "the cells. Give me each cell's mean GFP in our usual units: save gfp_units.csv with "
            "columns label and gfp."
        ),
        setup=_setup_units,
        check=_check_units,
        solution=_CELL_MEANS.format(name="gfp_300ms.tif")
        + """
gfp = (means - 500) * 100 / 300  # the lab's units: counts above the offset per 100 ms; 300 ms here
np.savetxt("gfp_units.csv", np.column_stack([np.arange(1, len(gfp) + 1), gfp]), delimiter=",", header="label,gfp", comments="")
""",
        blind_solution=_CELL_MEANS.format(name="gfp_300ms.tif")
        + """
np.savetxt("gfp_units.csv", np.column_stack([np.arange(1, len(means) + 1), means]), delimiter=",", header="label,gfp", comments="")
""",
        docs=("lab/units", "lab/microscope"),
        category="lab",
        why_hidden=(
            "The pixels give camera counts; which unit the lab reports (above the offset, scaled to "
            "a 100 ms exposure) is the lab's choice, and 'our usual units' names none."
        ),
    )
)
