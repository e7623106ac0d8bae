"""max-projection across its validated range: 5 to 41 slices, focus anywhere including the first
slice, defocus blur 0.3-1.2 px per slice, peak SNR 10 to 200, uint8/uint16/float.

Truth: the generated focus slice and sharp plane. Tolerances: best slice within 1, kept slices
within the range where the blur is under 2.5 px, MIP at each point within 5 % of the sharp
plane's peak, the sum projection exact over the kept slices.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import ndimage as ndi

from _tests.support import seedlib
from _tests.support.sweeplib import Inputs, Outputs, replace_once, run_doc, scatter

pytestmark = pytest.mark.slow

SHAPE = (128, 128)
PRODUCES = ["best_slice", "in_focus", "mip", "sum_projection", "focus_scores"]


@dataclass(frozen=True)
class Case:
    seed: int
    n_z: int
    focus: int
    blur_per_slice: float
    snr: float
    dtype: str = "uint16"


CASES = {
    "z5-focus2-uint16": Case(501, 5, 2, 1.2, 50),
    "z21-focus10-snr10": Case(502, 21, 10, 0.8, 10),
    "z41-focus30-fine-steps": Case(503, 41, 30, 0.3, 100),
    "z15-focus0-first-slice": Case(504, 15, 0, 0.8, 50),
    "z11-focus9-uint8": Case(505, 11, 9, 1.0, 30, dtype="uint8"),
    "z25-focus12-float-snr200": Case(506, 25, 12, 0.5, 200, dtype="float32"),
}


def make_stack(case: Case, blank: bool = False) -> tuple[Inputs, dict[str, Any]]:
    rng = np.random.default_rng(case.seed)
    noise = 2.0
    points = np.zeros(SHAPE)
    centers = scatter(rng, 40, SHAPE, sep=12, border=6)
    peak_wanted = case.snr * noise
    for y, x in centers:
        points[int(y), int(x)] = 1.0
    sharp_gain = peak_wanted / ndi.gaussian_filter(points, 1.0).max()
    if blank:
        points[:] = 0
    planes = [ndi.gaussian_filter(points, 1.0 + case.blur_per_slice * abs(z - case.focus)) * sharp_gain
              for z in range(case.n_z)]
    offset = 10 if case.dtype == "uint8" else 100
    stack = np.stack([offset + p + rng.normal(0, noise, SHAPE) for p in planes])
    stack = np.clip(stack, 0, 255 if case.dtype == "uint8" else None).astype(case.dtype)
    return {"stack": stack}, {"centers": centers, "sharp": stack[case.focus].astype(float)}


def check(case: Case, inputs: Inputs, out: Outputs, truth: dict[str, Any]) -> dict[str, Any]:
    best = int(out["best_slice"])
    assert abs(best - case.focus) <= 1, f"best slice {best}, truth {case.focus}"
    kept = sorted(out["in_focus"].tolist())
    reach = int(1.5 / case.blur_per_slice)      # slices whose blur stays under 2.5 px
    assert case.focus in kept and set(kept) <= set(range(case.focus - reach, case.focus + reach + 1)), \
        f"kept slices {kept}, focus {case.focus} +- {reach}"
    peaks = np.array([out["mip"][int(y), int(x)] for y, x in truth["centers"]], float)
    expected = np.array([truth["sharp"][int(y), int(x)] for y, x in truth["centers"]])
    err = float(np.max(np.abs(peaks - expected) / expected))
    assert err < 0.05 + 3 * 2.0 / expected.min(), f"MIP peaks differ from the sharp plane by {err:.1%}"
    np.testing.assert_allclose(out["sum_projection"], inputs["stack"][kept].astype(float).sum(axis=0))
    return {"best": best, "kept": f"{kept[0]}..{kept[-1]}", "peak_err": round(err, 3)}


@pytest.mark.parametrize("name", list(CASES))
def test_max_projection_sweep(kernel: seedlib.KernelRunner, tmp_path: Path, name: str) -> None:
    case = CASES[name]
    inputs, truth = make_stack(case)
    out = run_doc(kernel, "max-projection", inputs, PRODUCES, tmp_path)
    print(name, check(case, inputs, out, truth))


def test_max_projection_stops_on_a_blank_channel(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, _ = make_stack(CASES["z21-focus10-snr10"], blank=True)
    with pytest.raises(seedlib.KernelError, match="blank or wrong channel"):
        run_doc(kernel, "max-projection", inputs, PRODUCES, tmp_path)


def test_max_projection_sweep_fails_without_focus_selection(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """Core step removed (every slice kept): defocused slices enter the projections."""
    case = CASES["z41-focus30-fine-steps"]
    inputs, truth = make_stack(case)
    edit = replace_once("in_focus = np.arange(lo, hi + 1)", "in_focus = np.arange(n_z)")
    with pytest.raises(AssertionError, match="kept slices"):
        check(case, inputs, run_doc(kernel, "max-projection", inputs, PRODUCES, tmp_path, edit=edit), truth)
