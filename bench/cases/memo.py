"""Two-session cases: session 1 states a convention and asks the agent to keep it; session 2, a
fresh server, gets a related request without it.

Only session 2's artifacts are scored: the case passes when session 2 applied the convention,
which it can know only from what session 1 wrote down (in the docs arm session 2 runs on session
1's config tree; in the docs-off arm on a fresh one, so the pair prices that memory). Each
convention is one the data cannot reveal (``why_hidden``). ``memo`` is the doc the scripted agent
writes in session 1 (a model may write any doc, or into the index; the report says whether one was
written and read). The instruments are the lab's (``bench.cases.scope``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

from bench.cases import Case, CheckFailed, Truth, register, score
from bench.cases._kit import disks, find_artifact, per_label, read_number, redraws, save_tiff, threshold_counts
from bench.cases.nuclei import nuclei_image
from bench.cases.scope import CONFOCAL, INCUBATOR, PLATE_IMAGER, SCANNER, WIDEFIELD, cells_field, write_cells

SHAPE = (256, 256)


# --- memo-border-rule ----------------------------------------------------------------------


BORDER_PX = 15
"""The lab's rule: a nucleus that comes within this many pixels of the image border is not counted
(``clear_border(labels, buffer_size=15)``), whether it touches the border or not."""


def _border_field(rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Nuclei of which at least 3 cross the edge and at least 3 end 4-11 px short of it (inside
    the lab's 15-px band, but not touching); returns the image and how many the lab counts."""
    for _ in redraws("_border_field"):
        labels, counted, crossing, near = _border_labels(rng)
        if crossing >= 3 and near >= 3:
            return nuclei_image(labels, rng), counted
    raise AssertionError("redraws() raises before its loop can end")


def _border_labels(rng: np.random.Generator) -> tuple[np.ndarray, int, int, int]:
    """Labels, and how many nuclei lie clear of the 15-px band, cross the edge, or lie in the band
    without touching the edge. A nucleus whose gap to the edge is near 0 or near 15 px would be
    called either way after blur and thresholding: such nuclei are dropped from the data."""
    labels, placed = disks(SHAPE, 30, rng, radius=(8, 11), gap=6, margin=-3)
    keep = np.zeros(labels.max() + 1, bool)
    counted = crossing = near = 0
    for i, (y, x, r) in enumerate(placed, start=1):
        gap = min(y, x, SHAPE[0] - 1 - y, SHAPE[1] - 1 - x) - r  # px between the disk and the edge
        if gap <= -3:
            crossing += 1
        elif 4 <= gap <= BORDER_PX - 4:
            near += 1
        elif gap >= BORDER_PX + 5:
            counted += 1
        else:
            continue
        keep[i] = True
    return np.where(keep[labels], labels, 0), counted, crossing, near


def _setup_border(workdir: Path, rng: np.random.Generator) -> Truth:
    first, _ = _border_field(rng)
    second, counted = _border_field(rng)
    save_tiff(workdir / "plate1.tif", first)
    save_tiff(workdir / "plate2.tif", second)
    return {"counted": counted}


def _check_border(workdir: Path, truth: Truth) -> tuple[bool, str]:
    reported = read_number(workdir / "count_plate2.txt")
    score(reported, truth["counted"], "nuclei", limit=1)
    ok = abs(reported - truth["counted"]) <= 1
    return ok, (
        f"count_plate2.txt says {reported:g}; {truth['counted']} nuclei lie more than {BORDER_PX} px from "
        "the border (±1)"
    )


_COUNT = """
import numpy as np, tifffile
from skimage import filters, measure, segmentation
def count(path, buffer_px=None):
    img = filters.gaussian(tifffile.imread(path).astype(float), sigma=1.5, preserve_range=True)
    labels = measure.label(img > filters.threshold_otsu(img))
    if buffer_px is not None:
        labels = segmentation.clear_border(labels, buffer_size=buffer_px)
    return len(np.unique(labels[labels > 0]))
"""

