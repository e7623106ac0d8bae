"""Multi-image cases: z projections, stitching tiles, channel registration, time-lapse intensity."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

from bench.cases import Case, Each, Procedure, Run, Truth, register
from bench.cases import score as declare
from bench.cases._kit import best_shift_ncc, disks, load_tiff, ncc, read_csv, save_tiff, smooth_texture, to_uint16


def _zstack(shape: tuple[int, int, int], rng: np.random.Generator) -> np.ndarray:
    """Beads at random depths, each in focus on its own plane and blurred away from it."""
    depth, height, width = shape
    labels, placed = disks((height, width), 25, rng, radius=(2, 4), gap=3)
    stack = np.zeros(shape, np.float64)
    for index, _ in enumerate(placed, start=1):
        z0 = rng.uniform(0, depth - 1)
        for z in range(depth):
            stack[z][labels == index] += 900 * np.exp(-((z - z0) ** 2) / 4)
    for z in range(depth):
        stack[z] = ndi.gaussian_filter(stack[z], 1 + 0.2 * abs(z - depth / 2))
    return to_uint16(100 + stack + rng.normal(0, 10, shape))


# --- max-projection ------------------------------------------------------------------------


def _setup_mip(workdir: Path, rng: np.random.Generator) -> Truth:
    stack = _zstack((12, 160, 160), rng)
    save_tiff(workdir / "zstack.tif", stack, axes="ZYX")
    return {"mip": stack.max(axis=0)}


def _check_mip(workdir: Path, truth: Truth) -> tuple[bool, str]:
    expected = truth["mip"]
    got = load_tiff(workdir / "mip.tif", ndim=2, shape=expected.shape)
    deviation = float(np.abs(got - expected.astype(float)).max())
    declare(deviation, 0.0, "grey levels, worst pixel", limit=0.5)
    if not np.allclose(got, expected, atol=0.5):
        return (
            False,
            f"mip.tif differs from the maximum over z in {int((np.abs(got - expected.astype(float)) > 0.5).sum())} pixels",
        )
    return True, "mip.tif equals the maximum over z (±0.5)"


register(
    Case(
        name="max-projection",
        request=(
            "zstack.tif is a z-stack of beads (axes Z, Y, X). Make a maximum intensity projection "
            "along z and save it as mip.tif."
        ),
        setup=_setup_mip,
        check=_check_mip,
        procedure=Procedure(
            (
                """
import tifffile
stack = tifffile.imread("zstack.tif")
in_focus_only = False  # a plain maximum projection along z, as asked
source_path = "zstack.tif"
user_names = {"mip": "mip.tif"}
""",
                Run("outputs"),
                Run("max-projection"),
            )
        ),
        blind_solution="""
import tifffile
stack = tifffile.imread("zstack.tif")
tifffile.imwrite("mip.tif", stack.max(axis=0))
""",
        docs=("max-projection",),
    )
)


# --- max-projection-channels ---------------------------------------------------------------


def _setup_mip_channels(workdir: Path, rng: np.random.Generator) -> Truth:
    stack = np.stack([_zstack((8, 128, 128), rng), _zstack((8, 128, 128), rng)], axis=1)  # Z, C, Y, X
    save_tiff(workdir / "stack.tif", stack, axes="ZCYX")
    return {"mips": [stack[:, c].max(axis=0) for c in range(stack.shape[1])]}


def _check_mip_channels(workdir: Path, truth: Truth) -> tuple[bool, str]:
    got_all = [
        load_tiff(workdir / f"mip_c{c}.tif", ndim=2, shape=expected.shape)
        for c, expected in enumerate(truth["mips"], start=1)
    ]
    deviation = max(float(np.abs(g - e.astype(float)).max()) for g, e in zip(got_all, truth["mips"], strict=True))
    declare(deviation, 0.0, "grey levels, worst pixel of any channel", limit=0.5)
    for c, expected in enumerate(truth["mips"], start=1):
        got = got_all[c - 1]
        if not np.allclose(got, expected, atol=0.5):
            return False, f"mip_c{c}.tif is not the maximum over z of channel {c}"
    return True, f"{len(truth['mips'])} per-channel projections equal the maximum over z"


register(
    Case(
        name="max-projection-channels",
        request=(
            "stack.tif is a two-channel z-stack saved from Fiji (a hyperstack). Make a maximum "
            "intensity projection over z for each channel separately and save them as mip_c1.tif "
            "and mip_c2.tif."
        ),
        setup=_setup_mip_channels,
        check=_check_mip_channels,
        procedure=Procedure(
            (
                """
