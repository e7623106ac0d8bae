"""colocalization across its validated range: classic Manders against the analytic value, Pearson by design.

The analytic M1 is computed on the noiseless images: ch1's intensity where ch2's spots are,
over ch1's intensity in the mask (background included, as in the classic definition).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _tests.support import seedlib
from _tests.support.sweeplib import Inputs, disc, replace_once, run_doc, scatter, texture

pytestmark = pytest.mark.slow

PRODUCES = ["pearson", "pearson_control", "m1", "m2", "m1_chance", "m2_chance", "manders_note"]


def make_spots(
    seed: int,
    size: int = 200,
    n1: int = 40,
    n2: int = 30,
    shared: int = 20,
    radius: float = 3,
    bg: tuple[float, float] = (100, 50),
    noise: float = 5,
    whole: bool = True,
    dtype: Any = np.float64,
) -> tuple[Inputs, dict[str, float]]:
    rng = np.random.default_rng(seed)
    shape = (size, size)
    pts = scatter(rng, n1 + n2 - shared, shape, sep=4 * radius, border=2 * radius)
    spots1, spots2 = pts[:n1], pts[:shared] + pts[n1:]
    clean1, clean2 = np.full(shape, float(bg[0])), np.full(shape, float(bg[1]))
    pos2, pos1 = np.zeros(shape, bool), np.zeros(shape, bool)
    for c in spots1:
        d = disc(shape, c, radius)
        clean1 += rng.uniform(300, 500) * d
        pos1 |= d
    for c in spots2:
        d = disc(shape, c, radius)
        clean2 += rng.uniform(250, 400) * d
        pos2 |= d
    mask = np.ones(shape, bool) if whole else disc(shape, (size / 2, size / 2), 0.4 * size)
    ch1: np.ndarray = clean1 + rng.normal(0, noise, shape)
    ch2: np.ndarray = clean2 + rng.normal(0, noise, shape)
    if np.issubdtype(dtype, np.integer):
        ch1, ch2 = np.round(np.clip(ch1, 0, None)), np.round(np.clip(ch2, 0, None))
    m1 = clean1[mask & pos2].sum() / clean1[mask].sum()
    m2 = clean2[mask & pos1].sum() / clean2[mask].sum()
    return {"ch1": ch1.astype(dtype), "ch2": ch2.astype(dtype), "mask": mask}, {"m1": m1, "m2": m2}


def make_texture(seed: int) -> tuple[Inputs, dict[str, float]]:
    """Shared smooth signal plus independent noise of equal variance: r = 0.5 by design."""
    rng = np.random.default_rng(seed)
    shape = (200, 200)
    mask = disc(shape, (100, 100), 75)
    s = texture(rng, shape, 2.0)
    ch1 = 500 + 100 * s + 100 * texture(rng, shape, 2.0)
    ch2 = 300 + 80 * s + 80 * texture(rng, shape, 2.0)
    ramp = np.add.outer(np.arange(200.0), np.arange(200.0)) * 20  # correlated junk outside the mask
    ch1[~mask] += ramp[~mask]
    ch2[~mask] += ramp[~mask]
    return {"ch1": ch1, "ch2": ch2, "mask": mask}, {"pearson": 0.5}


SPOT_CONDITIONS = [
    ("issue20-classic-half-shared", 301, {}),
    ("uint16-input", 302, {"dtype": np.uint16, "noise": 10}),
    ("none-shared", 303, {"shared": 0, "n2": 25}),
    ("all-shared", 304, {"n1": 30, "n2": 30, "shared": 30}),
    ("small-field-disc-mask-noisy", 305, {"size": 128, "n1": 15, "n2": 15, "shared": 8, "noise": 20, "whole": False}),
    ("large-spots-256px", 306, {"size": 256, "radius": 4, "n1": 30, "n2": 40, "shared": 10}),
    ("low-floor-large-m", 310, {"bg": (10, 5), "noise": 3, "shared": 30, "n1": 35, "n2": 40}),
]


@pytest.mark.parametrize(("seed", "kwargs"), [c[1:] for c in SPOT_CONDITIONS], ids=[c[0] for c in SPOT_CONDITIONS])
def test_manders_sweep(kernel: seedlib.KernelRunner, tmp_path: Path, seed: int, kwargs: dict[str, Any]) -> None:
    inputs, truth = make_spots(seed, **kwargs)
    out = run_doc(kernel, "colocalization", inputs, PRODUCES, tmp_path)
    for k in ("m1", "m2"):
        assert abs(float(out[k]) - truth[k]) <= 0.01, f"{k} {float(out[k]):.3f} vs analytic classic {truth[k]:.3f}"
    assert str(out["manders_note"]) == ""


def test_pearson_texture_by_design(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, truth = make_texture(307)
    out = run_doc(kernel, "colocalization", inputs, PRODUCES, tmp_path)
    assert abs(float(out["pearson"]) - truth["pearson"]) < 0.05, float(out["pearson"])
    assert abs(float(out["pearson_control"])) < 0.15, float(out["pearson_control"])
    assert int(out["_images_shown"]) == 1, "the scatter plot comes back as one image"


def test_manders_on_a_continuous_texture(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """A continuous texture (inside the validated range): the two-population gate measures noise as
    noise, so Manders comes out, equal to the classic formula on the same pixels."""
    inputs, _ = make_texture(311)
    out = run_doc(kernel, "colocalization", inputs, PRODUCES, tmp_path)
    truth = classic_manders(inputs)
    assert str(out["manders_note"]) == ""
    for k in ("m1", "m2"):
        assert abs(float(out[k]) - truth[k]) < 1e-9, f"{k} {float(out[k])} vs classic {truth[k]}"


def test_sweep_fails_with_the_spread_of_all_pixels_as_noise(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """Core step replaced by the old one (noise = spread of every pixel in the mask): the texture's
    own signal counts as noise, the gate rejects it and M1/M2 become NaN."""
    inputs, _ = make_texture(311)
    edit = replace_once(
        "    noise = 1.4826 * np.median(np.abs(d[inside])) / 2          # SD of one pixel's noise",
        "    noise = 1.4826 * np.median(np.abs(v - np.median(v)))",
    )
    out = run_doc(kernel, "colocalization", inputs, PRODUCES, tmp_path, edit=edit)
    assert np.isnan(float(out["m1"])), "the old gate should reject the texture"


def classic_manders(inputs: Inputs) -> dict[str, float]:
    """Classic M1/M2 with Otsu thresholds on the pixels inside the mask (the definition itself)."""
    from skimage.filters import threshold_otsu

    m = inputs["mask"]
    a, b = inputs["ch1"].astype(float)[m], inputs["ch2"].astype(float)[m]
    return {
        "m1": float(a[b > threshold_otsu(b)].sum() / a.sum()),
        "m2": float(b[a > threshold_otsu(a)].sum() / b.sum()),
    }


def test_out_of_register_is_at_chance(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """ch2 shifted far out of register: M1 falls to its chance level, and the doc's chance value says so."""
    inputs, _ = make_spots(308)
    inputs["ch2"] = np.roll(inputs["ch2"], (37, 53), axis=(0, 1))
    out = run_doc(kernel, "colocalization", inputs, PRODUCES, tmp_path)
    assert abs(float(out["m1"]) - float(out["m1_chance"])) < 0.05, (float(out["m1"]), float(out["m1_chance"]))


def test_blank_channel_gives_no_manders_and_says_why(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, _ = make_spots(309)
    inputs["ch2"] = 50 + np.random.default_rng(9).normal(0, 5, inputs["ch2"].shape)
    out = run_doc(kernel, "colocalization", inputs, PRODUCES, tmp_path)
    assert np.isnan(float(out["m1"])) and np.isnan(float(out["m2"]))
    assert "ch2: no separate bright population" in str(out["manders_note"])
    assert "check the channel is not blank" in str(out["manders_note"])


def test_sweep_fails_without_the_other_channels_threshold(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """Core step removed (M1 no longer restricted to where ch2 is present): the check fails."""
    inputs, truth = make_spots(301)
    edit = replace_once(
        "return float(x[mask & (other > t_other)].sum() / x[mask].sum())", "return float(x[mask].sum() / x[mask].sum())"
    )
    out = run_doc(kernel, "colocalization", inputs, PRODUCES, tmp_path, edit=edit)
    assert abs(float(out["m1"]) - truth["m1"]) > 0.01
