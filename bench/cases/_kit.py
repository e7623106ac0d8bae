"""Shared pieces for cases: synthetic images with known truth, and strict artifact readers.

Generators are deterministic given the ``rng`` and small (≤ 512×512) so a case sets up in well
under a second. Readers raise :class:`CheckFailed` with a message an agent author can act on.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import tifffile
from scipy import ndimage as ndi

from bench.cases import CheckFailed

__all__ = [
    "best_shift_ncc",
    "disks",
    "find_artifact",
    "load_tiff",
    "match_points",
    "ncc",
    "per_label",
    "read_csv",
    "read_number",
    "redraws",
    "save_tiff",
    "smooth_texture",
    "to_uint16",
]


REDRAWS = 500
"""Draws a case generator may take to meet its conditions; the ones here need at most about 20."""


def redraws(what: str, limit: int = REDRAWS) -> Iterator[int]:
    """The attempts of a generator that redraws until its data meets the case's conditions (a
    guess that must miss, a gap at a cutoff): bounded, so a change that makes them unmeetable
    stops with its name instead of hanging the bench."""
    yield from range(limit)
    raise RuntimeError(f"{what}: no draw met the case's conditions in {limit} tries")


def save_tiff(path: Path, data: np.ndarray, axes: str | None = None) -> None:
    """Write an input image; ``axes`` (e.g. "ZCYX") goes into ImageJ-style metadata."""
    if axes is None:
        tifffile.imwrite(path, data)
    else:
        tifffile.imwrite(path, data, imagej=True, metadata={"axes": axes})


def to_uint16(image: np.ndarray) -> np.ndarray:
    """Round and clip a float image into uint16, as a camera would."""
    return np.clip(np.rint(image), 0, 65535).astype(np.uint16)


def disks(
    shape: tuple[int, int],
    count: int,
    rng: np.random.Generator,
    radius: tuple[float, float] = (6.0, 10.0),
    gap: float = 4.0,
    margin: float | None = None,
) -> tuple[np.ndarray, list[tuple[float, float, float]]]:
    """Place up to ``count`` non-touching disks; return their labels (1..n) and (y, x, r).

    ``margin`` is how far a centre must stay from the edge (default: the radius, so no disk is
    cut); a negative margin lets disks cross the border.
    """
    placed: list[tuple[float, float, float]] = []
    for _ in range(count * 200):
        if len(placed) == count:
            break
        r = rng.uniform(*radius)
        m = r if margin is None else margin
        y = rng.uniform(m, shape[0] - 1 - m)
        x = rng.uniform(m, shape[1] - 1 - m)
        if all((y - py) ** 2 + (x - px) ** 2 > (r + pr + gap) ** 2 for py, px, pr in placed):
            placed.append((y, x, r))
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    labels = np.zeros(shape, np.int32)
    for i, (y, x, r) in enumerate(placed, start=1):
        labels[(yy - y) ** 2 + (xx - x) ** 2 <= r * r] = i
    return labels, placed


def smooth_texture(shape: tuple[int, ...], rng: np.random.Generator, sigma: float = 4.0) -> np.ndarray:
    """Blurred noise scaled to 0..1: structure that registration and stitching can lock onto."""
    texture = ndi.gaussian_filter(rng.standard_normal(shape), sigma)
    texture -= texture.min()
    return texture / texture.max()


def find_artifact(path: Path) -> Path:
    """``path`` itself, else the newest file of that name in a subfolder of its work dir.

    The server's guardrails tell the agent to write outputs to a results folder beside the data,
    so an artifact in ``results/`` (or any subfolder) counts as delivered.
    """
    if path.is_file():
        return path
    found = [candidate for candidate in path.parent.rglob(path.name) if candidate.is_file()]
    if not found:
        raise CheckFailed(f"missing {path.name} (looked in the work dir and its subfolders)")
    return max(found, key=lambda candidate: candidate.stat().st_mtime_ns)


def load_tiff(path: Path, *, ndim: int | None = None, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Read an artifact TIFF, squeezing singleton axes; fail on absence or wrong shape."""
    path = find_artifact(path)
    try:
        data = np.squeeze(tifffile.imread(path))
    except Exception as exc:  # any unreadable file is the agent's failure, whatever the reason
        raise CheckFailed(f"{path.name} is not a readable TIFF: {exc}") from None
    if ndim is not None and data.ndim != ndim:
        raise CheckFailed(f"{path.name} has {data.ndim} dimensions {data.shape}, expected {ndim}")
    if shape is not None and data.shape != shape:
        raise CheckFailed(f"{path.name} has shape {data.shape}, expected {shape}")
    return data


