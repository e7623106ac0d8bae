"""The synthetic large image: discs of a known size on a grid over noise, so the true object count,
area and intensity are known, and the in-memory method the out-of-core result is compared with.

Shared by the large-image test (at a size CI runs) and ``python -m bench ooc`` (at sizes larger
than the workers' memory).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

PATCH = 4096
SPACING, DIAMETER = 64, 12
"""Discs of 12 px centred on every multiple of 64 px: rows and columns of them lie on every
chunk border the procedure can choose (chunks are powers of two of at least 256 px)."""


def synthetic_patch(seed: int = 7, spacing: int = SPACING, contrast: float = 100.0, side: int = PATCH) -> np.ndarray:
    """One tile of the synthetic image: uint8 noise around 20 (sigma 3), discs of ``DIAMETER`` px
    ``contrast`` above it centred on every multiple of ``spacing`` (which must divide ``side``)."""
    if side % spacing:
        raise ValueError(f"spacing {spacing} must divide the tile side {side}")
    rng = np.random.default_rng(seed)
    patch = rng.normal(20, 3, (side, side)).astype(np.float32)
    patch[disc_mask((side, side), spacing)] += contrast
    return np.clip(patch, 0, 255).astype(np.uint8)


def disc_mask(shape: tuple[int, int], spacing: int = SPACING) -> np.ndarray:
    """Where the drawn discs are (the generated truth the areas and intensities are checked on)."""
    yy, xx = np.ogrid[: shape[0], : shape[1]]
    dy = (yy + spacing // 2) % spacing - spacing // 2
    dx = (xx + spacing // 2) % spacing - spacing // 2
    return np.asarray(dy**2 + dx**2 <= (DIAMETER / 2) ** 2)


DISC_AREA = int(np.count_nonzero(disc_mask((SPACING, SPACING))))
"""Pixels in one drawn disc (113 for a 12-px diameter; one period of the grid holds exactly one):
what the objects' areas are checked against."""


def expected_objects(shape: tuple[int, int], spacing: int = SPACING) -> int:
    """Discs in an image of ``shape`` (the far edges hold a half row and column of them)."""
    return (shape[0] // spacing + 1) * (shape[1] // spacing + 1)


def synthetic_region(patch: np.ndarray, rows: slice, cols: slice) -> np.ndarray:
    """A region of the synthetic image (the patch repeated) without building the whole image."""
    ys = np.arange(rows.start, rows.stop) % patch.shape[0]
    xs = np.arange(cols.start, cols.stop) % patch.shape[1]
    return patch[np.ix_(ys, xs)]


def write_synthetic_tiff(path: Path, side_px: int, patch: np.ndarray, tile: int = 1024) -> None:
    """A ``side_px`` square uint8 tiled TIFF, written tile by tile (never whole in memory)."""
    import tifffile

    if side_px % tile:
        raise ValueError(f"side_px must be a multiple of {tile}, got {side_px}")

    def tiles() -> Iterator[np.ndarray]:
        for y in range(0, side_px, tile):
            for x in range(0, side_px, tile):
                yield synthetic_region(patch, slice(y, y + tile), slice(x, x + tile))

    tifffile.imwrite(path, tiles(), shape=(side_px, side_px), dtype=np.uint8, tile=(tile, tile))


def in_memory(region: np.ndarray, sigma: float, threshold: float) -> np.ndarray:
    """The in-memory method's labels: the same smoothing, threshold and labelling on one array."""
    from scipy import ndimage as ndi

    smoothed = ndi.gaussian_filter(region.astype(np.float32), sigma)
    labels, _ = ndi.label(smoothed > threshold)
    return labels


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Two label images mark the same objects (same foreground, one-to-one label mapping)."""
    if not np.array_equal(a > 0, b > 0):
        return False
    pairs = np.unique(np.stack([a[a > 0], b[b > 0]]), axis=1)
    return len(pairs[0]) == len(np.unique(pairs[0])) == len(np.unique(pairs[1]))
