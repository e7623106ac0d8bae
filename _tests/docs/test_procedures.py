"""Run every shipped procedure's python blocks, in order, in a real kernel, on synthetic data with known truth.

Each test generates inputs whose ground truth is known (37 nuclei, a known illumination
gradient, a known tile offset, ...), sets them as the variables the doc's Inputs section
names, runs the doc's blocks, reads back the variables its Produces section names, and checks
them against the truth. Two tests run a procedure with its core step replaced by a no-op and
assert that the check then fails, so the checks are known to bite.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import seedlib  # _tests/docs is on sys.path (pytest rootdir-relative import)
import tifffile
from scipy import ndimage as ndi
from sweeplib import (  # noqa: F401  (kernel is a fixture)
    Inputs,
    Outputs,
    disc,
    kernel,
    replace_once,
    run_doc,
    scatter,
    texture,
)

pytestmark = pytest.mark.slow

# ---------------------------------------------------------------- flatfield


def make_flatfield(blank: bool) -> tuple[Inputs, dict[str, Any]]:
    rng = np.random.default_rng(1)
    shape = (256, 256)
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    illum = np.exp(-((yy - 100) ** 2 + (xx - 150) ** 2) / (2 * 180.0**2))   # off-centre Gaussian vignetting, 0.49..1
    centers = scatter(rng, 40, shape, sep=22, border=10)
    objects = np.zeros(shape, bool)
    for c in centers:
        objects |= disc(shape, c, 8)
    scene = 200.0 + 600.0 * objects
    dark = 100.0
    image = dark + illum * scene + rng.normal(0, 4, shape)
    inputs: Inputs = {
        "image": np.clip(image, 0, 65535).astype(np.uint16),
        "blank": (dark + illum * 1000 + rng.normal(0, 4, shape)).astype(np.uint16) if blank else None,
        "dark_level": dark,
        "object_diameter_px": 16.0,
    }
    background = ndi.distance_transform_edt(~objects) > 4
    return inputs, {"background": background, "centers": centers, "illum_minmax": (illum.min(), illum.max())}


def background_gradient(img: np.ndarray, background: np.ndarray, block: int = 32) -> float:
    """(max - min) / mean of background means over blocks: a correction-independent gradient measure."""
    means = []
    for y in range(0, img.shape[0], block):
        for x in range(0, img.shape[1], block):
            sel = background[y : y + block, x : x + block]
            if sel.sum() >= 100:
                means.append(img[y : y + block, x : x + block][sel].mean())
    return float((max(means) - min(means)) / np.mean(means))


def check_flatfield(out: Outputs, inputs: Inputs, truth: dict[str, Any]) -> dict[str, float]:
    before = background_gradient(inputs["image"].astype(float) - inputs["dark_level"], truth["background"])
    after = background_gradient(out["corrected"].astype(float), truth["background"])
    obj_means = np.array([out["corrected"][disc(out["corrected"].shape, c, 5)].mean() for c in truth["centers"]])
    cv = float(obj_means.std() / obj_means.mean())
    assert before > 0.3, before
    assert after < 0.1 * before, f"background gradient {before:.3f} -> {after:.3f}: not flattened to <10%"
    assert cv < 0.05, f"object intensities vary by {cv:.1%} after correction"
    return {"gradient_before": before, "gradient_after": after, "object_cv": cv}


@pytest.mark.parametrize("blank", [False, True], ids=["from-image", "from-blank"])
def test_flatfield_removes_known_vignetting(kernel: seedlib.KernelRunner, tmp_path: Path, blank: bool) -> None:
    inputs, truth = make_flatfield(blank)
    out = run_doc(kernel, "flatfield", inputs, ["corrected", "flat", "gradient_before", "gradient_after"], tmp_path)
    check_flatfield(out, inputs, truth)
    assert float(out["gradient_after"]) < float(out["gradient_before"])


# ---------------------------------------------------------------- segment-nuclei


def make_nuclei(n_pairs: int = 6, n_single: int = 25) -> tuple[Inputs, dict[str, Any]]:
    """37 nuclei: 6 touching (overlapping) pairs and 25 singles, radius 9-11 px, blurred and noisy."""
    rng = np.random.default_rng(3)
    shape = (256, 256)
    extent = [20.0] * n_pairs + [11.0] * n_single          # radius of each unit (a pair or a single)
    units: list[tuple[float, float]] = []
    while len(units) < len(extent):
        p = (rng.uniform(22, shape[0] - 22), rng.uniform(22, shape[1] - 22))
        k = len(units)
        if all(math.dist(p, q) >= extent[k] + extent[j] + 3 for j, q in enumerate(units)):
            units.append(p)
    centers: list[tuple[float, float]] = []
    pairs: list[tuple[int, int]] = []
    radii: list[float] = []
    for k, (cy, cx) in enumerate(units):
        if k < n_pairs:
            r = rng.uniform(9, 11)
            theta = rng.uniform(0, np.pi)
            d = 0.85 * r              # centres 1.7 r apart: clearly touching, one blob in the mask
            pairs.append((len(centers), len(centers) + 1))
            centers += [(cy + d * np.sin(theta), cx + d * np.cos(theta)), (cy - d * np.sin(theta), cx - d * np.cos(theta))]
            radii += [r, r]
        else:
            centers.append((cy, cx))
            radii.append(rng.uniform(9, 11))
    nuclei = np.zeros(shape)
    for c, r in zip(centers, radii):
        nuclei = np.maximum(nuclei, disc(shape, c, r) * rng.uniform(0.8, 1.2))
    image = 100 + ndi.gaussian_filter(900 * nuclei, 1.5) + rng.normal(0, 20, shape)
    inputs: Inputs = {"image": np.clip(image, 0, None).astype(np.uint16), "nucleus_diameter_px": None}
    return inputs, {"n": len(centers), "centers": centers, "pairs": pairs}


def check_nuclei(out: Outputs, truth: dict[str, Any]) -> dict[str, float]:
    labels = out["labels"]
    n = int(out["n_nuclei"])
    at = [int(labels[int(round(y)), int(round(x))]) for y, x in truth["centers"]]
    split = sum(1 for i, j in truth["pairs"] if at[i] and at[j] and at[i] != at[j])
    assert abs(n - truth["n"]) <= 2, f"{n} nuclei found, truth {truth['n']} (tolerance 2)"
    assert split >= len(truth["pairs"]) - 1, f"only {split} of {len(truth['pairs'])} touching pairs split"
    assert len(set(at) - {0}) >= truth["n"] - 2, "nucleus centres not covered by distinct labels"
    return {"n": n, "pairs_split": split}


def test_segment_nuclei_counts_37_including_touching(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, truth = make_nuclei()
    source = tmp_path / "well_A01.ome.tif"
    tifffile.imwrite(source, inputs["image"])
    inputs["source_path"] = str(source)
    out = run_doc(kernel, "segment-nuclei", inputs, ["labels", "n_nuclei", "nucleus_diameter_px", "labels_path"], tmp_path)
    check_nuclei(out, truth)
    assert int(out["_images_shown"]) == 1, "the visual check displays one overlay PNG"
    assert 16 < float(out["nucleus_diameter_px"]) < 24, "derived diameter should be ~2 x radius 9-11"
    saved = Path(str(out["labels_path"]))
    assert saved == tmp_path / "results" / "well_A01_nuclei-labels.tif"
    np.testing.assert_array_equal(tifffile.imread(saved), out["labels"])
    assert tifffile.imread(source).dtype == np.uint16  # raw data untouched


def test_segment_nuclei_check_fails_without_watershed(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """Core step removed (plain connected components instead of the watershed): the check must fail."""
    inputs, truth = make_nuclei()
    inputs["source_path"] = str(tmp_path / "raw.tif")
    edit = replace_once("labels = segmentation.watershed(-distance, markers, mask=mask)",
                        "labels = measure.label(mask)")
    # either the doc's own size gate stops it (KernelError) or the truth check fails
    with pytest.raises(AssertionError, match="touching pairs split|nuclei found|odd sizes"):
        out = run_doc(kernel, "segment-nuclei", inputs, ["labels", "n_nuclei"], tmp_path, edit=edit)
        check_nuclei(out, truth)


# ---------------------------------------------------------------- max-projection


def make_stack() -> tuple[Inputs, dict[str, Any]]:
    rng = np.random.default_rng(5)
    shape, n_z, focus = (128, 128), 21, 10
    points = np.zeros(shape)
    centers = scatter(rng, 40, shape, sep=12, border=6)
    for y, x in centers:
        points[int(y), int(x)] = 4000.0
    stack = np.stack([
        ndi.gaussian_filter(points, 1.0 + 0.8 * abs(z - focus)) + 100 + rng.normal(0, 3, shape) for z in range(n_z)
    ])
    sharp = stack[focus]
    return {"stack": np.clip(stack, 0, None).astype(np.uint16)}, {"focus": focus, "centers": centers, "sharp": sharp}


def test_max_projection_keeps_the_in_focus_slices(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, truth = make_stack()
    out = run_doc(kernel, "max-projection", inputs, ["best_slice", "in_focus", "mip", "sum_projection"], tmp_path)
    in_focus = set(out["in_focus"].tolist())
    assert abs(int(out["best_slice"]) - truth["focus"]) <= 1
    assert truth["focus"] in in_focus
    assert in_focus <= set(range(truth["focus"] - 3, truth["focus"] + 4)), f"kept defocused slices {sorted(in_focus)}"
    peaks = [out["mip"][int(y), int(x)] for y, x in truth["centers"]]
    expected = [truth["sharp"][int(y), int(x)] for y, x in truth["centers"]]
    np.testing.assert_allclose(peaks, expected, rtol=0.05)
    kept = inputs["stack"][sorted(in_focus)]
    np.testing.assert_allclose(out["sum_projection"], kept.astype(float).sum(axis=0))


# ---------------------------------------------------------------- stitch-tiles


def make_tiles() -> tuple[Inputs, dict[str, Any]]:
    rng = np.random.default_rng(6)
    n_rows, n_cols, t, overlap = 2, 3, 128, 0.25
    step = t - int(overlap * t)
    world = texture(rng, (260, 360), 2.0) * 50 + 500
    for y, x in scatter(rng, 60, world.shape, sep=15, border=5):
        world += 300 * disc(world.shape, (y, x), 3)
    jitter = rng.integers(-4, 5, size=(n_rows, n_cols, 2))
    jitter[0, 0] = 0
    tiles = np.zeros((n_rows, n_cols, t, t))
    truth = []
    for r in range(n_rows):
        for c in range(n_cols):
            y, x = 8 + r * step + jitter[r, c, 0], 8 + c * step + jitter[r, c, 1]
            tiles[r, c] = world[y : y + t, x : x + t] + rng.normal(0, 5, (t, t))
            truth.append((y, x))
    return {"tiles": tiles.astype(np.uint16), "overlap_fraction": overlap}, {"positions": np.array(truth), "world": world}


def check_stitch(out: Outputs, truth: dict[str, Any]) -> dict[str, float]:
    found = out["positions"] - out["positions"][0]
    expected = truth["positions"] - truth["positions"][0]
    err = int(np.abs(found - expected).max())
    assert err <= 1, f"tile positions off by {err} px:\n{found.tolist()}\nvs\n{expected.tolist()}"
    return {"max_error_px": err}


def test_stitch_tiles_recovers_known_offsets(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, truth = make_tiles()
    out = run_doc(kernel, "stitch-tiles", inputs, ["positions", "mosaic", "pair_quality"], tmp_path)
    check_stitch(out, truth)
    y0, x0 = truth["positions"].min(axis=0)
    mosaic = out["mosaic"]
    region = truth["world"][y0 : y0 + mosaic.shape[0], x0 : x0 + mosaic.shape[1]]
    covered = mosaic > 0                      # jittered tiles leave a few uncovered corners at 0
    assert covered.mean() > 0.9
    assert np.corrcoef(mosaic[covered], region[covered])[0, 1] > 0.98


# ---------------------------------------------------------------- count-spots


def make_spots() -> tuple[Inputs, dict[str, Any]]:
    rng = np.random.default_rng(8)
    shape, n, sigma = (256, 256), 60, 1.5
    centers = scatter(rng, n, shape, sep=10, border=8)
    img = np.zeros(shape)
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    for y, x in centers:
        img += rng.uniform(60, 150) * np.exp(-((yy - y) ** 2 + (xx - x) ** 2) / (2 * sigma**2))
    image = 100 + img + rng.normal(0, 6, shape)
    mask = np.where(xx < 128, 1, 2).astype(np.uint16)        # two "cells": left and right half
    per_cell = [sum(1 for _, x in centers if x < 127.5), sum(1 for _, x in centers if x >= 127.5)]
    inputs = {"image": np.clip(image, 0, None).astype(np.uint16), "spot_fwhm_px": 2.355 * sigma, "mask": mask}
    return inputs, {"centers": np.array(centers), "per_cell": per_cell}


def test_count_spots_finds_60_known_spots(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, truth = make_spots()
    out = run_doc(kernel, "count-spots", inputs, ["spots", "n_spots", "spots_per_cell"], tmp_path)
    n = int(out["n_spots"])
    assert abs(n - len(truth["centers"])) <= 2, f"{n} spots, truth 60"
    d = np.linalg.norm(truth["centers"][:, None, :] - out["spots"][None, :, :2], axis=2)
    matched = int((d.min(axis=1) < 2).sum())
    assert matched >= 58, f"only {matched} of 60 true spots have a detection within 2 px"
    assert np.abs(out["spots_per_cell"] - truth["per_cell"]).max() <= 1


# ---------------------------------------------------------------- reference snippets (data, outputs)


def test_data_reference_reads_axes_pixel_size_and_pyramid(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    rng = np.random.default_rng(12)
    data = rng.integers(0, 4096, (2, 3, 64, 64), dtype=np.uint16)       # 12-bit values in uint16
    path = tmp_path / "stack.ome.tif"
    with tifffile.TiffWriter(path) as tw:
        meta = {"axes": "CZYX", "PhysicalSizeX": 0.325, "PhysicalSizeY": 0.325, "PhysicalSizeZ": 1.5,
                "Channel": {"Name": ["DAPI", "GFP"]}}
        tw.write(data, subifds=1, metadata=meta, tile=(32, 32))
        tw.write(data[..., ::2, ::2], subfiletype=1, tile=(32, 32))
    out = run_doc(kernel, "data", {"path": str(path)},
                  ["axes", "axes_tczyx", "data", "pixel_size_um", "z_step_um", "channel_names", "n_levels",
                   "overview", "plane_max"], tmp_path)
    assert str(out["axes"]) == "CZYX" and str(out["axes_tczyx"]) == "CZYX"
    np.testing.assert_array_equal(out["data"], data)
    assert float(out["pixel_size_um"]) == 0.325 and float(out["z_step_um"]) == 1.5
    assert out["channel_names"].tolist() == ["DAPI", "GFP"]
    assert int(out["n_levels"]) == 2 and out["overview"].shape == (2, 3, 32, 32)
    assert out["plane_max"].tolist() == [float(p.max()) for p in data.reshape(6, 64, 64)]


def test_outputs_reference_saves_next_to_the_data_and_shows_png(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    source = tmp_path / "plate1_A01.ome.tif"
    raw = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    tifffile.imwrite(source, raw)
    labels = np.zeros((64, 64), np.int64)
    labels[10:20, 10:20], labels[30:40, 30:50] = 1, 300
    out = run_doc(kernel, "outputs", {"source_path": str(source), "labels": labels, "raw": raw}, [], tmp_path)
    assert out["_images_shown"] == 0
    kernel.run(
        "labels_file = save_labels(labels, 'nuclei-labels', pixel_size_um=0.5)\n"
        "table_file = save_table({'label': [1, 300], 'area_um2': [25.0, 50.0]}, 'measure')\n"
        "show(raw, labels)"
    )
    assert len(kernel.last_images) == 1 and kernel.last_images[0].startswith(b"\x89PNG")
    results = tmp_path / "results"
    saved = tifffile.imread(results / "plate1_A01_nuclei-labels.tif")
    assert saved.dtype == np.uint16
    np.testing.assert_array_equal(saved, labels)
    with tifffile.TiffFile(results / "plate1_A01_nuclei-labels.tif") as tf:
        assert 'PhysicalSizeX="0.5"' in (tf.ome_metadata or "")
    assert (results / "plate1_A01_measure.csv").read_text().splitlines() == ["label,area_um2", "1,25.0", "300,50.0"]
    np.testing.assert_array_equal(tifffile.imread(source), raw)   # raw data untouched
