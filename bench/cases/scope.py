"""The lab's instruments: one model that makes every image a request says comes from one of them.

A real lab's docs describe its own files. So each instrument here holds the numbers its lab doc
states (``bench/lab/``: pixel size, camera offset, channel order, the sizes of the lab's nuclei,
the debris gate, the time-lapse interval), and the cases draw their images through it: every
pixel carries the camera offset, every nucleus is inside the lab's size range at the stated pixel
size, debris stays under the gate. A test reads the numbers back out of the lab docs and checks
the generated data against them, so the docs and the data cannot drift apart.

An instrument no lab doc covers (the new confocal, the incubator scope, the slide scanner) is
described by the request of a two-session case's first session, which states what it needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

from bench.cases._kit import disks, save_tiff, to_uint16

__all__ = [
    "CONFOCAL",
    "INCUBATOR",
    "INSTRUMENTS",
    "NUCLEAR_STAINS",
    "PLATE_IMAGER",
    "SCANNER",
    "SPINNING_DISK",
    "WIDEFIELD",
    "Acquired",
    "Instrument",
    "cells_field",
    "write_cells",
]


@dataclass(frozen=True)
class Instrument:
    """One instrument of the lab: what its files are and what its lab doc says about them."""

    name: str
    """How a request names it ("our scope")."""
    doc: str
    """The lab doc that covers it ("" when only a session-1 request describes it)."""
    pixel_um: float
    offset: float
    """Camera offset in counts: every pixel of every file carries it."""
    channels: tuple[str, ...] = ("DAPI",)
    """The stain in each channel index, in the order the files store them."""
    background: float = 60.0
    """Autofluorescence above the offset, where there is no object."""
    noise: float = 12.0
    """Read noise, counts (sd)."""
    nucleus_um2: tuple[float, float] = (40.0, 90.0)
    """Whole nuclei of the lab's lines: the smallest and largest area."""
    debris_below_um2: float = 40.0
    """The lab's debris gate: a nucleus-like object smaller than this is debris."""
    frame_minutes: float | None = None
    """Time-lapse interval, when the instrument does time-lapse."""
    flat_peak: tuple[float, float] = (0.5, 0.5)
    """Where the illumination peaks, as fractions of the field's height and width."""
    flat_depth: float = 0.45
    """How far the illumination falls from its peak to the farthest corner (fraction)."""
    flat_dip: tuple[float, float] = (0.0, 0.1)
    """A dim spot at the field's centre (the light guide's core): its depth (fraction of the
    light lost at its middle) and its Gaussian width (fraction of the field's shorter side)."""
    meta: dict[str, str] = field(default_factory=dict)

    def radius_px(self, area_um2: float) -> float:
        """The radius in pixels of a disk of ``area_um2`` at this pixel size."""
        return math.sqrt(area_um2 / self.pixel_um**2 / math.pi)

    def area_um2(self, pixels: np.ndarray | float) -> np.ndarray | float:
        return pixels * self.pixel_um**2

    @property
    def nucleus_radii(self) -> tuple[float, float]:
        """Radii in pixels of the smallest and largest whole nucleus, a little inside the range
        so that a disk's pixel count stays in it."""
        low, high = self.nucleus_um2
        return self.radius_px(low) * 1.02, self.radius_px(high) * 0.98

    def nuclei(
        self,
        shape: tuple[int, int],
        count: int,
        rng: np.random.Generator,
        *,
        gap: float = 5.0,
        margin: float | None = None,
        area_um2: tuple[float, float] | None = None,
    ) -> tuple[np.ndarray, list[tuple[float, float, float]]]:
        """Non-touching nuclei whose areas are uniform over the lab's range (or ``area_um2``)."""
        low, high = area_um2 or self.nucleus_um2
        radii = (self.radius_px(low) * 1.02, self.radius_px(high) * 0.98)
        return disks(shape, count, rng, radius=radii, gap=gap, margin=margin)

    def objects(
        self, shape: tuple[int, int], areas_um2: np.ndarray, rng: np.random.Generator, *, gap: float = 4.0
    ) -> np.ndarray:
        """Non-touching round objects of the given areas (largest placed first), labelled 1..n in
        the order of ``areas_um2``; an object that finds no room is left out (label skipped)."""
        radii = [self.radius_px(a) for a in areas_um2]
        placed: list[tuple[float, float, float, int]] = []
        for label in sorted(range(len(radii)), key=lambda i: -radii[i]):
            r = radii[label]
            for _ in range(400):
                y, x = rng.uniform(r, shape[0] - 1 - r), rng.uniform(r, shape[1] - 1 - r)
                if all((y - py) ** 2 + (x - px) ** 2 > (r + pr + gap) ** 2 for py, px, pr, _ in placed):
                    placed.append((y, x, r, label + 1))
                    break
        yy, xx = np.mgrid[: shape[0], : shape[1]]
        labels = np.zeros(shape, np.int32)
        for y, x, r, label in placed:
            labels[(yy - y) ** 2 + (xx - x) ** 2 <= r * r] = label
        return labels

    def acquire(self, signal: np.ndarray, rng: np.random.Generator, *, flat: np.ndarray | None = None) -> np.ndarray:
        """What the camera writes for ``signal`` (counts above background): illumination, offset,
        autofluorescence, read noise, rounded into uint16."""
        light = self.background + signal
        if flat is not None:
            light = light * flat
        return to_uint16(self.offset + light + rng.normal(0, self.noise, signal.shape))

    def flat(self, shape: tuple[int, int]) -> np.ndarray:
        """The instrument's illumination: 1 at its peak, falling smoothly to ``1 - flat_depth``
        in the farthest corner, times the dim spot ``flat_dip`` at the field's centre. A property
        of the light path, the same in every file."""
        yy, xx = np.mgrid[: shape[0], : shape[1]].astype(np.float64)
        cy, cx = shape[0] * self.flat_peak[0], shape[1] * self.flat_peak[1]
        r2 = (yy - cy) ** 2 + (xx - cx) ** 2
        depth, width = self.flat_dip
        sigma = width * min(shape)
        centre2 = (yy - (shape[0] - 1) / 2) ** 2 + (xx - (shape[1] - 1) / 2) ** 2
        return (1 - self.flat_depth * r2 / r2.max()) * (1 - depth * np.exp(-centre2 / (2 * sigma**2)))