import tifffile
with tifffile.TiffFile("stack.tif") as tif:
    axes = tif.series[0].axes  # a Fiji hyperstack: ZCYX
    data = tif.asarray()
in_focus_only = False  # a plain maximum projection per channel, as asked
source_path = "stack.tif"
""",
                Run("outputs"),
                Each(
                    'for channel in range(data.shape[axes.index("C")]):',
                    (
                        'stack = data.take(channel, axis=axes.index("C"))\nuser_names = {"mip": f"mip_c{channel + 1}.tif"}\n',
                        Run("max-projection"),
                    ),
                ),
            )
        ),
        blind_solution="""
import tifffile
with tifffile.TiffFile("stack.tif") as tif:
    axes = tif.series[0].axes
    data = tif.asarray()
print(axes, data.shape)
mip = data.max(axis=axes.index("Z"))
axes = axes.replace("Z", "")
for c in range(mip.shape[axes.index("C")]):
    tifffile.imwrite(f"mip_c{c + 1}.tif", mip.take(c, axis=axes.index("C")))
""",
        docs=("max-projection",),
    )
)


TILE_INPUTS = """
import numpy as np, tifffile
tiles = np.stack([[tifffile.imread(f"tile_r{r}_c{c}.tif") for c in range(2)] for r in range(2)])  # (row, col, Y, X)
source_path = "tile_r0_c0.tif"
user_names = {"mosaic": "stitched.tif"}
"""
"""Inputs of a 2x2 stitching case: the tiles in grid order, the mosaic under the name asked for."""


# --- stitch-tiles --------------------------------------------------------------------------

_TILE = 150


def _setup_stitch(workdir: Path, rng: np.random.Generator) -> Truth:
    scene = smooth_texture((320, 320), rng, sigma=3) * 2000
    labels, _ = disks((320, 320), 60, rng, radius=(3, 7))
    scene += 1500 * ndi.gaussian_filter((labels > 0).astype(float), 1)
    step = _TILE - int(rng.integers(16, 24))
    truth = write_tile_grid(workdir, scene, _TILE, step, 15.0, rng)
    del truth["positions"]
    return truth


def write_tile_grid(
    workdir: Path, scene: np.ndarray, tile: int, step: int, noise_sd: float, rng: np.random.Generator
) -> Truth:
    """Cut a 2x2 grid of noisy tiles from ``scene`` (each placed `step` apart, jittered by up to
    3 px) into ``tile_r<row>_c<col>.tif``; the truth is the covered canvas, its mask and each
    tile's position on it."""
    positions = {}
    for row in range(2):
        for col in range(2):
            y = 5 + row * step + int(rng.integers(-3, 4))
            x = 5 + col * step + int(rng.integers(-3, 4))
            positions[(row, col)] = (y, x)
            cut = scene[y : y + tile, x : x + tile] + rng.normal(0, noise_sd, (tile, tile))
            save_tiff(workdir / f"tile_r{row}_c{col}.tif", to_uint16(cut))
    y0 = min(p[0] for p in positions.values())
    x0 = min(p[1] for p in positions.values())
    y1 = max(p[0] for p in positions.values()) + tile
    x1 = max(p[1] for p in positions.values()) + tile
    covered = np.zeros((y1 - y0, x1 - x0), bool)
    for y, x in positions.values():
        covered[y - y0 : y - y0 + tile, x - x0 : x - x0 + tile] = True
    return {
        "canvas": scene[y0:y1, x0:x1],
        "covered": covered,
        "positions": {k: (y - y0, x - x0) for k, (y, x) in positions.items()},
    }


def _check_stitch(workdir: Path, truth: Truth) -> tuple[bool, str]:
    expected = truth["canvas"]
    got = load_tiff(workdir / "stitched.tif", ndim=2)
    if any(abs(a - b) > 4 for a, b in zip(got.shape, expected.shape, strict=True)):
        return False, f"stitched.tif is {got.shape}, the covered area is {expected.shape} (±4 px)"
    score, shift = best_shift_ncc(got, expected, max_shift=4, mask=truth["covered"])
    declare(score, 1.0, "1 - NCC", limit=0.05)
    if score < 0.95:
        return (
            False,
            f"stitched.tif matches the true scene with NCC {score:.3f} < 0.95 where tiles cover it (best offset {shift})",
        )
    return True, f"stitched {got.shape} vs true {expected.shape}, NCC {score:.3f} at offset {shift}"


