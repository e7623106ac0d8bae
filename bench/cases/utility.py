"""Everyday cases no shipped procedure covers: 8-bit export, ROI crop, line profile, channel split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

from bench.cases import Case, Truth, register
from bench.cases import score as declare
from bench.cases._kit import disks, load_tiff, ncc, read_csv, save_tiff, smooth_texture, to_uint16

# --- rescale-8bit --------------------------------------------------------------------------


def _setup_rescale(workdir: Path, rng: np.random.Generator) -> Truth:
    image = to_uint16(150 + 3700 * smooth_texture((200, 240), rng, sigma=5) + rng.normal(0, 20, (200, 240)))
    image = np.clip(image, 0, 4095).astype(np.uint16)
    save_tiff(workdir / "image12.tif", image)
    low, high = float(image.min()), float(image.max())
    return {"expected": (image.astype(np.float64) - low) / (high - low) * 255}


def _check_rescale(workdir: Path, truth: Truth) -> tuple[bool, str]:
    expected = truth["expected"]
    got = load_tiff(workdir / "image8.tif", ndim=2, shape=expected.shape)
    if got.dtype != np.uint8:
        return False, f"image8.tif is {got.dtype}, not 8-bit (uint8)"
    error = np.abs(got.astype(np.float64) - expected).max()
    declare(float(error), 0.0, "grey levels, worst pixel", limit=1.0)
    return error <= 1.0, f"max deviation from the linear min→0, max→255 stretch: {error:.2f} grey levels (limit 1)"


register(
    Case(
        name="rescale-8bit",
        request=(
            "image12.tif is a 12-bit camera image stored as 16-bit. For a figure I need an 8-bit "
            "version: stretch it linearly so the darkest pixel becomes 0 and the brightest 255, "
            "and save it as image8.tif (uint8)."
        ),
        setup=_setup_rescale,
        check=_check_rescale,
        solution="""
import numpy as np, tifffile
img = tifffile.imread("image12.tif").astype(np.float64)
out = (img - img.min()) / (img.max() - img.min()) * 255
tifffile.imwrite("image8.tif", np.round(out).astype(np.uint8))
""",
    )
)


# --- crop-roi ------------------------------------------------------------------------------


def _setup_crop(workdir: Path, rng: np.random.Generator) -> Truth:
    image = to_uint16(200 + 3000 * smooth_texture((300, 360), rng, sigma=3))
    save_tiff(workdir / "overview.tif", image)
    return {"roi": image[100:228, 40:200]}


def _check_crop(workdir: Path, truth: Truth) -> tuple[bool, str]:
    expected = truth["roi"]
    got = load_tiff(workdir / "roi.tif", ndim=2, shape=expected.shape)
    declare(float(np.abs(got.astype(np.float64) - expected).max()), 0.0, "grey levels, worst pixel", limit=0.0)
    if got.dtype != expected.dtype:
        return False, f"roi.tif is {got.dtype}; the original is {expected.dtype} and should stay so"
    if not np.array_equal(got, expected):
        return False, "roi.tif pixels differ from the requested rectangle of overview.tif"
    return True, f"roi.tif is exactly the {expected.shape} rectangle"


register(
    Case(
        name="crop-roi",
        request=(
            "From overview.tif, cut out the rectangle whose top-left corner is at x = 40, y = 100 "
            "(x is the column, y the row, counting from 0) with width 160 and height 128 pixels, "
            "and save it as roi.tif with the original bit depth."
        ),
        setup=_setup_crop,
        check=_check_crop,
        solution="""