def read_csv(path: Path, columns: tuple[str, ...]) -> list[dict[str, float]]:
    """Read a CSV artifact: header names compared case- and space-insensitively; values as floats."""
    path = find_artifact(path)
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        raise CheckFailed(f"{path.name} is empty")
    header = [name.strip().lower() for name in rows[0]]
    missing = [name for name in columns if name not in header]
    if missing:
        raise CheckFailed(f"{path.name} lacks column(s) {', '.join(missing)}; header is {rows[0]}")
    index = [header.index(name) for name in columns]
    table: list[dict[str, float]] = []
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        try:
            table.append({name: float(row[i]) for name, i in zip(columns, index, strict=True)})
        except (ValueError, IndexError):
            raise CheckFailed(f"{path.name} line {number} is not numeric in {columns}: {row}") from None
    return table


def per_label(path: Path, column: str, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A per-label CSV artifact's ``column`` beside the truth (``truth[0]`` is label 1), over the
    labels both have; fails when the table covers under 90 % of the truth's labels."""
    rows = read_csv(path, ("label", column))
    got = {int(row["label"]): row[column] for row in rows}
    common = [label for label in range(1, len(truth) + 1) if label in got]
    if len(common) < 0.9 * len(truth):
        raise CheckFailed(f"{find_artifact(path).name} has {len(common)} of the {len(truth)} labels")
    return np.array([got[label] for label in common]), np.array([truth[label - 1] for label in common])


def read_number(path: Path) -> float:
    """Read a text artifact holding one number."""
    path = find_artifact(path)
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        raise CheckFailed(f"{path.name} does not start with a number: {text[:60]!r}") from None


def ncc(a: np.ndarray, b: np.ndarray) -> float:
    """Normalised cross-correlation of two equally shaped arrays (1 = identical up to gain/offset)."""
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    a = a - a.mean()
    b = b - b.mean()
    denominator = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / denominator) if denominator > 0 else 0.0


def best_shift_ncc(
    image: np.ndarray, truth: np.ndarray, max_shift: int = 3, mask: np.ndarray | None = None
) -> tuple[float, tuple[int, int]]:
    """Best NCC of ``image`` against ``truth`` over small translations of their top-left corners,
    counting only pixels where ``mask`` (aligned with ``truth``) is true."""
    if mask is None:
        mask = np.ones(truth.shape, bool)
    best, where = -1.0, (0, 0)
    for dy in range(-max_shift, max_shift + 1):
        for dx in range(-max_shift, max_shift + 1):
            a = image[max(dy, 0) :, max(dx, 0) :]
            b = truth[max(-dy, 0) :, max(-dx, 0) :]
            m = mask[max(-dy, 0) :, max(-dx, 0) :]
            h, w = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
            if h < 16 or w < 16:
                continue
            keep = m[:h, :w]
            score = ncc(a[:h, :w][keep], b[:h, :w][keep])
            if score > best:
                best, where = score, (dy, dx)
    return best, where


def match_points(found: np.ndarray, truth: np.ndarray, radius: float) -> int:
    """How many truth points have a distinct found point within ``radius`` (greedy, nearest first)."""
    if len(found) == 0 or len(truth) == 0:
        return 0
    distance = np.sqrt(((found[:, None, :] - truth[None, :, :]) ** 2).sum(-1))
    pairs = np.argwhere(distance <= radius)
    order = np.argsort(distance[pairs[:, 0], pairs[:, 1]])
    used_found: set[int] = set()
    used_truth: set[int] = set()
    for i, j in pairs[order]:
        if i not in used_found and j not in used_truth:
            used_found.add(int(i))
            used_truth.add(int(j))
    return len(used_truth)


def threshold_counts(values: np.ndarray) -> dict[str, int]:
    """How many ``values`` (per-object means) lie above each per-image threshold a capable agent
    might try instead of a fixed cutoff: Otsu, Li, Yen, triangle, the mean and twice the median.
    The generators of fixed-cutoff cases redraw until each of these misses the lab's count."""
    from skimage.filters import threshold_li, threshold_mean, threshold_otsu, threshold_triangle, threshold_yen

    values = np.asarray(values, dtype=np.float64)
    rules: dict[str, Callable[[np.ndarray], float]] = {
        "otsu": threshold_otsu,
        "li": threshold_li,
        "yen": threshold_yen,
        "triangle": threshold_triangle,
        "mean": threshold_mean,
    }
    counts = {name: int(np.sum(values > rule(values))) for name, rule in rules.items()}
    counts["2x median"] = int(np.sum(values > 2 * np.median(values)))
    return counts
