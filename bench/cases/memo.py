"""Two-session cases: session 1 states a convention and asks the agent to keep it; session 2, a
fresh server on the same config tree, gets a related request without it.

Only session 2's artifacts are scored: the case passes when session 2 applied the convention,
which it can know only from what session 1 wrote down. ``memo`` is the doc the scripted agent
writes in session 1 (a model may write any doc; the report says whether one was written and read).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.cases import Case, Truth, register
from bench.cases._kit import disks, read_number, save_tiff, to_uint16
from bench.cases.nuclei import nuclei_image

SHAPE = (256, 256)


# --- memo-border-rule ----------------------------------------------------------------------


def _border_field(rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Nuclei of which at least 5 cross the edge; returns the image and how many do not touch it."""
    while True:
        labels, inside, crossing = _border_labels(rng)
        if crossing >= 5:
            return nuclei_image(labels, rng), inside


def _border_labels(rng: np.random.Generator) -> tuple[np.ndarray, int, int]:
    labels, placed = disks(SHAPE, 30, rng, radius=(8, 11), gap=6, margin=-3)
    keep = np.zeros(labels.max() + 1, bool)
    for i, (y, x, r) in enumerate(placed, start=1):
        distance = min(y, x, SHAPE[0] - 1 - y, SHAPE[1] - 1 - x)
        # a nucleus ending 1-3 px from the edge is ambiguous after blur: drop it from the data
        keep[i] = not (r - 3 < distance < r + 4)
    labels = np.where(keep[labels], labels, 0)
    inside = sum(1 for i, (y, x, r) in enumerate(placed, start=1) if keep[i] and min(y, x, SHAPE[0] - 1 - y, SHAPE[1] - 1 - x) >= r + 4)
    return labels, inside, int(keep[1:].sum()) - inside


def _setup_border(workdir: Path, rng: np.random.Generator) -> Truth:
    first, _ = _border_field(rng)
    second, inside = _border_field(rng)
    save_tiff(workdir / "plate1.tif", first)
    save_tiff(workdir / "plate2.tif", second)
    return {"inside": inside}


def _check_border(workdir: Path, truth: Truth) -> tuple[bool, str]:
    reported = read_number(workdir / "count_plate2.txt")
    ok = abs(reported - truth["inside"]) <= 1
    return ok, f"count_plate2.txt says {reported:g}; {truth['inside']} nuclei do not touch the border (±1)"


_COUNT = """
import numpy as np, tifffile
from skimage import filters, measure, segmentation
def count(path, drop_border):
    img = filters.gaussian(tifffile.imread(path).astype(float), sigma=1.5, preserve_range=True)
    labels = measure.label(img > filters.threshold_otsu(img))
    if drop_border:
        labels = segmentation.clear_border(labels)
    return len(np.unique(labels[labels > 0]))
"""

register(
    Case(
        name="memo-border-rule",
        first_request=(
            "Count the nuclei in plate1.tif and write the number to count_plate1.txt. In our lab "
            "we never count a nucleus that touches the image border: it is cut and its area is "
            "wrong. Please keep that rule for every count you do for us from now on."
        ),
        first_solution=_COUNT + 'open("count_plate1.txt", "w").write(str(count("plate1.tif", True)))\n',
        request="Count the nuclei in plate2.tif and write the number to count_plate2.txt.",
        setup=_setup_border,
        check=_check_border,
        solution=_COUNT + 'open("count_plate2.txt", "w").write(str(count("plate2.tif", True)))  # the kept rule\n',
        blind_solution=_COUNT + 'open("count_plate2.txt", "w").write(str(count("plate2.tif", False)))\n',
        memo=(
            "counting-rules",
            (
                "# Counting rules\n\nWhen counting nuclei or cells, never count an object that touches the image "
                "border (skimage.segmentation.clear_border before counting): it is cut and its area is wrong.\n"
            ),
        ),
        docs=("counting-rules",),
        category="two-session",
    )
)


# --- memo-frame-interval -------------------------------------------------------------------