import tifffile
img = tifffile.imread("overview.tif")
tifffile.imwrite("roi.tif", img[100:100 + 128, 40:40 + 160])
""",
    )
)


# --- line-profile --------------------------------------------------------------------------

_START, _END = (30, 20), (180, 200)  # (y, x)


def _setup_profile(workdir: Path, rng: np.random.Generator) -> Truth:
    shape = (220, 240)
    labels, _ = disks(shape, 12, rng, radius=(6, 14), gap=4)
    image = 150 + ndi.gaussian_filter(2000.0 * (labels > 0), 1.5) + 600 * smooth_texture(shape, rng, sigma=6)
    image = to_uint16(image + rng.normal(0, 10, shape))
    save_tiff(workdir / "membrane.tif", image)
    length = int(np.ceil(np.hypot(_END[0] - _START[0], _END[1] - _START[1]))) + 1
    t = np.linspace(0, 1, length)
    coords = np.array([_START[0] + t * (_END[0] - _START[0]), _START[1] + t * (_END[1] - _START[1])])
    return {"profile": ndi.map_coordinates(image.astype(np.float64), coords, order=1)}


def _check_profile(workdir: Path, truth: Truth) -> tuple[bool, str]:
    rows = read_csv(workdir / "profile.csv", ("distance", "intensity"))
    expected = truth["profile"]
    if abs(len(rows) - len(expected)) > 3:
        return False, f"profile.csv has {len(rows)} samples; a one-pixel step along the line gives {len(expected)} (±3)"
    got = np.array([row["intensity"] for row in rows])
    resampled = np.interp(np.linspace(0, 1, len(expected)), np.linspace(0, 1, len(got)), got)
    score = ncc(resampled, expected)
    level = float(np.median(resampled / np.maximum(expected, 1)))
    declare(level, 1.0, "worse of 1 - NCC and |level - 1|", error=max(1 - score, abs(level - 1)), limit=0.1)
    if score < 0.95 or not 0.9 <= level <= 1.1:
        return False, f"profile matches the true one with NCC {score:.3f} (≥ 0.95) at level {level:.2f} (0.9-1.1)"
    return True, f"{len(rows)} samples, NCC {score:.3f} with the true profile, level {level:.2f}"


register(
    Case(
        name="line-profile",
        request=(
            "In membrane.tif, measure the intensity profile along the straight line from "
            "(x=20, y=30) to (x=200, y=180), sampling about one pixel apart and including both "
            "ends. Save profile.csv with columns distance (pixels from the start) and intensity."
        ),
        setup=_setup_profile,
        check=_check_profile,
        solution="""
import numpy as np, tifffile, csv
from skimage.measure import profile_line
img = tifffile.imread("membrane.tif").astype(float)
values = profile_line(img, (30, 20), (180, 200), order=1, mode="reflect")
step = np.hypot(150, 180) / (len(values) - 1)
with open("profile.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["distance", "intensity"])
    w.writerows([[i * step, v] for i, v in enumerate(values)])
""",
    )
)


# --- split-channels ------------------------------------------------------------------------


def _setup_split(workdir: Path, rng: np.random.Generator) -> Truth:
    channels = np.stack([to_uint16(100 + 3000 * smooth_texture((160, 200), rng, sigma=s)) for s in (2, 4, 8)])
    save_tiff(workdir / "multichannel.tif", channels, axes="CYX")
    return {"channels": channels}


def _check_split(workdir: Path, truth: Truth) -> tuple[bool, str]:
    channels = truth["channels"]
    got_all = [
        load_tiff(workdir / f"channel_{c}.tif", ndim=2, shape=expected.shape)
        for c, expected in enumerate(channels, start=1)
    ]
    deviation = max(float(np.abs(g.astype(np.float64) - e).max()) for g, e in zip(got_all, channels, strict=True))
    declare(deviation, 0.0, "grey levels, worst pixel of any channel", limit=0.0)
    for c, expected in enumerate(channels, start=1):
        got = got_all[c - 1]
        if not np.array_equal(got, expected):
            return False, f"channel_{c}.tif is not channel {c} of multichannel.tif"
    return True, f"{len(channels)} channel files equal the input channels"


register(
    Case(
        name="split-channels",
        request=(
            "multichannel.tif is a multipage TIFF with three channels. Split it into one file per "
            "channel: channel_1.tif, channel_2.tif, channel_3.tif, keeping the original pixel "
            "values."
        ),
        setup=_setup_split,
        check=_check_split,
        solution="""
import tifffile
data = tifffile.imread("multichannel.tif")
print(data.shape, data.dtype)
for c in range(data.shape[0]):
    tifffile.imwrite(f"channel_{c + 1}.tif", data[c])
""",
    )
)