register(
    Case(
        name="memo-border-rule",
        first_request=(
            "plate1.tif is one field of a plate. Count the nuclei in it and write the number to "
            "count_plate1.txt. In our lab we never count a nucleus that comes within 15 pixels of "
            "the image border, whether it touches the border or not: the edge of these fields is "
            "vignetted and those nuclei are mis-segmented. Please keep that rule for every nucleus "
            "count of a field you do for us from now on."
        ),
        first_solution=_COUNT + 'open("count_plate1.txt", "w").write(str(count("plate1.tif", 15)))\n',
        request=(
            "plate2.tif is another field of that plate. Count the nuclei in it (a count for the "
            "field, not a density) and write the number to count_plate2.txt."
        ),
        setup=_setup_border,
        check=_check_border,
        solution=_COUNT + 'open("count_plate2.txt", "w").write(str(count("plate2.tif", 15)))  # the kept rule\n',
        blind_solution=_COUNT + 'open("count_plate2.txt", "w").write(str(count("plate2.tif", 0)))  # whole nuclei\n',
        memo=(
            "counting-rules",
            (
                "# Counting rules\n\nWhen counting the nuclei of a field (plates and the like), never count a "
                "nucleus that comes within 15 px of the image border, touching it or not "
                "(skimage.segmentation.clear_border(labels, buffer_size=15) before counting): the field's "
                "edge is vignetted and those nuclei are mis-segmented.\n"
            ),
        ),
        docs=("counting-rules",),
        category="two-session",
        why_hidden=(
            "The nuclei near the border are visible, but which of them a lab counts (all, those "
            "not touching it, a counting frame, or none within some distance) is its rule, stated "
            "only in session 1's request. plate2.tif holds at least three nuclei cut by the border "
            "and at least three that end 4-11 px short of it, so neither counting everything nor "
            "dropping only the nuclei that touch the border comes within one of the lab's count."
        ),
    )
)


# --- memo-frame-interval -------------------------------------------------------------------


