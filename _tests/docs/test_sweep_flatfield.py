"""flatfield across its validated range: vignetting 1.2x to 3x (centred and off-centre), objects
16-64 px across (a quarter of the field's width) covering 5-60 % of the field, camera offset 0 or
100 (a number or a dark frame), with and without a blank, uint16 and float.

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
import tifffile
from scipy import ndimage as ndi

from _tests.support import seedlib
from _tests.support.sweeplib import Inputs, Outputs, disc, replace_once, run_doc, scatter

pytestmark = pytest.mark.slow

SHAPE = (256, 256)
PRODUCES = ["corrected", "flat", "gradient_before", "gradient_after"]


@dataclass(frozen=True)
class Case:
    seed: int
    vignetting: float  # brightest / darkest illumination in the field
    coverage: float  # share of the field covered by objects
    dark: float
    centre: tuple[float, float] = (128, 128)
    blank: bool = False
    dtype: str = "uint16"
    radius: tuple[float, float] = (8.0, 8.0)  # object radii drawn from this range
    dark_frame: bool = False  # the offset comes as a dark frame, not a number


CASES = {
    "vig1.2-cover5-dark0": Case(401, 1.2, 0.05, 0.0),
    "vig3-cover10-dark100-offcentre": Case(402, 3.0, 0.10, 100.0, centre=(90, 170)),
    "vig2-cover30-dark100": Case(403, 2.0, 0.30, 100.0),
    "vig3-cover30-dark0-corner": Case(404, 3.0, 0.30, 0.0, centre=(60, 60)),
    "vig1.5-cover20-dark100-float": Case(405, 1.5, 0.20, 100.0, centre=(140, 110), dtype="float32"),
    "vig2.5-cover15-dark100-blank": Case(406, 2.5, 0.15, 100.0, centre=(100, 150), blank=True),
    "vig2.5-cover60-r8-32-offcentre": Case(407, 2.5, 0.60, 0.0, centre=(70, 180), radius=(8, 32)),
    "vig3-cover50-r16-32-dark-frame": Case(408, 3.0, 0.50, 100.0, centre=(150, 60), radius=(16, 32), dark_frame=True),
}


def illumination(case: Case, centre: tuple[float, float] | None = None) -> np.ndarray:
    yy, xx = np.mgrid[: SHAPE[0], : SHAPE[1]]
    cy, cx = centre or case.centre
    r2 = (yy - cy) ** 2 + (xx - cx) ** 2
    width2 = r2.max() / (2 * np.log(case.vignetting))  # Gaussian falling to 1/vignetting at the far corner
    return np.exp(-r2 / (2 * width2))


def place_objects(rng: np.random.Generator, case: Case) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """Discs of the case's radii, largest first, 3 px apart, until they cover `coverage` of the field
    (centres anywhere in it: objects are cut by the edge too); returns the mask and the centres of
    the discs that lie whole inside the field."""
    objects = np.zeros(SHAPE, bool)
    placed: list[tuple[tuple[float, float], float]] = []
    for r in np.sort(rng.uniform(*case.radius, 400))[::-1]:
        for _ in range(300):
            c = (rng.uniform(0, SHAPE[0]), rng.uniform(0, SHAPE[1]))
            if all(np.hypot(c[0] - q[0], c[1] - q[1]) > r + qr + 3 for q, qr in placed):
                placed.append((c, r))
                objects |= disc(SHAPE, c, r)
                break
        if objects.mean() >= case.coverage:
            break
    inside = [c for c, r in placed if r <= min(c[0], c[1], SHAPE[0] - 1 - c[0], SHAPE[1] - 1 - c[1])]
    return objects, inside


def make_field(case: Case, blank_centre: tuple[float, float] | None = None) -> tuple[Inputs, dict[str, Any]]:
    rng = np.random.default_rng(case.seed)
    illum = illumination(case)
    if case.radius[1] > case.radius[0]:
        objects, centers = place_objects(rng, case)
    else:
        radius = case.radius[0]
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
    dark: Any = case.dark + rng.normal(0, 4, SHAPE) if case.dark_frame else case.dark
    inputs: Inputs = {"image": image.astype(case.dtype), "blank": blank, "dark_level": dark}
    background = ndi.distance_transform_edt(~objects) > 3
    return inputs, {"background": background, "centers": centers}


def background_spread(img: np.ndarray, background: np.ndarray, block: int = 32) -> float:
    """(max - min) / mean of background block means over the whole plane: independent of the doc's fit."""
    means = [
        img[y : y + block, x : x + block][background[y : y + block, x : x + block]].mean()
        for y in range(0, SHAPE[0], block)
        for x in range(0, SHAPE[1], block)
        if background[y : y + block, x : x + block].sum() >= 50
    ]
    return float((max(means) - min(means)) / np.mean(means))


