"""Run every shipped procedure's python blocks, in order, in a real kernel, on synthetic data with known truth.

Each test generates inputs whose ground truth is known (37 nuclei, a known illumination
gradient, a known tile offset, ...), sets them as the variables the doc's Inputs section
names, runs the doc's blocks, reads back the variables its Produces section names, and checks
them against the truth. Two tests run a procedure with its core step replaced by a no-op and
assert that the check then fails, so the checks are known to bite.
"""

from __future__ import annotations

import csv
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

# ---------------------------------------------------------------- background-subtraction


def make_background() -> tuple[Inputs, dict[str, Any]]:
    rng = np.random.default_rng(2)
    shape = (256, 256)
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    bg = 300.0 + 0.8 * xx + 150.0 * np.exp(-((yy - 80) ** 2 + (xx - 180) ** 2) / (2 * 60.0**2))
    centers = scatter(rng, 30, shape, sep=24, border=10)
    objects = np.zeros(shape, bool)
    for c in centers:
        objects |= disc(shape, c, 6)
    image = bg + 200.0 * objects + rng.normal(0, 5, shape)
    inputs: Inputs = {"image": np.clip(image, 0, None).astype(np.uint16), "object_diameter_px": 12.0}
    return inputs, {"background": ndi.distance_transform_edt(~objects) > 4, "centers": centers, "amplitude": 200.0}


def check_background(out: Outputs, truth: dict[str, Any]) -> dict[str, float]:
    sub = out["subtracted"]
    residual = float(np.median(sub[truth["background"]]))
    amp = float(np.mean([sub[disc(sub.shape, c, 3)].mean() for c in truth["centers"]]))
    assert abs(residual) < 3.0, f"background residual {residual:.2f} (noise sd 5, objects 200)"
    assert abs(amp - truth["amplitude"]) < 0.1 * truth["amplitude"], f"object amplitude {amp:.1f} vs 200"
    return {"residual": residual, "amplitude": amp}


