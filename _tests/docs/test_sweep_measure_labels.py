"""measure-labels across its validated range: exact areas, centroids and means from rectangles of known size.

Rectangles make every measured quantity exact: area h*w, centroid at the rectangle's centre,
mean = the value painted into it. The CSV written next to the data is read back and compared.
"""

from __future__ import annotations

import csv
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _tests.support import seedlib
from _tests.support.sweeplib import Inputs, Outputs, replace_once, run_doc

pytestmark = pytest.mark.slow

PRODUCES = ["n_objects", "csv_path", "saturated"]


def make(
    seed: int,
    shape: tuple[int, int] = (200, 220),
    n: int = 12,
    size: tuple[int, int] = (4, 14),
    id_step: int = 3,
    tile: bool = False,
    label_dtype: Any = np.int32,
    image_dtype: Any = np.uint16,
    value: tuple[float, float] = (100, 1000),
    at_edge: bool = False,
) -> tuple[Inputs, list[tuple]]:
    """n non-overlapping rectangles (or a tiling of the whole field) with ids id_step, 2*id_step, ..."""
    rng = np.random.default_rng(seed)
    labels = np.zeros(shape, label_dtype)
    image = np.full(shape, 7, image_dtype)
    rects: list[tuple[int, int, int, int]] = []
    if tile:
        ys = np.linspace(0, shape[0], 5).astype(int)
        xs = np.linspace(0, shape[1], 4).astype(int)
        rects = [(y0, x0, y1 - y0, x1 - x0) for y0, y1 in itertools.pairwise(ys) for x0, x1 in itertools.pairwise(xs)]
    else:
        taken = np.zeros(shape, bool)
        while len(rects) < n:
            h, w = (int(v) for v in rng.integers(size[0], size[1] + 1, 2))
            y0 = int(rng.integers(0, shape[0] - h + 1))
            x0 = int(rng.integers(0, shape[1] - w + 1))
            if at_edge and len(rects) < 4:  # the first four touch each edge
                y0, x0 = [(0, x0), (shape[0] - h, x0), (y0, 0), (y0, shape[1] - w)][len(rects)]
            if not taken[max(0, y0 - 1) : y0 + h + 1, max(0, x0 - 1) : x0 + w + 1].any():
                taken[y0 : y0 + h, x0 : x0 + w] = True
                rects.append((y0, x0, h, w))
    truth = []
    for k, (y0, x0, h, w) in enumerate(rects):
        lab = id_step * (k + 1)
        v = float(rng.integers(int(value[0]), int(value[1]) + 1))
        labels[y0 : y0 + h, x0 : x0 + w] = lab
        image[y0 : y0 + h, x0 : x0 + w] = v
        truth.append((lab, h * w, y0 + (h - 1) / 2, x0 + (w - 1) / 2, v))
    return {"labels": labels, "image": image, "pixel_size_um": 0.325}, truth


