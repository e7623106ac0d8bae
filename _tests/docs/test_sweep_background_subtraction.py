"""background-subtraction across its validated range, checked block by block against the true background:
slopes up to 10 counts/px under a 1500-count haze, noise 2-20, objects 5-24 px (size given or measured).

Truth is the generated background. The error is read per 32 px block over all pixels (so the
image edges count) and per object under the object (where a background estimate can ride up
or cut a glow while a global median of the field stays at zero).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _tests.support import seedlib
from _tests.support.sweeplib import Inputs, Outputs, disc, replace_once, run_doc, scatter

pytestmark = pytest.mark.slow

PRODUCES = ["background", "subtracted"]


def make(
    seed: int,
    size: int = 256,
    diameter: float = 12,
    n: int = 30,
    slope: float = 0.8,
    edge_rise: float = 0.0,
    glow: float = 0.0,
    glow_sigma: float = 60.0,
    noise: float = 5.0,
    amplitude: float = 200.0,
    at_edge: int = 0,
    dtype: Any = np.uint16,
    measure: bool = False,
) -> tuple[Inputs, dict[str, Any]]:
    rng = np.random.default_rng(seed)
    shape = (size, size)
    yy, xx = np.mgrid[:size, :size]
    bg = (
        300.0
        + slope * xx
        + edge_rise * np.exp((xx - size + 1) / 25.0)
        + glow * np.exp(-((yy - 0.35 * size) ** 2 + (xx - 0.6 * size) ** 2) / (2 * glow_sigma**2))
    )
    r = diameter / 2
    centers = scatter(rng, n, shape, sep=1.5 * diameter, border=diameter)
    centers += [
        (rng.uniform(diameter, size - diameter), size - 1 - k * 0.4 * r) for k in range(at_edge)
    ]  # cut by the edge
    objects = np.zeros(shape)
    for c in centers:
        objects = np.maximum(objects, amplitude * disc(shape, c, r))
    image = bg + objects + rng.normal(0, noise, shape)
    if np.issubdtype(dtype, np.integer):
        image = np.round(np.clip(image, 0, None))
    inputs: Inputs = {"image": image.astype(dtype), "object_diameter_px": None if measure else float(diameter)}
    return inputs, {"bg": bg, "objects": objects, "centers": centers, "r": r, "noise": noise}


def check(out: Outputs, truth: dict[str, Any]) -> dict[str, float]:
    err = out["background"] - truth["bg"]
    size = err.shape[0]
    blocks = [float(err[y : y + 32, x : x + 32].mean()) for y in range(0, size, 32) for x in range(0, size, 32)]
    block_tol = max(2.0, 0.4 * truth["noise"])
    worst_block = max(blocks, key=abs)
    assert abs(worst_block) <= block_tol, f"background off by {worst_block:+.2f} in a block (tolerance {block_tol})"
    under = [float(err[disc(err.shape, c, truth["r"] - 1)].mean()) for c in truth["centers"]]
    under_tol = max(5.0, truth["noise"])
    worst_under = max(under, key=abs)
    assert abs(worst_under) <= under_tol, (
        f"background under an object off by {worst_under:+.2f} (tolerance {under_tol})"
    )
    return {"worst_block": worst_block, "worst_under": worst_under}


# (id, seed, make kwargs)
CONDITIONS: list[tuple[str, int, dict[str, Any]]] = [
    ("issue20-edge-ramp-and-glow", 201, {"edge_rise": 40.0, "glow": 150.0, "glow_sigma": 40.0, "at_edge": 3}),
    (
        "flat-float-128px-small",
        202,
        {"size": 128, "diameter": 8, "n": 20, "slope": 0.0, "noise": 2.0, "dtype": np.float32},
    ),
    ("steep-slope-edge-objects", 203, {"slope": 1.0, "diameter": 16, "n": 15, "at_edge": 4}),
    ("crowded-20pct", 204, {"size": 192, "n": 60, "diameter": 12, "glow": 80.0}),
    ("large-objects-broad-glow", 205, {"diameter": 24, "n": 10, "glow": 200.0, "glow_sigma": 72.0, "noise": 10.0}),
    ("noisy-sd20", 206, {"noise": 20.0, "glow": 100.0, "edge_rise": 30.0}),
    # a steep slope under a haze of 1500 counts (the curvature a flat disk cuts into an "object"),
    # at the lowest noise, where a noise read from the top-hat's spread is zero
    ("slope10-haze1500-noise2", 211, {"slope": 10.0, "glow": 1500.0, "glow_sigma": 45.0, "noise": 2.0, "n": 25}),
    (
        "spots-slope3-haze1500-size-measured",
        214,
        {
            "size": 192,
            "slope": 3.0,
            "glow": 1500.0,
            "glow_sigma": 45.0,
            "noise": 8.0,
            "diameter": 5,
            "n": 40,
            "amplitude": 300.0,
            "measure": True,
        },
    ),
]


KWARGS = {name: kwargs for name, _, kwargs in CONDITIONS}


@pytest.mark.parametrize(("seed", "kwargs"), [c[1:] for c in CONDITIONS], ids=[c[0] for c in CONDITIONS])
def test_background_sweep(kernel: seedlib.KernelRunner, tmp_path: Path, seed: int, kwargs: dict[str, Any]) -> None:
    inputs, truth = make(seed, **kwargs)
    out = run_doc(kernel, "background-subtraction", inputs, PRODUCES, tmp_path)
    check(out, truth)


def test_radius_too_small_stops(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, _ = make(207, size=128, n=12, diameter=16)
    inputs["object_diameter_px"] = 3.0
    with pytest.raises(seedlib.KernelError, match=r"smaller than the typical object here \(\d+ px.*pass None"):
        run_doc(kernel, "background-subtraction", inputs, PRODUCES, tmp_path)


def test_sweep_fails_with_the_opening_as_background(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """Core step removed (no fill from object-free pixels: the opening is the background): the truth check fails."""
    inputs, truth = make(201, **CONDITIONS[0][2])
    edit = replace_once("background = fill(objects, padded=True)", "background = opened")
    out = run_doc(kernel, "background-subtraction", inputs, PRODUCES, tmp_path, edit=edit)
    with pytest.raises(AssertionError, match="background"):
        check(out, truth)


def test_sweep_fails_with_the_noise_read_from_the_top_hat(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """Core step replaced by the old one (noise = spread of the top-hat, which a smooth slope zeroes):
    the whole field passes for objects and the procedure stops, or the background is wrong."""
    inputs, truth = make(211, **KWARGS["slope10-haze1500-noise2"])
    edit = replace_once(
        "noise = pixel_noise / (2 * np.sqrt(np.pi))",
        "noise = 1.4826 * np.median(np.abs(smoothed - opened - np.median(smoothed - opened)))",
    )
    with pytest.raises((AssertionError, seedlib.KernelError), match=r"background|objects cover"):
        check(run_doc(kernel, "background-subtraction", inputs, PRODUCES, tmp_path, edit=edit), truth)


def test_sweep_fails_when_the_floor_cannot_follow_a_haze(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """Core step replaced by the old one (flat disk only): the haze peak the disk cuts passes for an
    object, the fill from around it cannot rebuild the peak, and the background there comes out low."""
    inputs, truth = make(211, **KWARGS["slope10-haze1500-noise2"])
    edit = replace_once(
        "opened = np.maximum(flat, rolled)[radius:-radius, radius:-radius]",
        "opened = flat[radius:-radius, radius:-radius]",
    )
    with pytest.raises(AssertionError, match="background off by -"):
        check(run_doc(kernel, "background-subtraction", inputs, PRODUCES, tmp_path, edit=edit), truth)