def _movie(rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A 40-frame movie whose mean intensity peaks at one frame; returns it and that frame."""
    frames = 40
    peak = int(rng.integers(8, 32))
    t = np.arange(frames)
    level = 300 + 900 * np.exp(-((t - peak) ** 2) / (2 * 3.0**2))
    movie = level[:, None, None] * np.ones((frames, 64, 64)) + rng.normal(0, 10, (frames, 64, 64))
    return to_uint16(movie), peak


def _setup_interval(workdir: Path, rng: np.random.Generator) -> Truth:
    first, _ = _movie(rng)
    second, peak = _movie(rng)
    save_tiff(workdir / "movie1.tif", first, axes="TYX")
    save_tiff(workdir / "movie2.tif", second, axes="TYX")
    return {"minutes": peak * 0.5}


def _check_interval(workdir: Path, truth: Truth) -> tuple[bool, str]:
    reported = read_number(workdir / "peak_minutes.txt")
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
        first_solution=_TRACE + """
m = trace("movie1.tif")
np.savetxt("trace1.csv", np.column_stack([np.arange(len(m)) * 0.5, m]), delimiter=",", header="minutes,intensity", comments="")
""",
        request="movie2.tif is another live-imaging run. At what time, in minutes from the start, is its mean intensity highest? Write the number to peak_minutes.txt.",
        setup=_setup_interval,
        check=_check_interval,
        solution=_TRACE + 'open("peak_minutes.txt", "w").write(str(int(np.argmax(trace("movie2.tif"))) * 0.5))  # 30 s frames\n',
        blind_solution=_TRACE + """
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
    )
)


# --- memo-channel-map ----------------------------------------------------------------------


def _two_channel(rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Channel 0: a membrane-like marker on a few large cells; channel 1: the nuclei."""
    nuclei, _ = disks(SHAPE, int(rng.integers(25, 35)), rng, radius=(6, 9), gap=8)
    cells, _ = disks(SHAPE, int(rng.integers(6, 10)), rng, radius=(30, 40), gap=4)
    membrane = to_uint16(150 + 900.0 * (cells > 0) + rng.normal(0, 20, SHAPE))
    return np.stack([membrane, nuclei_image(nuclei, rng)]), int(nuclei.max())


def _setup_channels(workdir: Path, rng: np.random.Generator) -> Truth:
    first, _ = _two_channel(rng)
    second, count = _two_channel(rng)
    save_tiff(workdir / "confocal1.tif", first, axes="CYX")
    save_tiff(workdir / "confocal2.tif", second, axes="CYX")
    return {"count": count}


def _check_channels(workdir: Path, truth: Truth) -> tuple[bool, str]:
    reported = read_number(workdir / "nuclei_confocal2.txt")
    ok = abs(reported - truth["count"]) <= 1
    return ok, f"nuclei_confocal2.txt says {reported:g}, truth {truth['count']} nuclei (±1)"


_NUCLEI = """
import numpy as np, tifffile
from skimage import filters, measure
def nuclei(path, channel):
    img = filters.gaussian(tifffile.imread(path)[channel].astype(float), sigma=1.5, preserve_range=True)
    return int(measure.label(img > filters.threshold_otsu(img)).max())
"""

register(
    Case(
        name="memo-channel-map",
        first_request=(
            "confocal1.tif comes from the new confocal. On that instrument channel 0 is the "
            "membrane marker and channel 1 is the Hoechst nuclear stain. Count the nuclei and "
            "write the number to nuclei_confocal1.txt, and remember this channel map for the "
            "confocal's files."
        ),
        first_solution=_NUCLEI + 'open("nuclei_confocal1.txt", "w").write(str(nuclei("confocal1.tif", 1)))\n',
        request="confocal2.tif is from the new confocal. Count the nuclei and write the number to nuclei_confocal2.txt.",
        setup=_setup_channels,
        check=_check_channels,
        solution=_NUCLEI + 'open("nuclei_confocal2.txt", "w").write(str(nuclei("confocal2.tif", 1)))  # the kept map\n',
        blind_solution=_NUCLEI + 'open("nuclei_confocal2.txt", "w").write(str(nuclei("confocal2.tif", 0)))  # nuclear stain first, as usual\n',
        memo=(
            "confocal-channels",
            (
                "# The new confocal's channel map\n\nFiles from the new confocal: channel 0 = membrane marker, "
                "channel 1 = Hoechst (nuclei). Count nuclei on channel 1.\n"
            ),
        ),
        docs=("confocal-channels",),
        category="two-session",
    )
)
