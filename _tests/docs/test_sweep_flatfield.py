"""flatfield across its validated range: vignetting 1.2x to 3x (centred and off-centre), objects
covering 5-30 % of the field, camera offset 0 or 100, with and without a blank, uint16 and float.

Truth: the generated illumination and scene. Tolerances: background (object-free pixels, block
means over the whole plane, edges included) within ±3 % (max - min under 6 %), equal objects equal within 3 %
(coefficient of variation of their means).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import ndimage as ndi

from _tests.support import seedlib
from _tests.support.sweeplib import Inputs, Outputs, disc, replace_once, run_doc, scatter

pytestmark = pytest.mark.slow

SHAPE = (256, 256)
PRODUCES = ["corrected", "flat", "gradient_before", "gradient_after"]


@dataclass(frozen=True)
class Case:
    seed: int
    vignetting: float        # brightest / darkest illumination in the field
    coverage: float          # share of the field covered by objects
    dark: float
    centre: tuple[float, float] = (128, 128)
    blank: bool = False
    dtype: str = "uint16"


CASES = {
    "vig1.2-cover5-dark0": Case(401, 1.2, 0.05, 0.0),
    "vig3-cover10-dark100-offcentre": Case(402, 3.0, 0.10, 100.0, centre=(90, 170)),
    "vig2-cover30-dark100": Case(403, 2.0, 0.30, 100.0),
    "vig3-cover30-dark0-corner": Case(404, 3.0, 0.30, 0.0, centre=(60, 60)),
    "vig1.5-cover20-dark100-float": Case(405, 1.5, 0.20, 100.0, centre=(140, 110), dtype="float32"),
    "vig2.5-cover15-dark100-blank": Case(406, 2.5, 0.15, 100.0, centre=(100, 150), blank=True),
}


def illumination(case: Case, centre: tuple[float, float] | None = None) -> np.ndarray:
    yy, xx = np.mgrid[: SHAPE[0], : SHAPE[1]]
    cy, cx = centre or case.centre
    r2 = (yy - cy) ** 2 + (xx - cx) ** 2
    width2 = r2.max() / (2 * np.log(case.vignetting))       # Gaussian falling to 1/vignetting at the far corner
    return np.exp(-r2 / (2 * width2))


def make_field(case: Case, blank_centre: tuple[float, float] | None = None) -> tuple[Inputs, dict[str, Any]]:
    rng = np.random.default_rng(case.seed)
    illum = illumination(case)
    radius = 8.0
    n = int(case.coverage * SHAPE[0] * SHAPE[1] / (np.pi * radius**2))
    centers = scatter(rng, n, SHAPE, sep=2 * radius + 1, border=radius)
    objects = np.zeros(SHAPE, bool)
    for c in centers:
        objects |= disc(SHAPE, c, radius)
    scene = 400.0 + 800.0 * objects
    image = case.dark + illum * scene + rng.normal(0, 4, SHAPE)
    blank = None
    if case.blank:
        b_illum = illumination(case, blank_centre) if blank_centre else illum
        blank = (case.dark + b_illum * 1000 + rng.normal(0, 4, SHAPE)).astype(case.dtype)
    inputs: Inputs = {"image": image.astype(case.dtype), "blank": blank, "dark_level": case.dark,
                      "object_diameter_px": 2 * radius}
    background = ndi.distance_transform_edt(~objects) > 3
    return inputs, {"background": background, "centers": centers}


def background_spread(img: np.ndarray, background: np.ndarray, block: int = 32) -> float:
    """(max - min) / mean of background block means over the whole plane: independent of the doc's fit."""
    means = [img[y : y + block, x : x + block][background[y : y + block, x : x + block]].mean()
             for y in range(0, SHAPE[0], block) for x in range(0, SHAPE[1], block)
             if background[y : y + block, x : x + block].sum() >= 50]
    return float((max(means) - min(means)) / np.mean(means))


def check(out: Outputs, inputs: Inputs, truth: dict[str, Any]) -> dict[str, Any]:
    before = background_spread(inputs["image"].astype(float) - inputs["dark_level"], truth["background"])
    after = background_spread(out["corrected"].astype(float), truth["background"])
    means = np.array([out["corrected"][disc(SHAPE, c, 5)].mean() for c in truth["centers"]])
    cv = float(means.std() / means.mean())
    assert after < 0.06, f"background still varies by {after:.1%} (before {before:.1%})"
    assert cv < 0.03, f"equal objects vary by {cv:.1%} after correction"
    return {"spread_before": round(before, 3), "spread_after": round(after, 4), "object_cv": round(cv, 4),
            "doc_gradient": (round(float(out["gradient_before"]), 3), round(float(out["gradient_after"]), 3))}


@pytest.mark.parametrize("name", list(CASES))
def test_flatfield_sweep(kernel: seedlib.KernelRunner, tmp_path: Path, name: str) -> None:
    inputs, truth = make_field(CASES[name])
    out = run_doc(kernel, "flatfield", inputs, PRODUCES, tmp_path)
    print(name, check(out, inputs, truth))


def test_flatfield_stops_on_a_blank_from_other_settings(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """A blank whose bright centre sits elsewhere: the residual check (read without the fit) stops."""
    inputs, _ = make_field(CASES["vig2.5-cover15-dark100-blank"], blank_centre=(200, 40))
    with pytest.raises(seedlib.KernelError, match="gradient: check that the blank"):
        run_doc(kernel, "flatfield", inputs, PRODUCES, tmp_path)


def test_flatfield_stops_on_an_offset_above_the_data(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    inputs, _ = make_field(CASES["vig2-cover30-dark100"])
    inputs["dark_level"] = 600.0
    with pytest.raises(seedlib.KernelError, match="check the camera offset"):
        run_doc(kernel, "flatfield", inputs, PRODUCES, tmp_path)


def test_flatfield_sweep_fails_without_the_division(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """Core step removed (no division by the profile): the truth check and the doc's own gate both see it."""
    inputs, truth = make_field(CASES["vig2-cover30-dark100"])
    edit = replace_once("corrected = (img / flat).astype(np.float32)", "corrected = img.astype(np.float32)")
    with pytest.raises(AssertionError, match=r"left a|still varies"):
        check(run_doc(kernel, "flatfield", inputs, PRODUCES, tmp_path, edit=edit), inputs, truth)
