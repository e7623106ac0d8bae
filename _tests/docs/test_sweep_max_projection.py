"""max-projection across its validated range: 5 to 41 slices, focus anywhere including the first
slice, structure in focus at one depth or at several, defocus blur 0.3-1.2 px per slice, peak SNR
10 to 200, uint8/uint16/float, plain projections and in-focus ones.

Truth: the generated focus slices and sharp planes. Tolerances: plain projections exact; with
in-focus trimming, best slice within 1 (one depth), kept slices within the range where the blur
is under 2.5 px of some depth, every bead's MIP within 5 % of its own sharp peak, the sum
projection exact over the kept slices.
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
PRODUCES = ["best_slice", "in_focus", "mip", "sum_projection", "focus_scores", "focus_peaks"]


@dataclass(frozen=True)
class Case:
    seed: int
    n_z: int
    focus: int
    blur_per_slice: float
    snr: float
    dtype: str = "uint16"
    in_focus_only: bool = True
    depths: tuple[int, ...] = ()  # beads in focus at these slices in turn (several focus peaks)


CASES = {
    "z5-focus2-uint16": Case(501, 5, 2, 1.2, 50),
    "z21-focus10-snr10": Case(502, 21, 10, 0.8, 10),
    "z41-focus30-fine-steps": Case(503, 41, 30, 0.3, 100),
    "z15-focus0-first-slice": Case(504, 15, 0, 0.8, 50),
    "z11-focus9-uint8": Case(505, 11, 9, 1.0, 30, dtype="uint8"),
    "z25-focus12-float-snr200": Case(506, 25, 12, 0.5, 200, dtype="float32"),
    "z25-three-depths-in-focus-only": Case(507, 25, 12, 1.0, 40, depths=(4, 12, 20)),
    "z12-three-depths-plain": Case(508, 12, 6, 1.0, 40, depths=(1, 6, 10), in_focus_only=False),
}


def make_stack(case: Case, blank: bool = False) -> tuple[Inputs, dict[str, Any]]:
    rng = np.random.default_rng(case.seed)
    noise = 2.0
    centers = scatter(rng, 40, SHAPE, sep=12, border=6)
    depths = case.depths or (case.focus,)
    focus_of = [depths[k % len(depths)] for k in range(len(centers))]
    planes = np.zeros((case.n_z, *SHAPE))
    for depth in depths:
        points = np.zeros(SHAPE)
        for (y, x), f in zip(centers, focus_of, strict=True):
            points[int(y), int(x)] = float(f == depth and not blank)
        gain = case.snr * noise / ndi.gaussian_filter(np.pad([[1.0]], 8), 1.0).max()
        for z in range(case.n_z):
            planes[z] += ndi.gaussian_filter(points, 1.0 + case.blur_per_slice * abs(z - depth)) * gain
    offset = 10 if case.dtype == "uint8" else 100
    stack = offset + planes + rng.normal(0, noise, (case.n_z, *SHAPE))
    stack = np.clip(stack, 0, 255 if case.dtype == "uint8" else None).astype(case.dtype)
    sharp = [float(stack[f][int(y), int(x)]) for (y, x), f in zip(centers, focus_of, strict=True)]
    return {"stack": stack, "in_focus_only": case.in_focus_only}, {
        "centers": centers,
        "sharp": np.array(sharp),
        "depths": depths,
    }


def check(case: Case, inputs: Inputs, out: Outputs, truth: dict[str, Any]) -> dict[str, Any]:
    stack = inputs["stack"]
    kept = sorted(out["in_focus"].tolist())
    if not case.in_focus_only:
        assert kept == list(range(case.n_z)), f"a plain projection kept slices {kept}"
        np.testing.assert_array_equal(out["mip"], stack.max(axis=0))
    best = int(out["best_slice"])
    if len(truth["depths"]) == 1:
        assert abs(best - case.focus) <= 1, f"best slice {best}, truth {case.focus}"
    reach = int(1.5 / case.blur_per_slice)  # slices whose blur stays under 2.5 px
    near = {z for d in truth["depths"] for z in range(d - reach, d + reach + 1)}
    if case.in_focus_only:
        assert set(truth["depths"]) <= set(kept) and set(kept) <= near, (
            f"kept slices {kept}, focus {truth['depths']} +- {reach}"
        )
    peaks = np.array([out["mip"][int(y), int(x)] for y, x in truth["centers"]], float)
    expected = truth["sharp"]
    err = float(np.max(np.abs(peaks - expected) / expected))
    assert err < 0.05 + 3 * 2.0 / expected.min(), f"MIP peaks differ from the sharp planes by {err:.1%}"
    np.testing.assert_allclose(out["sum_projection"], stack[kept].astype(float).sum(axis=0))
    return {
        "best": best,
        "kept": f"{kept[0]}..{kept[-1]}",
        "peaks": out["focus_peaks"].tolist(),
        "peak_err": round(err, 3),
    }


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
    """Core step removed (every slice kept though the user asked for the in-focus ones): defocused
    slices enter the projections."""
    case = CASES["z41-focus30-fine-steps"]
    inputs, truth = make_stack(case)
    edit = replace_once("    in_focus = np.array(sorted(set().union(*ranges)))", "    in_focus = np.arange(n_z)")
    with pytest.raises(AssertionError, match="kept slices"):
        check(case, inputs, run_doc(kernel, "max-projection", inputs, PRODUCES, tmp_path, edit=edit), truth)


def test_max_projection_sweep_fails_with_one_focus_range_for_the_whole_plane(
    kernel: seedlib.KernelRunner, tmp_path: Path
) -> None:
    """Core step replaced by the old one (the half-maximum range of the whole-plane focus curve):
    beads in focus at the other depths are cut out of the projection."""
    case = CASES["z25-three-depths-in-focus-only"]
    inputs, truth = make_stack(case)
    edit = replace_once(
        "ranges = [half_max_range(s) for s in with_structure]", "ranges = [half_max_range(focus_scores)]"
    )
    with pytest.raises(AssertionError, match=r"kept slices|MIP peaks"):
        check(case, inputs, run_doc(kernel, "max-projection", inputs, PRODUCES, tmp_path, edit=edit), truth)
