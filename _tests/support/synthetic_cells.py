"""Generated cells around their nuclei, and nuclei as ellipsoids in 3-D stacks, with their truth.

The segment-cells and segment-nuclei-3d sweeps and the bench's cells and 3-D cases draw their
images here. Each caller keeps its own numbers for a seed: what differs between them is a
parameter (the cells' radii, how far a nucleus sits off-centre, an outline's wobble, a texture or
dim share in the stack), and a parameter left at zero draws nothing from the generator, so the
other draws stay where they were.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import ndimage as ndi

__all__ = ["PIXEL_UM", "cell_edges", "cell_layout", "nuclei_stack"]

PIXEL_UM = 0.5
"""The 3-D stacks' lateral pixel (and the fine grid's step along Z), in um."""


def cell_layout(
    rng: np.random.Generator,
    n: int,
    *,
    touching: bool,
    shape: tuple[int, int],
    radius: tuple[float, float],
    nucleus_offset: float,
    wobble: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(cells, nuclei) label images, each cell carrying its nucleus's label.

    Cells are discs of a radius drawn from ``radius`` split by a size-weighted boundary (a big cell
    reaches further, so the split is not halfway between nuclei); ``touching`` packs them into a
    sheet (centres 0.8 of the radii sum apart or more), else they stay 4 px apart. ``wobble`` is the
    outline's relative amplitude. Each nucleus sits up to ``nucleus_offset`` radii off its cell's
    centre and at least 3 px inside it; a cell whose nucleus finds no such place is dropped.

    Raises:
        RuntimeError: ``n`` cells do not fit in ``shape``.
    """
    h, w = shape
    placed: list[tuple[float, float, float]] = []
    for _ in range(400_000):
        if len(placed) == n:
            break
        r = rng.uniform(*radius)
        y, x = rng.uniform(0.6 * r, h - 0.6 * r), rng.uniform(0.6 * r, w - 0.6 * r)
        if all(math.dist((y, x), (cy, cx)) >= (0.8 * (r + cr) if touching else r + cr + 4) for cy, cx, cr in placed):
            placed.append((y, x, r))
    else:
        raise RuntimeError(f"could not place {n} cells in a {h} x {w} field")
    yy, xx = np.mgrid[:h, :w].astype(float)
    best = np.full(shape, np.inf)
    owner = np.zeros(shape, np.int32)
    for i, (cy, cx, r) in enumerate(placed, start=1):
        reach = r
        if wobble:
            angle = np.arctan2(yy - cy, xx - cx)
            reach = r * (1 + wobble * np.cos(rng.integers(2, 4) * angle + rng.uniform(0, 2 * np.pi)))
        s = np.hypot(yy - cy, xx - cx) / reach
        take = (s <= 1) & (s < best)
        owner[take], best[take] = i, s[take]
    for i in range(1, len(placed) + 1):  # one piece per cell
        pieces, count = ndi.label(owner == i)
        if count > 1:
            owner[(pieces > 0) & (pieces != 1 + np.argmax(np.bincount(pieces.ravel())[1:]))] = 0
    nuclei = np.zeros(shape, np.int32)
    kept = []
    for i, (cy, cx, r) in enumerate(placed, start=1):
        inner = ndi.distance_transform_edt(owner == i)
        rn = rng.uniform(0.35, 0.45) * r
        for off in np.linspace(nucleus_offset, 0, 8):
            a = rng.uniform(0, 2 * np.pi)
            inside = (yy - cy - off * r * np.sin(a)) ** 2 + (xx - cx - off * r * np.cos(a)) ** 2 <= rn**2
            if inside.any() and inner[inside].min() >= 3:
                nuclei[inside] = i
                kept.append(i)
                break
    lut = np.zeros(len(placed) + 1, np.int32)
    lut[kept] = np.arange(1, len(kept) + 1)
    return lut[owner], lut[nuclei]