WIDEFIELD = Instrument(
    name="our scope",
    doc="lab/microscope",
    pixel_um=0.26,
    offset=500.0,
    channels=("DAPI", "mCherry", "GFP"),
    frame_minutes=2.0,
    flat_peak=(0.3, 0.25),
    flat_depth=0.5,
    flat_dip=(0.25, 0.094),
)
"""The lab's widefield (Ti2, 25x silicone objective, 6.5 µm camera pixels): "our scope"."""

SPINNING_DISK = Instrument(
    name="our spinning disk",
    doc="lab/spinning-disk",
    pixel_um=0.1625,
    offset=100.0,
    channels=("GFP", "mCherry", "DAPI"),
    background=40.0,
    noise=8.0,
)
"""The spinning disk (40x, 6.5 µm camera pixels), channels in the order the lasers fire."""

PLATE_IMAGER = Instrument(
    name="our plate imager",
    doc="lab/plate-imager",
    pixel_um=0.65,
    offset=100.0,
    background=50.0,
    noise=10.0,
)
"""The plate imager (10x, 6.5 µm camera pixels), DAPI only for counts."""

INSTRUMENTS = (WIDEFIELD, SPINNING_DISK, PLATE_IMAGER)
"""The instruments a lab doc covers."""

CONFOCAL = Instrument(
    name="the new confocal",
    doc="",
    pixel_um=0.2,
    offset=0.0,
    channels=("mCherry", "Cy5", "GFP", "Hoechst"),
    background=30.0,
    noise=6.0,
)
"""The new confocal: four channels in its software's order, which is not the wavelengths'."""

INCUBATOR = Instrument(
    name="our incubator scope", doc="", pixel_um=0.65, offset=100.0, background=200.0, noise=10.0, frame_minutes=0.5
)
"""The incubator scope: live imaging, one frame every 30 s (its files do not record it)."""

SCANNER = Instrument(name="the slide scanner", doc="", pixel_um=0.442, offset=0.0, background=20.0, noise=4.0)
"""The slide scanner at its 20x scan; its files carry no pixel size."""

NUCLEAR_STAINS = ("DAPI", "Hoechst")
"""Stains that fill the nucleus; every other stain fills the whole cell."""


@dataclass(frozen=True)
class Acquired:
    """One input file an instrument made, with the objects in it: what the lab-tier test checks
    against the lab docs (offset in the pixels, nuclei in the size range, debris under the gate)."""

    file: str
    instrument: Instrument
    nuclei: np.ndarray | None = None
    """Labels of whole nuclei (a nucleus cut by the border is left out of the size check)."""
    debris: np.ndarray | None = None


def cells_field(
    instrument: Instrument,
    shape: tuple[int, int],
    count: int,
    rng: np.random.Generator,
    levels: dict[str, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Round cells with a nucleus in the middle: (cell labels, nucleus labels, per-cell level of
    each stain above background). A nuclear stain fills the nucleus, every other stain the cell.

    ``levels`` gives some stains' per-cell levels (index 0 = cell 1); the rest are drawn alike for
    every cytoplasmic stain (log-uniform 150-2500), so no statistic tells one dye from another.
    """
    low, high = instrument.nucleus_radii
    cells, placed = disks(shape, count, rng, radius=(1.6 * low, 1.6 * high), gap=4)
    n = int(cells.max())
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    nuclei = np.zeros(shape, np.int32)
    for i, (y, x, r) in enumerate(placed, start=1):
        nuclei[(yy - y) ** 2 + (xx - x) ** 2 <= (r / 1.6) ** 2] = i
    drawn = dict(levels or {})
    for stain in instrument.channels:
        if stain not in drawn:
            drawn[stain] = (
                rng.uniform(900, 1500, n)
                if stain in NUCLEAR_STAINS
                else np.exp(rng.uniform(np.log(150), np.log(2500), n))
            )
    return cells, nuclei, drawn


def write_cells(
    instrument: Instrument,
    workdir: Path,
    name: str,
    cells: np.ndarray,
    nuclei: np.ndarray,
    levels: dict[str, np.ndarray],
    rng: np.random.Generator,
) -> np.ndarray:
    """Write the instrument's multichannel file of a cells field (axes CYX, channels in the
    instrument's order) and the cell labels; return the image as written."""
    channels = []
    for stain in instrument.channels:
        table = np.concatenate([[0.0], levels[stain]])
        signal = table[nuclei] if stain in NUCLEAR_STAINS else table[cells]
        channels.append(instrument.acquire(ndi.gaussian_filter(signal, 1.0), rng))
    image = np.stack(channels)
    save_tiff(workdir / name, image, axes="CYX")
    return image