def _movie(rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A 40-frame movie whose mean intensity peaks at one frame; returns it and that frame."""
    frames = 40
    peak = int(rng.integers(8, 32))
    t = np.arange(frames)
    level = 100 + 900 * np.exp(-((t - peak) ** 2) / (2 * 3.0**2))
    return INCUBATOR.acquire(level[:, None, None] * np.ones((frames, 64, 64)), rng), peak


def _setup_interval(workdir: Path, rng: np.random.Generator) -> Truth:
    first, _ = _movie(rng)
    second, peak = _movie(rng)
    save_tiff(workdir / "movie1.tif", first, axes="TYX")
    save_tiff(workdir / "movie2.tif", second, axes="TYX")
    return {"minutes": peak * (INCUBATOR.frame_minutes or 0.0)}


def _check_interval(workdir: Path, truth: Truth) -> tuple[bool, str]:
    reported = read_number(workdir / "peak_minutes.txt")
    score(reported, truth["minutes"], "minutes", limit=0.5)
    ok = abs(reported - truth["minutes"]) <= 0.5
    return ok, f"peak_minutes.txt says {reported:g}, truth {truth['minutes']:g} min (±0.5; frames are 30 s apart)"


_TRACE = """
import numpy as np, tifffile
def trace(path):
    return tifffile.imread(path).reshape(40, -1).mean(1)
"""

register(
    Case(
        name="memo-frame-interval",
        first_request=(
            "movie1.tif is a live-imaging run from our incubator scope. Frames are taken every 30 "
            "seconds, which the files do not record. Save the mean intensity over time as "
            "trace1.csv with columns minutes and intensity. Keep the frame interval in mind for "
            "our next movies."
        ),
        first_solution=_TRACE
        + """
m = trace("movie1.tif")
np.savetxt("trace1.csv", np.column_stack([np.arange(len(m)) * 0.5, m]), delimiter=",", header="minutes,intensity", comments="")
""",
        request="movie2.tif is another live-imaging run. At what time, in minutes from the start, is its mean intensity highest? Write the number to peak_minutes.txt.",
        setup=_setup_interval,
        check=_check_interval,
        solution=_TRACE
        + 'open("peak_minutes.txt", "w").write(str(int(np.argmax(trace("movie2.tif"))) * 0.5))  # 30 s frames\n',
        blind_solution=_TRACE
        + """
with tifffile.TiffFile("movie2.tif") as tif:
    finterval = tif.imagej_metadata.get("finterval") if tif.imagej_metadata else None
seconds = finterval or 1.0  # no interval recorded: one frame per second
open("peak_minutes.txt", "w").write(str(int(np.argmax(trace("movie2.tif"))) * seconds / 60))
""",
        memo=(
            "live-imaging",
            (
                "# Live imaging on the incubator scope\n\nFrames are 30 s apart (0.5 min); the files do not record "
                "the interval. Time of frame k (from 0) = k × 0.5 min.\n"
            ),
        ),
        docs=("live-imaging",),
        category="two-session",
        why_hidden="The movie records no frame interval; the peak's frame number is all the data hold.",
    )
)


# --- memo-channel-map ----------------------------------------------------------------------


def _setup_confocal(workdir: Path, rng: np.random.Generator) -> Truth:
    truth: Truth = {}
    for n in (1, 2):
        cells, nuclei, levels = cells_field(CONFOCAL, (320, 320), 14, rng)
        image = write_cells(CONFOCAL, workdir, f"confocal{n}.tif", cells, nuclei, levels, rng)
        save_tiff(workdir / f"confocal{n}_labels.tif", cells.astype(np.uint16))
        truth["mcherry"] = np.asarray(
            ndi.mean(image[CONFOCAL.channels.index("mCherry")].astype(float), cells, np.arange(1, cells.max() + 1))
        )
    return truth


def _check_confocal(workdir: Path, truth: Truth) -> tuple[bool, str]:
    got, true = per_label(workdir / "mcherry2.csv", "mean_mcherry", truth["mcherry"])
    r = float(np.corrcoef(got, true)[0, 1])
    score(r, 1.0, "1 - Pearson r with the true channel", limit=0.02)
    return r >= 0.98, f"per-cell mean_mcherry vs the true mCherry channel: Pearson r {r:.3f} (≥ 0.98)"


def _mcherry(n: int, channel: int, why: str) -> str:
    return f"""
import numpy as np, tifffile
from scipy import ndimage as ndi
image = tifffile.imread("confocal{n}.tif").astype(float)
labels = tifffile.imread("confocal{n}_labels.tif")
index = np.arange(1, labels.max() + 1)
mcherry = ndi.mean(image[{channel}], labels, index)  # {why}
np.savetxt("mcherry{n}.csv", np.column_stack([index, mcherry]), delimiter=",", header="label,mean_mcherry", comments="")
"""


register(
    Case(
        name="memo-channel-map",
        first_request=(
            "confocal1.tif comes from the new confocal, and confocal1_labels.tif outlines the "
            "cells. The confocal's software writes its four channels in the order mCherry, Cy5, "
            "GFP, Hoechst (not by wavelength). Save each cell's mean mCherry as mcherry1.csv with "
            "columns label and mean_mcherry, and remember this channel map for the confocal's files."
        ),
        first_solution=_mcherry(1, 0, "the confocal's map"),
        request=(
            "confocal2.tif is from the new confocal and confocal2_labels.tif outlines the cells. "
            "Save each cell's mean mCherry as mcherry2.csv with columns label and mean_mcherry."
        ),
        setup=_setup_confocal,
        check=_check_confocal,
        solution=_mcherry(2, 0, "the kept map"),
        blind_solution=_mcherry(2, 1, "Hoechst is last: the rest by wavelength, GFP, mCherry, Cy5 reversed"),
        memo=(
            "confocal-channels",
            (
                "# The new confocal's channel map\n\nFiles from the new confocal hold four channels in the "
                "software's order: 0 = mCherry, 1 = Cy5, 2 = GFP, 3 = Hoechst (not by wavelength).\n"
            ),
        ),
        docs=("confocal-channels",),
        category="two-session",
        why_hidden=(
            "mCherry, Cy5 and GFP fill the same cells at levels drawn alike; only Hoechst stands out "
            "(it sits in the nuclei). The file names no channel, and the software's order follows "
            "no wavelength rule, so only session 1's request says which channel is mCherry."
        ),
    )
)


# --- memo-table-format ---------------------------------------------------------------------


def _setup_tables(workdir: Path, rng: np.random.Generator) -> Truth:
    truth: Truth = {}
    for name in ("first", "second"):
        labels, _ = WIDEFIELD.nuclei((256, 256), 12, rng)
        image = WIDEFIELD.acquire(
            ndi.gaussian_filter(np.concatenate([[0.0], rng.uniform(700, 1300, int(labels.max()))])[labels], 1.0), rng
        )
        save_tiff(workdir / f"{name}.tif", image)
        save_tiff(workdir / f"{name}_labels.tif", labels.astype(np.uint16))
        truth["means"] = np.asarray(ndi.mean(image.astype(float), labels, np.arange(1, labels.max() + 1)))
    return truth


def _check_tables(workdir: Path, truth: Truth) -> tuple[bool, str]:
    path = find_artifact(workdir / "intensities_second.csv")
    lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    if len(lines) < 2:
        raise CheckFailed(f"{path.name} has no rows")
    if ";" not in lines[0]:
        return (
            False,
            f"{path.name} is not separated by ';' (header {lines[0]!r}): the lab's spreadsheets read ';' and decimal commas",
        )
    header = [name.strip().lower() for name in lines[0].split(";")]
    if "label" not in header or "mean" not in header:
        raise CheckFailed(f"{path.name} needs columns label and mean; header is {lines[0]!r}")
    means = truth["means"]
    got: dict[int, float] = {}
    dots = 0
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.split(";")]
        try:
            value = cells[header.index("mean")]
            dots += "." in value
            got[int(float(cells[header.index("label")].replace(",", ".")))] = float(value.replace(",", "."))
        except (ValueError, IndexError):
            raise CheckFailed(f"{path.name}: cannot read the row {line!r}") from None
    wrong = sum(abs(got.get(label, -1e9) - means[label - 1]) > 0.5 for label in range(1, len(means) + 1))
    # a value with a decimal point is a value the lab's spreadsheet misreads: it counts as wrong
    score(
        len(means) - wrong,
        len(means),
        "means the lab's spreadsheet misreads",
        error=min(len(means), wrong + dots),
        limit=0,
    )
    if dots:
        return False, f"{path.name}: {dots} values use a decimal point; the lab's spreadsheets need a decimal comma"
    off = [label for label in range(1, len(means) + 1) if abs(got.get(label, -1e9) - means[label - 1]) > 0.5]
    return not off, f"';' and decimal commas; {len(means) - len(off)} of {len(means)} means right (±0.5)"


def _intensities(name: str, german: bool) -> str:
    write = (
        'w = csv.writer(f, delimiter=";")\n    w.writerow(["label", "mean"])\n'
        '    w.writerows([i, f"{m:.2f}".replace(".", ",")] for i, m in enumerate(means, 1))'
        if german
        else 'w = csv.writer(f)\n    w.writerow(["label", "mean"])\n    w.writerows([i, f"{m:.2f}"] for i, m in enumerate(means, 1))'
    )
    return f"""
import csv, numpy as np, tifffile
from scipy import ndimage as ndi
image = tifffile.imread("{name}.tif").astype(float)
labels = tifffile.imread("{name}_labels.tif")
means = ndi.mean(image, labels, np.arange(1, labels.max() + 1))
with open("intensities_{name}.csv", "w", newline="") as f:
    {write}
"""


register(
    Case(
        name="memo-table-format",
        first_request=(
            "first.tif is a DAPI image and first_labels.tif outlines its nuclei. Save each "
            "nucleus's mean intensity as intensities_first.csv with columns label and mean. Our "
            "lab's spreadsheets are German: write every table you save for us with ';' between "
            "columns and a decimal comma, from now on."
        ),
        first_solution=_intensities("first", german=True),
        request=(
            "second.tif is a DAPI image and second_labels.tif outlines its nuclei. Save each "
            "nucleus's mean intensity as intensities_second.csv with columns label and mean."
        ),
        setup=_setup_tables,
        check=_check_tables,
        solution=_intensities("second", german=True),
        blind_solution=_intensities("second", german=False),
        memo=(
            "table-format",
            (
                "# Tables for the lab\n\nEvery table saved for the lab: ';' between columns and a decimal "
                'comma (their spreadsheets are German): csv.writer(f, delimiter=";") and '
                'f"{x:.2f}".replace(".", ",").\n'
            ),
        ),
        docs=("table-format",),
        category="two-session",
        why_hidden="A table's separator and decimal mark are its reader's locale; the images have none.",
    )
)


# --- memo-edu-cutoff -----------------------------------------------------------------------

EDU_CUTOFF = 800.0
"""EdU-positive: mean EdU at least this many counts above the image's median (the dish)."""


def _edu_field(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    """An EdU image and its nuclei whose levels run continuously through the cutoff (none within
    60 counts of it), drawn again until every per-image threshold (Otsu, Li, Yen, triangle, the
    mean, twice the median) would miss the count by more than one."""
    for _ in redraws("_edu_field"):
        labels, _ = PLATE_IMAGER.nuclei((256, 256), 40, rng, gap=4)
        n = int(labels.max())
        image = PLATE_IMAGER.acquire(
            ndi.gaussian_filter(
                np.concatenate([[0.0], np.exp(rng.uniform(np.log(100), np.log(8000), n))])[labels], 1.0
            ),
            rng,
        )
        means = np.asarray(ndi.mean(image.astype(float), labels, np.arange(1, n + 1))) - float(np.median(image))
        if np.any(np.abs(means - EDU_CUTOFF) < 60):
            continue
        positive = int(np.sum(means >= EDU_CUTOFF))
        # on the values above the image's median, above the cell-free pixels' median, and raw
        floor = float(np.median(image[labels == 0]))
        shifts = (0.0, float(np.median(image)) - floor, float(np.median(image)))
        guesses = [count for shift in shifts for count in threshold_counts(means + shift).values()]
        if 3 <= positive <= n - 3 and all(abs(guess - positive) > 1 for guess in guesses):
            return image, labels, positive
    raise AssertionError("redraws() raises before its loop can end")


def _setup_edu(workdir: Path, rng: np.random.Generator) -> Truth:
    truth: Truth = {}
    for n in (1, 2):
        image, labels, positive = _edu_field(rng)
        save_tiff(workdir / f"edu{n}.tif", image)
        save_tiff(workdir / f"edu{n}_labels.tif", labels.astype(np.uint16))
        truth["positive"] = positive
    return truth


def _check_edu(workdir: Path, truth: Truth) -> tuple[bool, str]:
    reported = read_number(workdir / "edu2_positive.txt")
    score(reported, truth["positive"], "nuclei", limit=0)
    return reported == truth[
        "positive"
    ], f"edu2_positive.txt says {reported:g}, truth {truth['positive']} EdU-positive nuclei (exact)"


def _edu(n: int, rule: str) -> str:
    return f"""
import numpy as np, tifffile
from scipy import ndimage as ndi
image = tifffile.imread("edu{n}.tif").astype(float)
labels = tifffile.imread("edu{n}_labels.tif")
means = np.asarray(ndi.mean(image, labels, np.arange(1, labels.max() + 1))) - np.median(image)
{rule}
open("edu{n}_positive.txt", "w").write(str(positive))
"""


register(
    Case(
        name="memo-edu-cutoff",
        first_request=(
            "edu1.tif is an EdU stain and edu1_labels.tif outlines the nuclei. In our EdU assay a "
            "nucleus is EdU-positive when its mean EdU signal is at least 800 counts above the dish "
            "background, taken as the median of the whole image. How many are positive? Write the "
            "number to edu1_positive.txt, and use this rule for all our EdU images."
        ),
        first_solution=_edu(1, "positive = int(np.sum(means >= 800))"),
        request=(
            "edu2.tif is another EdU stain and edu2_labels.tif outlines the nuclei. How many nuclei "
            "are EdU-positive? Write the number to edu2_positive.txt."
        ),
        setup=_setup_edu,
        check=_check_edu,
        solution=_edu(2, "positive = int(np.sum(means >= 800))  # the assay's kept rule"),
        blind_solution=_edu(
            2, "from skimage.filters import threshold_otsu\npositive = int(np.sum(means > threshold_otsu(means)))"
        ),
        memo=(
            "edu-assay",
            (
                "# EdU assay\n\nA nucleus is EdU-positive when its mean EdU signal minus the median of the whole "
                "image (the dish background) is at least 800 counts. A fixed cutoff: no per-image threshold.\n"
            ),
        ),
        docs=("edu-assay",),
        category="two-session",
        why_hidden=(
            "The cutoff was set once for the assay; EdU levels run continuously through it, and "
            "the image is drawn again until every per-image threshold (Otsu, Li, Yen, triangle, "
            "the mean, twice the median) misses the count by more than one; only session 1's "
            "request states the rule."
        ),
    )
)


# --- memo-scanner-pixel --------------------------------------------------------------------


def _tissue(rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A lobed tissue section on the scanner: its image and its area in pixels."""
    shape = (384, 384)
    yy, xx = np.mgrid[: shape[0], : shape[1]].astype(np.float64)
    angle = np.arctan2(yy - 192, xx - 192)
    radius = 120 * (1 + 0.18 * np.sin(3 * angle + rng.uniform(0, 6)) + 0.1 * np.cos(5 * angle + rng.uniform(0, 6)))
    radius *= rng.uniform(0.7, 1.0)
    mask = np.hypot(yy - 192, xx - 192) <= radius
    texture = 600 + 300 * ndi.gaussian_filter(rng.standard_normal(shape), 3) / 0.1
    return SCANNER.acquire(ndi.gaussian_filter(mask * np.clip(texture, 200, None), 1.0), rng), int(mask.sum())


def _setup_scanner(workdir: Path, rng: np.random.Generator) -> Truth:
    truth: Truth = {}
    for n in (1, 2):
        image, pixels = _tissue(rng)
        save_tiff(workdir / f"tissue{n}.tif", image)
        truth["mm2"] = pixels * SCANNER.pixel_um**2 / 1e6
    return truth


def _check_scanner(workdir: Path, truth: Truth) -> tuple[bool, str]:
    reported = read_number(workdir / "area2.txt")
    ratio = reported / truth["mm2"]
    score(reported, truth["mm2"], "|area ratio - 1|", error=ratio - 1, limit=0.05)
    return (
        0.95 <= ratio <= 1.05,
        f"area2.txt says {reported:.4g} mm², truth {truth['mm2']:.4g} (ratio {ratio:.3f}, allowed 0.95-1.05)",
    )


def _area(n: int, pixel_um: str) -> str:
    return f"""
import numpy as np, tifffile
from scipy import ndimage as ndi
from skimage import filters
img = filters.gaussian(tifffile.imread("tissue{n}.tif").astype(float), sigma=2, preserve_range=True)
mask = ndi.binary_fill_holes(img > filters.threshold_otsu(img))
pixel_um = {pixel_um}
open("area{n}.txt", "w").write(str(mask.sum() * pixel_um ** 2 / 1e6))
"""


register(
    Case(
        name="memo-scanner-pixel",
        first_request=(
            "tissue1.tif is a section from the slide scanner, which saves no pixel size: at the "
            "20x scan we use it is 0.442 µm per pixel. How large is the tissue section, in mm²? "
            "Write the number to area1.txt, and keep the scanner's pixel size for its files."
        ),
        first_solution=_area(1, "0.442"),
        request="tissue2.tif is a section from the slide scanner. How large is it, in mm²? Write the number to area2.txt.",
        setup=_setup_scanner,
        check=_check_scanner,
        solution=_area(2, "0.442  # the scanner's kept pixel size"),
        blind_solution=_area(2, "0.5  # a 20x slide scan is usually about 0.5 µm per pixel"),
        memo=(
            "slide-scanner",
            "# The slide scanner\n\nIts files carry no pixel size: 0.442 µm per pixel at our 20x scan.\n",
        ),
        docs=("slide-scanner",),
        category="two-session",
        why_hidden=(
            "The file records no pixel size, and a tissue section has no size of its own to infer "
            "it from; the usual 20x guess (0.5 µm) is 27 % off in area. Only session 1's request says 0.442."
        ),
    )
)
