"""One lab: the numbers the lab docs state are the numbers the data obeys.

The lab docs are read here as an agent reads them (numbers out of their text, not out of the
scope model), and every case that says its images come from one of the lab's instruments is set
up and checked against them: the camera offset under every pixel, every whole nucleus inside the
lab's size range at the stated pixel size, debris under the gate."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import tifffile

from _tests.support.prepared_trees import LAB_DIR, LAB_SECTION
from bench.cases import all_cases
from bench.cases.lab import CENTRE, DEAD_FACTOR, WELLS
from bench.cases.scope import INSTRUMENTS, PLATE_IMAGER, SPINNING_DISK, WIDEFIELD, Acquired, Instrument


def _doc(name: str) -> str:
    return (LAB_DIR / f"{name}.md").read_text(encoding="utf-8")


def _number(pattern: str, text: str) -> float:
    found = re.search(pattern, text)
    assert found, f"no match for {pattern!r}"
    return float(found.group(1))


def _channels(text: str) -> tuple[str, ...]:
    return tuple(stain for _, stain in sorted(re.findall(r"^\| (\d) \| (\w+) \|$", text, re.MULTILINE)))


class Stated:
    """What the lab docs say about one instrument."""

    def __init__(self, name: str) -> None:
        text = _doc(name)
        self.text = text
        self.pixel_um = _number(r"\*\*([\d.]+) µm\*\* per pixel", text)
        self.offset = _number(r"offset(?: of|:)? \*\*(\d+) counts\*\*", text)
        self.channels = _channels(text) or ("DAPI",)
        microscope = _doc("microscope")
        low, high = re.search(r"\*\*(\d+)–(\d+) µm²\*\*", microscope).groups()  # type: ignore[union-attr]
        self.nucleus_um2 = (float(low), float(high))  # the same lines on every instrument
        self.debris_below_um2 = _number(r"smaller than \*\*(\d+) µm²\*\*", _doc("debris-gate"))


STATED = {
    WIDEFIELD.doc: Stated("microscope"),
    SPINNING_DISK.doc: Stated("spinning-disk"),
    PLATE_IMAGER.doc: Stated("plate-imager"),
}


@pytest.mark.parametrize("instrument", INSTRUMENTS, ids=lambda instrument: instrument.doc)
def test_each_instrument_is_what_its_lab_doc_says(instrument: Instrument) -> None:
    stated = STATED[instrument.doc]
    assert (instrument.pixel_um, instrument.offset) == (stated.pixel_um, stated.offset)
    assert instrument.channels == stated.channels
    assert instrument.nucleus_um2 == stated.nucleus_um2 and instrument.debris_below_um2 == stated.debris_below_um2
    assert f'"{instrument.name}"' in stated.text  # the doc says which instrument it covers


def test_the_lab_rules_the_cases_apply_are_the_docs_rules() -> None:
    assert WIDEFIELD.frame_minutes == _number(r"one frame every (\d+) min", _doc("microscope"))
    assert DEAD_FACTOR == _number(r"at least ([\d.]+) times the median", _doc("dead-cells"))
    assert f"{CENTRE} × {CENTRE}" in _doc("flatfield")
    assert ", ".join(WELLS) in _doc("plate-imager")
    assert _number(r"\*\*at least (\d+) counts\*\*", _doc("positive-cells")) == 1000


def test_every_lab_doc_says_what_it_covers_and_is_listed() -> None:
    docs = sorted(LAB_DIR.glob("*.md"))
    assert len(docs) >= 8
    for path in docs:
        assert "**Covers**:" in path.read_text(encoding="utf-8"), path.name
        assert f"- lab/{path.stem}:" in LAB_SECTION


LAB_INSTRUMENT_CASES = [case for case in all_cases() if any(i.name in case.request for i in INSTRUMENTS)]


def test_every_lab_case_names_one_of_the_labs_instruments() -> None:
    lab = [case for case in all_cases() if case.category == "lab"]
    assert len(lab) >= 12 and set(lab) <= set(LAB_INSTRUMENT_CASES)
    assert sum("from our scope" in case.request for case in lab) >= 8


@pytest.mark.parametrize("case", LAB_INSTRUMENT_CASES, ids=lambda case: case.name)
def test_data_from_a_lab_instrument_obeys_its_lab_doc(case, tmp_path: Path) -> None:
    truth = case.setup(tmp_path, np.random.default_rng(0))
    acquired: list[Acquired] = truth["acquired"]
    named = {i.doc for i in INSTRUMENTS if i.name in case.request}
    assert named <= {a.instrument.doc for a in acquired}, "the request's instrument made none of its files"
    for item in acquired:
        stated = STATED[item.instrument.doc]
        image = tifffile.imread(tmp_path / item.file).astype(np.float64)
        planes = image.reshape(-1, *image.shape[-2:]) if image.ndim > 2 else image[None]
        for plane in planes:
            # the camera offset is under every pixel: nothing reads below it (less read noise),
            # and the darkest part of the field sits just above it
            assert plane.min() >= stated.offset - 60, (
                f"{item.file}: a pixel at {plane.min()} below the offset {stated.offset:g}"
            )
            if item.nuclei is not None:  # a field with objects has background (a blank slide has none)
                assert np.percentile(plane, 1) <= stated.offset + 250, f"{item.file}: the floor is far above the offset"
        px2 = stated.pixel_um**2
        low, high = stated.nucleus_um2
        if item.nuclei is not None:
            counts = np.bincount(item.nuclei.ravel())[1:]
            areas = counts[counts > 0] * px2
            assert len(areas) and low * 0.97 <= areas.min() and areas.max() <= high * 1.03, (
                f"{item.file}: nuclei of {areas.min():.1f}-{areas.max():.1f} µm², the lab's are {low:g}-{high:g}"
            )
        if item.debris is not None:
            pieces = np.bincount(item.debris.ravel())[1:]
            debris = pieces[pieces > 0] * px2
            assert len(debris) and debris.max() < stated.debris_below_um2, (
                f"{item.file}: debris up to {debris.max():.1f} µm²"
            )


def test_a_generator_that_cannot_meet_its_conditions_stops_with_its_name() -> None:
    from bench.cases._kit import redraws

    tries = []
    with pytest.raises(RuntimeError, match="_setup_x: no draw met the case's conditions in 3 tries"):
        for attempt in redraws("_setup_x", 3):
            tries.append(attempt)
    assert tries == [0, 1, 2]