def check(out: Outputs, inputs: Inputs, truth: dict[str, Any]) -> dict[str, Any]:
    before = background_spread(inputs["image"].astype(float) - np.median(inputs["dark_level"]), truth["background"])
    after = background_spread(out["corrected"].astype(float), truth["background"])
    means = np.array([out["corrected"][disc(SHAPE, c, 5)].mean() for c in truth["centers"]])
    cv = float(means.std() / means.mean())
    assert after < 0.06, f"background still varies by {after:.1%} (before {before:.1%})"
    assert cv < 0.03, f"equal objects vary by {cv:.1%} after correction"
    return {
        "spread_before": round(before, 3),
        "spread_after": round(after, 4),
        "object_cv": round(cv, 4),
        "doc_gradient": (round(float(out["gradient_before"]), 3), round(float(out["gradient_after"]), 3)),
    }


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


def test_flatfield_saves_through_outputs(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """The save step defers to the outputs reference: a name the user gave wins over any rule."""
    inputs, _ = make_field(CASES["vig1.2-cover5-dark0"])
    inputs.update(source_path=str(tmp_path / "plate_A01.tif"), user_names={"flatfield": "even.tif"})
    out = run_doc(kernel, "flatfield", inputs, ["corrected", "corrected_path"], tmp_path)
    assert Path(str(out["corrected_path"])) == tmp_path / "results" / "even.tif"
    np.testing.assert_array_equal(tifffile.imread(tmp_path / "results" / "even.tif"), out["corrected"])


def test_flatfield_sweep_fails_when_objects_stay_in_the_fit(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """Core step removed (objects not left out of the surface fit): on a confluent field the fit rides
    the objects: the truth check fails, or the doc's own gradient gate stops it."""
    inputs, truth = make_field(CASES["vig2.5-cover60-r8-32-offcentre"])
    edit = replace_once("settled = ndi.distance_transform_edt(~objects) > 2", "settled = np.ones_like(objects)")
    with pytest.raises(
        (AssertionError, seedlib.KernelError), match=r"still varies|equal objects vary|left a|lies below"
    ):
        check(run_doc(kernel, "flatfield", inputs, PRODUCES, tmp_path, edit=edit), inputs, truth)


def test_flatfield_stops_when_a_lamp_pattern_leaves_no_background(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """An illumination pattern finer than the surface (a fibre bundle's cells): everything above the
    fit looks like an object, too little background is left, and the procedure asks for a blank."""
    inputs, _ = make_field(CASES["vig1.5-cover20-dark100-float"])
    yy, xx = np.mgrid[: SHAPE[0], : SHAPE[1]]
    pattern = 1 + 0.15 * np.sin(xx / SHAPE[1] * 10 * np.pi) * np.sin(yy / SHAPE[0] * 8 * np.pi)
    inputs["image"] = (inputs["image"] - 100) * pattern + 100
    with pytest.raises(seedlib.KernelError, match=r"too little background .* use a blank"):
        run_doc(kernel, "flatfield", inputs, PRODUCES, tmp_path)


def test_flatfield_stops_when_a_sheet_covers_two_thirds(kernel: seedlib.KernelRunner, tmp_path: Path) -> None:
    """A confluent sheet over two thirds of the field is taken for background: the real background
    then lies below the surface, which the floor of a fluorescence image never does; it stops."""
    inputs, _ = make_field(CASES["vig1.2-cover5-dark0"])
    sheet = np.zeros(SHAPE)
    sheet[:, 90:] = 1500.0
    inputs["image"] = (inputs["image"] + ndi.gaussian_filter(sheet, 2)).astype(np.uint16)
    with pytest.raises(seedlib.KernelError, match=r"lies below the fitted background.*use a blank"):
        run_doc(kernel, "flatfield", inputs, PRODUCES, tmp_path)


def test_flatfield_stops_when_a_colony_leaves_a_corner_without_background(
    kernel: seedlib.KernelRunner, tmp_path: Path
) -> None:
    """A colony half the field wide over a corner: no background within 90 px, the surface would be
    extrapolated across it; the procedure stops and says where."""
    case = CASES["vig1.2-cover5-dark0"]
    inputs, _ = make_field(case)
    colony = ndi.gaussian_filter(disc(SHAPE, (255, 255), 120).astype(float), 2) * 800 * illumination(case)
    inputs["image"] = (inputs["image"] + colony).astype(np.uint16)
    with pytest.raises(seedlib.KernelError, match=r"none within \d+ px of .*crop that region away"):
        run_doc(kernel, "flatfield", inputs, PRODUCES, tmp_path)