register(
    Case(
        name="stitch-tiles",
        request=(
            "I imaged a 2 by 2 grid of overlapping fields: tile_r0_c0.tif, tile_r0_c1.tif, "
            "tile_r1_c0.tif, tile_r1_c1.tif (r = row, c = column). Neighbouring tiles overlap by "
            "roughly 10-15% and the stage is not perfectly accurate. Stitch them into one image "
            "and save it as stitched.tif."
        ),
        setup=_setup_stitch,
        check=_check_stitch,
        procedure=Procedure(
            (
                TILE_INPUTS + 'overlap_fraction = 0.125  # "roughly 10-15%"\n',
                Run("outputs"),
                Run("stitch-tiles"),
            )
        ),
        blind_solution="""
import numpy as np, tifffile
tiles = {(r, c): tifffile.imread(f"tile_r{r}_c{c}.tif").astype(np.float32) for r in range(2) for c in range(2)}
T = tiles[0, 0].shape[0]

def ncc(a, b):
    a = a - a.mean(); b = b - b.mean()
    return float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum()))

def offset(a, b, axis):
    # position of b relative to a, b being the right (axis=1) or lower (axis=0) neighbour
    best = (-2.0, None)
    for overlap in range(8, 60):
        for d in range(-8, 9):
            if axis == 1:
                sa = a[max(d, 0):T + min(d, 0), T - overlap:]
                sb = b[max(-d, 0):T + min(-d, 0), :overlap]
                pos = (d, T - overlap)
            else:
                sa = a[T - overlap:, max(d, 0):T + min(d, 0)]
                sb = b[:overlap, max(-d, 0):T + min(-d, 0)]
                pos = (T - overlap, d)
            score = ncc(sa, sb)
            if score > best[0]:
                best = (score, pos)
    return np.array(best[1])

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
""",
        docs=("stitch-tiles",),
    )
)


# --- register-channels ---------------------------------------------------------------------


def _setup_register(workdir: Path, rng: np.random.Generator) -> Truth:
    scene = smooth_texture((232, 232), rng, sigma=3)
    dy, dx = int(rng.integers(4, 9)) * int(rng.choice([-1, 1])), int(rng.integers(4, 9)) * int(rng.choice([-1, 1]))
    m = 12
    ch1 = scene[m : m + 200, m : m + 200]
    ch2 = scene[m - dy : m - dy + 200, m - dx : m - dx + 200]  # ch2[y, x] shows what ch1 shows at (y - dy, x - dx)
    image = np.stack([1000 * ch1 + 100, 600 * ch2 + 80]) + rng.normal(0, 10, (2, 200, 200))
    save_tiff(workdir / "two_channel.tif", to_uint16(image), axes="CYX")
    return {"ch1": image[0], "shift": (dy, dx)}


def _check_register(workdir: Path, truth: Truth) -> tuple[bool, str]:
    got = load_tiff(workdir / "aligned.tif", ndim=3)
    if got.shape[0] != 2:
        return False, f"aligned.tif has shape {got.shape}; expected 2 channels first (2, Y, X)"
    ch1 = truth["ch1"]
    if got.shape[1:] != ch1.shape:
        return False, f"aligned.tif channels are {got.shape[1:]}, the input's are {ch1.shape}"
    core = (slice(16, -16), slice(16, -16))
    first, second = ncc(got[0][core], ch1[core]), ncc(got[1][core], ch1[core])
    declare(second, 1.0, "1 - NCC of channel 2 with channel 1", limit=0.05)
    if first < 0.99:
        return False, f"channel 1 of aligned.tif was changed (NCC {first:.3f} with the input); it is the reference"
    if second < 0.95:
        return (
            False,
            f"channel 2 does not line up with channel 1: NCC {second:.3f} < 0.95 inside a 16 px border (true shift {truth['shift']})",
        )
    return True, f"channel 2 aligned: NCC {second:.3f} with channel 1 (true shift {truth['shift']})"


register(
    Case(
        name="register-channels",
        request=(
            "two_channel.tif has two channels (axes C, Y, X) of the same structures, but the "
            "second channel is offset from the first by a few pixels. Align channel 2 onto "
            "channel 1 (keep channel 1 as it is) and save both as aligned.tif with shape (2, Y, X)."
        ),
        setup=_setup_register,
        check=_check_register,
        procedure=Procedure(
            (
                """
import tifffile
channels = tifffile.imread("two_channel.tif")
reference_channel = 0  # channel 1 stays as it is
source_path = "two_channel.tif"
user_names = {"registered": "aligned.tif"}
""",
                Run("outputs"),
                Run("register-channels"),
            )
        ),
        blind_solution="""
import numpy as np, tifffile
from scipy import ndimage as ndi
from skimage.registration import phase_cross_correlation
img = tifffile.imread("two_channel.tif").astype(np.float32)
shift, error, _ = phase_cross_correlation(img[0], img[1], upsample_factor=10, normalization=None)
print("shift to apply to channel 2:", shift)
moved = ndi.shift(img[1], shift, order=1, mode="nearest")
tifffile.imwrite("aligned.tif", np.stack([img[0], moved]))
""",
        docs=("register-channels",),
    )
)