def cell_edges(cells: np.ndarray) -> np.ndarray:
    """Each cell's outermost pixels (where it meets another cell or the background)."""
    edge = np.zeros(cells.shape, bool)
    for shift in ((0, 1), (1, 0), (0, -1), (-1, 0)):
        edge |= (cells > 0) & (np.roll(cells, shift, axis=(0, 1)) != cells)
    return edge


def nuclei_stack(
    rng: np.random.Generator,
    n: int,
    z_ratio: int,
    stacked: float,
    *,
    axial_um: float = 0.8,
    gap_um: float = 1.0,
    field_px: int = 128,
    depth_um: float = 30.0,
    dim: float = 0.0,
    texture: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(stack, true volumes in um3): the light that reaches the camera, before it rounds.

    Ellipsoids are drawn on a fine isotropic grid (``PIXEL_UM``), ``stacked`` of them in pairs
    touching in Z and the others ``gap_um`` apart at least; ``dim`` of them at a third of the
    brightness, a ``texture`` of that relative amplitude inside each; blurred (``axial_um`` along
    Z, 0.25 um across), then sampled every ``z_ratio``-th plane as a microscope's Z step samples
    the specimen, over a background of 100 with noise of sigma 15.

    Raises:
        RuntimeError: the nuclei do not fit in the stack.
    """
    size = np.array([depth_um, field_px * PIXEL_UM, field_px * PIXEL_UM])
    placed: list[tuple[np.ndarray, np.ndarray]] = []  # centre, semi-axes (z, y, x), um

    def fits(c: np.ndarray, r: np.ndarray) -> bool:
        return all(np.sum(((c - c2) / (r + r2 + gap_um)) ** 2) >= 1 for c2, r2 in placed)

    pairs = round(stacked * n / 2)
    for kind in ["pair"] * pairs + ["single"] * (n - 2 * pairs):
        for _ in range(100_000):
            rxy = rng.uniform(3.5, 5.0)
            r = np.array([rxy * rng.uniform(0.75, 0.95), rxy, rxy * rng.uniform(0.85, 1.15)])
            c = rng.uniform(r + 1, size - r - 1)
            if kind == "single":
                if fits(c, r):
                    placed.append((c, r))
                    break
                continue
            r2 = r * rng.uniform(0.9, 1.1)  # a second nucleus on top, touching in Z
            c2 = c + np.array([0.92 * (r[0] + r2[0]), rng.uniform(-1, 1), rng.uniform(-1, 1)])
            if c2[0] + r2[0] <= size[0] - 1 and fits(c, r) and fits(c2, r2):
                placed += [(c, r), (c2, r2)]
                break
        else:
            raise RuntimeError(f"could not place {n} nuclei in a {field_px}-px field")
    nz = round(depth_um / PIXEL_UM)
    grid = np.ogrid[:nz, :field_px, :field_px]
    owner = np.zeros((nz, field_px, field_px), np.int32)
    best = np.full(owner.shape, np.inf)
    for i, (c, r) in enumerate(placed, start=1):
        s = sum(((grid[a] + 0.5) * PIXEL_UM - c[a]) ** 2 / r[a] ** 2 for a in range(3))
        take = (s <= 1) & (s < best)
        owner[take], best[take] = i, s[take]
    bright = np.concatenate([[0.0], rng.uniform(0.8, 1.2, len(placed))])
    if dim:
        bright[1 + rng.choice(len(placed), round(dim * len(placed)), replace=False)] /= 3
    scene = bright[owner]
    if texture:
        scene = scene * (1 + texture * ndi.gaussian_filter(rng.normal(size=owner.shape), 1.5))
    blurred = ndi.gaussian_filter(scene, (axial_um / PIXEL_UM, 0.25 / PIXEL_UM, 0.25 / PIXEL_UM))
    planes = blurred[z_ratio // 2 :: z_ratio]
    stack = 100 + 800 * planes + rng.normal(0, 15, planes.shape)
    return stack, np.array([4 / 3 * np.pi * np.prod(r) for _, r in placed])