def check(out: Outputs, inputs: Inputs, truth: list[tuple]) -> None:
    assert int(out["n_objects"]) == len(truth), f"{int(out['n_objects'])} objects, truth {len(truth)}"
    with open(Path(str(out["csv_path"])), newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(truth)
    px = inputs["pixel_size_um"] or 1.0
    unit = "um" if inputs["pixel_size_um"] else "px"  # lengths in pixels when no pixel size is given
    for row, (lab, area, cy, cx, mean) in zip(rows, sorted(truth), strict=True):
        assert int(float(row["label"])) == lab
        assert float(row[f"area_{unit}2"]) == pytest.approx(area * px**2, rel=1e-9)
        assert float(row[f"centroid_y_{unit}"]) == pytest.approx(cy * px, rel=1e-9)
        assert float(row[f"centroid_x_{unit}"]) == pytest.approx(cx * px, rel=1e-9)
        assert float(row["intensity_mean"]) == pytest.approx(mean, rel=1e-9), f"label {lab} mean"
        assert float(row["intensity_integrated"]) == pytest.approx(mean * area, rel=1e-9)


CONDITIONS = [
    ("gaps-in-ids-uint16", 401, {}),
    ("no-background-tiling", 402, {"tile": True, "id_step": 5}),
    ("single-pixel-and-5000px-float", 403, {"shape": (160, 160), "n": 6, "size": (1, 70), "image_dtype": np.float32}),
    (
        "300-objects-uint8",
        404,
        {
            "shape": (256, 256),
            "n": 300,
            "size": (2, 5),
            "id_step": 1,
            "label_dtype": np.uint16,
            "image_dtype": np.uint8,
            "value": (10, 200),
        },
    ),
    ("edge-touching-int64", 405, {"at_edge": True, "label_dtype": np.int64}),
    ("one-object", 406, {"n": 1, "id_step": 65000, "label_dtype": np.uint16}),
]


@pytest.mark.parametrize(("seed", "kwargs"), [c[1:] for c in CONDITIONS], ids=[c[0] for c in CONDITIONS])
def test_measure_sweep(kernel: seedlib.KernelRunner, tmp_path: Path, seed: int, kwargs: dict[str, Any]) -> None:
    inputs, truth = make(seed, **kwargs)
    inputs["source_path"] = str(tmp_path / "plate1.ome.tif")
    out = run_doc(kernel, "measure-labels", inputs, PRODUCES, tmp_path)
    assert Path(str(out["csv_path"])) == tmp_path / "results" / "plate1_measure.csv"
    check(out, inputs, truth)
    assert int(out["saturated"]) == 0


def test_areas_in_pixels_when_the_user_asks_for_pixels(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, truth = make(409)
    inputs.update(pixel_size_um=None, source_path=str(tmp_path / "px.tif"), user_names={"measure": "nuclei.csv"})
    out = run_doc(kernel, "measure-labels", inputs, PRODUCES, tmp_path)
    assert Path(str(out["csv_path"])) == tmp_path / "results" / "nuclei.csv"  # the user's name, via outputs
    check(out, inputs, truth)


def test_saturated_objects_are_counted(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, truth = make(407, image_dtype=np.uint8, value=(100, 250))
    for lab, *_ in truth[:3]:
        inputs["image"][(inputs["labels"] == lab) & (np.arange(220) % 2 == 0)] = 255  # half the pixels clip
    inputs["source_path"] = str(tmp_path / "sat.tif")
    out = run_doc(kernel, "measure-labels", inputs, PRODUCES, tmp_path)
    assert int(out["saturated"]) == 3


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("mask", "labels is a mask, not a label image: run measure.label"),
        ("shape", r"labels \(200, 220\) vs image \(200, 219\)"),
        ("pixel", "pixel_size_um must be positive"),
    ],
    ids=["bool-mask", "shape-mismatch", "negative-pixel-size"],
)
def test_bad_input_stops_naming_what_to_check(
    kernel: seedlib.KernelRunner, tmp_path: Path, change: str, message: str
) -> None:
    inputs, _ = make(408)
    inputs["source_path"] = str(tmp_path / "x.tif")
    if change == "mask":
        inputs["labels"] = inputs["labels"] > 0
    elif change == "shape":
        inputs["image"] = inputs["image"][:, :-1]
    else:
        inputs["pixel_size_um"] = -0.325
    with pytest.raises(seedlib.KernelError, match=message):
        run_doc(kernel, "measure-labels", inputs, PRODUCES, tmp_path)
    assert not (tmp_path / "results").exists(), "bad input writes nothing"


def test_sweep_fails_without_the_intensity_image(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """Core step removed (intensities measured on a constant image): the check fails."""
    inputs, truth = make(401)
    inputs["source_path"] = str(tmp_path / "plate1.tif")
    edit = replace_once("intensity_image=image.astype(np.float64),", "intensity_image=np.ones(image.shape),")
    out = run_doc(kernel, "measure-labels", inputs, PRODUCES, tmp_path, edit=edit)
    with pytest.raises(AssertionError, match="mean"):
        check(out, inputs, truth)
