"""register-channels across its validated range: shifts up to ±20 px, subpixel, SNR 1-20, ramps.

Truth is the displacement each channel was generated with; the doc's shift is the correction,
so it must equal minus the displacement. The 200 px field with noise, a brightness ramp and
objects cut by the edges is where plain phase correlation was ~0.5 px off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import ndimage as ndi

from _tests.support import seedlib
from _tests.support.sweeplib import Inputs, Outputs, replace_once, run_doc, scatter, texture

pytestmark = pytest.mark.slow

PRODUCES = ["shifts", "errors", "registered", "valid"]


def make(
    seed: int,
    displacements: list[tuple[float, float]],
    size: int = 200,
    noise: float = 20.0,
    sigma: float = 3.0,
    ramp: float = 3.0,
    dtype: Any = np.float32,
) -> tuple[Inputs, np.ndarray]:
    """A scene (texture sd 100, blurred blobs, a ramp moving with it), cut out displaced, plus noise."""
    rng = np.random.default_rng(seed)
    n = size + 64
    scene = texture(rng, (n, n), sigma) * 100 + 400
    blobs = np.zeros((n, n))
    for y, x in scatter(rng, n * n // 2000, (n, n), sep=20, border=0):
        blobs[int(y), int(x)] = 1
    scene += ndi.gaussian_filter(ndi.maximum_filter(blobs, 9), 2) * 300
    yy, xx = np.mgrid[:n, :n]
    scene += ramp * xx + 0.5 * ramp * yy  # non-periodic: the ramp jumps where edges wrap
    chans = [
        ndi.shift(scene, d, order=3)[32 : 32 + size, 32 : 32 + size] + rng.normal(0, noise, (size, size))
        for d in [(0.0, 0.0), *displacements]
    ]
    stack = np.stack(chans)
    if np.issubdtype(dtype, np.integer):
        stack = np.clip(np.round(stack), 0, None)
    return {"channels": stack.astype(dtype), "reference_channel": 0}, np.array([(0.0, 0.0), *displacements])


def check(out: Outputs, truth: np.ndarray, tol: float) -> float:
    err = float(np.abs(out["shifts"] + truth).max())  # correction = minus the displacement
    assert err <= tol, f"shifts {np.round(out['shifts'], 3).tolist()} vs {(-truth).tolist()}: error {err:.3f} > {tol}"
    reg, valid = out["registered"], out["valid"]
    assert reg.dtype == np.float64 and valid.mean() > 0.5
    if np.abs(truth).max() >= 1:
        assert not valid.all(), "border pixels shifted in from outside must be marked invalid"
    for c in range(1, len(reg)):
        r = np.corrcoef(reg[0][valid], reg[c][valid])[0, 1]
        assert r > 0.5, f"channel {c} correlates {r:.3f} with the reference after registration"
    return err


# (id, seed, make kwargs, tolerance px)
CONDITIONS = [
    ("issue20-200px-7-7-noise-ramp", 101, {"displacements": [(7.0, 7.0)], "noise": 30, "sigma": 6}, 0.1),
    ("subpixel-small-128px", 102, {"displacements": [(0.3, -0.6)], "size": 128, "noise": 5, "sigma": 2}, 0.1),
    ("max-shift-20px", 103, {"displacements": [(20.0, -19.5), (-17.3, 18.8)], "noise": 10}, 0.1),
    ("strong-noise-snr1", 104, {"displacements": [(-5.4, 3.7)], "noise": 100, "sigma": 3}, 0.15),
    (
        "uint16-fine-256px",
        105,
        {"displacements": [(2.6, -1.8), (-3.3, 4.1)], "size": 256, "sigma": 2, "dtype": np.uint16},
        0.1,
    ),
    ("broad-structure-steep-ramp", 106, {"displacements": [(-12.3, 15.8)], "sigma": 6, "ramp": 8}, 0.1),
]


@pytest.mark.parametrize(("seed", "kwargs", "tol"), [c[1:] for c in CONDITIONS], ids=[c[0] for c in CONDITIONS])
def test_register_sweep(
    kernel: seedlib.KernelRunner, tmp_path: Path, seed: int, kwargs: dict[str, Any], tol: float
) -> None:
    inputs, truth = make(seed, **kwargs)
    out = run_doc(kernel, "register-channels", inputs, PRODUCES, tmp_path)
    check(out, truth, tol)
    assert (out["errors"][1:] < 0.95).all()


def test_blank_channel_stops_naming_what_to_check(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, _ = make(107, [(3.0, 2.0)])
    rng = np.random.default_rng(7)
    inputs["channels"][1] = 100 + rng.normal(0, 5, inputs["channels"][1].shape)  # camera noise only
    with pytest.raises(seedlib.KernelError, match=r"image 1: no shared structure.*not blank"):
        run_doc(kernel, "register-channels", inputs, PRODUCES, tmp_path)


def test_shift_beyond_range_stops(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, _ = make(108, [(40.0, -35.0)], noise=10)
    with pytest.raises(seedlib.KernelError, match="exceeds 30 px: check that the images show the same field"):
        run_doc(kernel, "register-channels", inputs, PRODUCES, tmp_path)


def test_sweep_fails_without_the_measured_shift(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """Core step removed (the measured shift is never recorded): the sweep's check must fail."""
    inputs, truth = make(101, [(7.0, 7.0)], noise=30, sigma=6)
    edit = replace_once("shifts[c], errors[c] = shift, error", "errors[c] = error")
    out = run_doc(kernel, "register-channels", inputs, PRODUCES, tmp_path, edit=edit)
    with pytest.raises(AssertionError, match="shifts"):
        check(out, truth, 0.1)