def test_background_subtraction_recovers_known_amplitude(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, truth = make_background()
    out = run_doc(kernel, "background-subtraction", inputs, ["background", "subtracted"], tmp_path)
    check_background(out, truth)


# ---------------------------------------------------------------- measure-labels


def make_measure() -> tuple[Inputs, dict[str, Any]]:
    shape = (200, 220)
    labels = np.zeros(shape, np.uint16)
    image = np.full(shape, 7, np.uint16)
    truth = []
    for k in range(12):
        lab = 3 * (k + 1)                       # non-consecutive ids on purpose
        h, w = 6 + k, 8 + (k % 4) * 3
        y0, x0 = 10 + (k // 4) * 60, 10 + (k % 4) * 52
        labels[y0 : y0 + h, x0 : x0 + w] = lab
        image[y0 : y0 + h, x0 : x0 + w] = 100 + 10 * k
        truth.append((lab, h * w, y0 + (h - 1) / 2, x0 + (w - 1) / 2, 100 + 10 * k))
    return {"labels": labels, "image": image, "pixel_size_um": 0.325}, {"rows": truth}


def test_measure_labels_writes_exact_table(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, truth = make_measure()
    inputs["source_path"] = str(tmp_path / "plate1.tif")
    out = run_doc(kernel, "measure-labels", inputs, ["n_objects", "csv_path"], tmp_path)
    assert int(out["n_objects"]) == 12
    csv_path = Path(str(out["csv_path"]))
    assert csv_path == tmp_path / "results" / "plate1_measure.csv"
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 12
    px = inputs["pixel_size_um"]
    for row, (lab, area, cy, cx, mean) in zip(rows, truth["rows"]):
        assert int(float(row["label"])) == lab
        assert float(row["area_um2"]) == pytest.approx(area * px**2, rel=1e-9)
        assert float(row["centroid_y_um"]) == pytest.approx(cy * px, rel=1e-9)
        assert float(row["centroid_x_um"]) == pytest.approx(cx * px, rel=1e-9)
        assert float(row["intensity_mean"]) == pytest.approx(mean, rel=1e-9)
        assert float(row["intensity_integrated"]) == pytest.approx(mean * area, rel=1e-9)


# ---------------------------------------------------------------- register-channels


def make_channels() -> tuple[Inputs, dict[str, Any]]:
    rng = np.random.default_rng(7)
    big = texture(rng, (192, 192), 2.0) * 100 + 400
    for y, x in scatter(rng, 40, big.shape, sep=14, border=5):
        big += 400 * disc(big.shape, (y, x), 2.5)
    true_shifts = np.array([(0.0, 0.0), (2.6, -1.8), (-3.3, 4.1)])   # how each channel was displaced
    chans = [ndi.shift(big, s, order=3)[32:160, 32:160] + rng.normal(0, 5, (128, 128)) for s in true_shifts]
    return {"channels": np.stack(chans).astype(np.float32), "reference_channel": 0}, {"shifts": true_shifts}


def check_register(out: Outputs, truth: dict[str, Any]) -> dict[str, float]:
    err = float(np.abs(out["shifts"] + truth["shifts"]).max())      # correction = minus displacement
    assert err < 0.3, f"shifts {out['shifts'].tolist()} vs correction {(-truth['shifts']).tolist()}"
    ref = out["registered"][0][8:-8, 8:-8]
    for c in (1, 2):
        r = np.corrcoef(ref.ravel(), out["registered"][c][8:-8, 8:-8].ravel())[0, 1]
        assert r > 0.95, f"channel {c} correlates {r:.3f} with the reference after registration"
    return {"max_error_px": err}


def test_register_channels_recovers_known_shift(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, truth = make_channels()
    out = run_doc(kernel, "register-channels", inputs, ["shifts", "registered"], tmp_path)
    check_register(out, truth)


def test_register_channels_check_fails_without_shift(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """Core step removed (the measured shift is never recorded): the check must fail."""
    inputs, truth = make_channels()
    edit = replace_once("shifts[c], errors[c] = shift, error", "errors[c] = error")
    out = run_doc(kernel, "register-channels", inputs, ["shifts", "registered"], tmp_path, edit=edit)
    with pytest.raises(AssertionError, match="shifts"):
        check_register(out, truth)


# ---------------------------------------------------------------- colocalization


def make_pearson() -> tuple[Inputs, dict[str, Any]]:
    """Shared smooth signal S plus independent noise of equal variance in each channel: r = 0.5 by design."""
    rng = np.random.default_rng(9)
    shape = (200, 200)
    mask = disc(shape, (100, 100), 75)
    s = texture(rng, shape, 2.0)
    n1, n2 = texture(rng, shape, 2.0), texture(rng, shape, 2.0)
    ch1 = 500 + 100 * s + 100 * n1
    ch2 = 300 + 80 * s + 80 * n2
    ramp = np.add.outer(np.arange(200.0), np.arange(200.0)) * 20    # correlated junk outside the mask
    ch1[~mask] += ramp[~mask]
    ch2[~mask] += ramp[~mask]
    return {"ch1": ch1, "ch2": ch2, "mask": mask}, {"pearson": 0.5}


def make_manders() -> tuple[Inputs, dict[str, Any]]:
    """40 ch1 spots, 30 ch2 spots, 20 shared: M1 = 20/40, M2 = 20/30."""
    rng = np.random.default_rng(10)
    shape = (200, 200)
    centers = scatter(rng, 50, shape, sep=12, border=6)
    a_spots, b_spots = centers[:40], centers[:20] + centers[40:]
    ch1 = 100 + rng.normal(0, 5, shape)
    ch2 = 50 + rng.normal(0, 5, shape)
    for c in a_spots:
        ch1 += 400 * disc(shape, c, 3)
    for c in b_spots:
        ch2 += 300 * disc(shape, c, 3)
    return {"ch1": ch1, "ch2": ch2, "mask": np.ones(shape, bool)}, {"m1": 0.5, "m2": 2 / 3}


def test_colocalization_pearson_matches_design(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, truth = make_pearson()
    out = run_doc(kernel, "colocalization", inputs, ["pearson", "pearson_control"], tmp_path)
    assert abs(float(out["pearson"]) - truth["pearson"]) < 0.05, float(out["pearson"])
    assert abs(float(out["pearson_control"])) < 0.15, float(out["pearson_control"])


def test_colocalization_manders_matches_design(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, truth = make_manders()
    out = run_doc(kernel, "colocalization", inputs, ["m1", "m2"], tmp_path)
    assert abs(float(out["m1"]) - truth["m1"]) < 0.05, float(out["m1"])
    assert abs(float(out["m2"]) - truth["m2"]) < 0.05, float(out["m2"])


# ---------------------------------------------------------------- timelapse-intensity


def make_movie() -> tuple[Inputs, dict[str, Any]]:
    rng = np.random.default_rng(11)
    n_t, shape, dt, k, step_at = 40, (48, 64), 2.0, 0.015, 20
    t = np.arange(n_t) * dt
    roi = np.zeros(shape, bool); roi[5:15, 5:15] = True
    ref = np.zeros(shape, bool); ref[5:15, 30:40] = True
    bg = np.zeros(shape, bool); bg[30:45, 45:60] = True
    response = 1 + 0.3 * (np.arange(n_t) >= step_at)
    movie = np.full((n_t, *shape), 100.0)
    movie[:, roi] += (500 * np.exp(-k * t) * response)[:, None]
    movie[:, ref] += (400 * np.exp(-k * t))[:, None]
    movie += rng.normal(0, 5, movie.shape)
    inputs = {"movie": movie.astype(np.uint16), "roi": roi, "background_roi": bg, "reference_roi": ref,
              "frame_interval_s": dt, "baseline_frames": step_at}
    return inputs, {"k": k, "step_at": step_at, "response": 1.3}


def test_timelapse_intensity_recovers_bleach_rate_and_response(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, truth = make_movie()
    out = run_doc(kernel, "timelapse-intensity", inputs, ["bleach_rate_per_s", "f_over_f0", "times_s"], tmp_path)
    assert float(out["bleach_rate_per_s"]) == pytest.approx(truth["k"], rel=0.03)
    f = out["f_over_f0"]
    s = truth["step_at"]
    assert f[:s].mean() == pytest.approx(1.0, abs=0.02)
    assert f[s:].mean() == pytest.approx(truth["response"], abs=0.03)
    assert f[s:].std() < 0.02, "bleaching left a trend after correction"


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