# --- timelapse-intensity -------------------------------------------------------------------


def _setup_timelapse_intensity(workdir: Path, rng: np.random.Generator) -> Truth:
    frames, shape = 20, (128, 128)
    labels, _ = disks(shape, 1, rng, radius=(18, 22))
    body = ndi.gaussian_filter((labels > 0).astype(np.float64), 1.0)
    tau = rng.uniform(8, 15)
    amplitude = rng.uniform(800, 1200)
    level = amplitude * np.exp(-np.arange(frames) / tau)
    stack = 100 + level[:, None, None] * body[None] + rng.normal(0, 8, (frames, *shape))
    save_tiff(workdir / "timelapse.tif", to_uint16(stack), axes="TYX")
    # the truth is the mean over the true outline, where the blurred edge is a little dimmer
    return {"level": (level * body[labels > 0].mean()).tolist()}


def _check_timelapse_intensity(workdir: Path, truth: Truth) -> tuple[bool, str]:
    rows = read_csv(workdir / "intensity.csv", ("frame", "mean_intensity"))
    level = np.array(truth["level"])
    got = {int(row["frame"]): row["mean_intensity"] for row in rows}
    if sorted(got) not in (list(range(len(level))), list(range(1, len(level) + 1))):
        return False, f"intensity.csv frames {sorted(got)[:5]}…; expected {len(level)} frames numbered from 0"
    base = min(got)
    curve = np.array([got[t + base] for t in range(len(level))])
    relative = np.abs(curve - level) / level
    declare(
        float(curve.mean()), float(level.mean()), "relative error, worst frame", error=float(relative.max()), limit=0.10
    )
    if relative.max() > 0.10:
        t = int(relative.argmax())
        return False, f"frame {t}: {curve[t]:.1f} vs true background-subtracted mean {level[t]:.1f} (±10%)"
    normalised = np.abs(curve / curve[0] - level / level[0]).max()
    if normalised > 0.05:
        return False, f"the decay curve's shape is off by {normalised:.3f} after normalising to frame 0 (limit 0.05)"
    return True, f"per-frame means within {relative.max():.1%} (limit 10%), decay shape within {normalised:.3f}"


register(
    Case(
        name="timelapse-intensity",
        request=(
            "timelapse.tif is a time-lapse (T, Y, X) of one fluorescent cell that bleaches over "
            "time. For every frame, measure the cell's mean intensity with the background "
            "subtracted, and save intensity.csv with columns frame, mean_intensity (frames "
            "numbered from 0)."
        ),
        setup=_setup_timelapse_intensity,
        check=_check_timelapse_intensity,
        procedure=Procedure(
            (
                """
import tifffile
movie = tifffile.imread("timelapse.tif")
image = movie[0]  # the cell is outlined on the first frame
nucleus_diameter_px = None
exclude_edge = False
source_path = "timelapse.tif"
""",
                Run("outputs"),
                Run("segment-nuclei"),
                """
roi = labels > 0  # the cell, as segmented
background_roi = None  # derived by the procedure
reference_roi = None  # one cell: bleaching is fitted on it
frame_interval_s = 1.0  # not in the file: frames are the time unit
baseline_frames = 1
""",
                Run("timelapse-intensity"),
                'import numpy as np\nsave_table({"frame": np.arange(len(trace)), "mean_intensity": trace}, "intensity", "intensity.csv")\n',
            )
        ),
        blind_solution="""
import numpy as np, tifffile, csv
from skimage import filters, measure
stack = tifffile.imread("timelapse.tif").astype(float)
first = filters.gaussian(stack[0], 2, preserve_range=True)
mask = measure.label(first > filters.threshold_otsu(first))
cell = mask == (np.argmax(np.bincount(mask.ravel())[1:]) + 1)
from scipy import ndimage as ndi
far = ~ndi.binary_dilation(cell, iterations=8)
with open("intensity.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["frame", "mean_intensity"])
    for t, frame in enumerate(stack):
        w.writerow([t, frame[cell].mean() - np.median(frame[far])])
""",
        docs=("timelapse-intensity",),
    )
)
