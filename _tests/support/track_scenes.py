"""Moving blobs with known tracks, for the track-objects procedure's sweep and its bench cases.

Objects move in a world larger than the field of view (so they enter and leave it), each at its
own speed along a direction that turns a little every frame; some are not drawn for 1-2 frames (a
missed detection), some pairs are sent through the same point at the same frame (a crossing).
The truth is every object's centre in every frame where it lies in the field, and the links
between its consecutive appearances (across a gap too); the scorers compare a track table with
it, and a naive linker (nearest neighbour, frame to frame, no gap closing) gives the baseline.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial import cKDTree


@dataclass(frozen=True)
class Scene:
    """What to generate: `speed` is the fastest object's step per frame as a fraction of the
    typical nearest-neighbour spacing (the others draw from 0.3-1 times it)."""

    seed: int
    n: int  # objects in the field at a time (about)
    shape: tuple[int, int] = (192, 192)
    frames: int = 20
    speed: float = 0.3
    gaps: float = 0.0  # share of objects missing for 1 or 2 frames once
    crossings: int = 0  # pairs sent through one point at one frame
    diameter: float = 8.0
    noise: float = 10.0  # camera noise sd (objects ~ 400 above a background of 100)
    clearance: float = 1.1  # closest approach of two objects (but a crossing pair), in diameters


@dataclass
class Truth:
    """Centres per object per frame (NaN where not in the field or not drawn) and the links."""

    centres: np.ndarray  # (objects, frames, 2), NaN where the object is not seen
    spacing: float  # median nearest-neighbour distance of the seen objects, px
    links: set[tuple[int, int, int]] = field(default_factory=set)  # (object, t, next t)
    gap_links: int = 0
    crossing_pairs: list[tuple[int, int, int]] = field(default_factory=list)  # (a, b, frame)
    # (object, t, next t) between consecutive appearances in the field however far apart: a crossing
    # pair is one blob for up to 3 frames, too long a gap for a link but time the pair spends moving
    spans: set[tuple[int, int, int]] = field(default_factory=set)

    def mean_speed(self) -> float:
        """Path length over time, px per frame, over every stretch an object spends in the field (a
        gap as its chord). Over the links alone it would leave out the frames where a crossing pair
        is one blob, which are the fastest objects' frames: 4-5 % low on a slow movie."""
        total, frames = 0.0, 0
        for i, t0, t1 in self.spans or self.links:
            total += float(np.hypot(*(self.centres[i, t1] - self.centres[i, t0])))
            frames += t1 - t0
        return total / max(frames, 1)


def _expected_spacing(n: int, shape: tuple[int, int]) -> float:
    """Mean nearest-neighbour distance of n random points in the field (0.5 / sqrt(density))."""
    return 0.5 * math.sqrt(shape[0] * shape[1] / n)


def generate(scene: Scene, seen_in: str = "labels") -> tuple[np.ndarray, np.ndarray, Truth]:
    """(movie float (T, Y, X), labels int32 (T, Y, X), truth) for one scene.

    An object is seen where it is drawn and, in the label image, not hidden under another; in the
    movie (`seen_in="movie"`), not touching another (two discs closer than a diameter are one
    blob there, and a link through it is a gap).
    """
    rng = np.random.default_rng(scene.seed)
    h, w = scene.shape
    vmax = scene.speed * _expected_spacing(scene.n, scene.shape)
    margin = vmax * scene.frames + scene.diameter  # a world wide enough that the density holds
    area_world = (h + 2 * margin) * (w + 2 * margin)
    count = max(scene.n, round(scene.n * area_world / (h * w)))
    sep = (scene.clearance + 0.1) * scene.diameter
    starts: list[tuple[float, float]] = []
    for _ in range(200_000):
        p = (rng.uniform(-margin, h + margin), rng.uniform(-margin, w + margin))
        if all(math.dist(p, q) >= sep for q in starts[-400:]):
            starts.append(p)
            if len(starts) == count:
                break
    # crossings: pairs sent along straight lines through one point in the field's middle at one frame
    n_cross = min(scene.crossings, len(starts) // 2)
    forced: dict[int, np.ndarray] = {}
    crossing_pairs: list[tuple[int, int, int]] = []
    frames = np.arange(scene.frames)
    meets: list[np.ndarray] = []
    for k in range(n_cross):
        at = int(rng.integers(scene.frames // 3, 2 * scene.frames // 3))
        for _ in range(1000):  # meeting points apart, so that each crossing involves two objects only
            meet = rng.uniform(0.25, 0.75, 2) * (h, w)
            if all(math.dist(meet, m) >= 4 * scene.diameter + 2 * vmax for m in meets):
                break
        meets.append(meet)
        theta = rng.uniform(0, 2 * np.pi)
        # at 90-180 degrees, each at least half a diameter a frame: the two overlap for a frame or two
        # (a gap to close); a shallow crossing at a crawl overlaps for many frames, beyond any gap closing
        for member, angle in ((2 * k, theta), (2 * k + 1, theta + rng.uniform(np.pi / 2, np.pi))):
            pace = max(rng.uniform(0.8, 1.0) * vmax, scene.diameter / 2)
            step = pace * np.array([np.sin(angle), np.cos(angle)])
            forced[member] = meet + (frames - at)[:, None] * step
        crossing_pairs.append((2 * k, 2 * k + 1, at))
    # the others move on, turning slowly; a step that would make two objects overlap is turned
    # elsewhere (cells do not pass through each other): only the designed crossings overlap
    centres = np.zeros((len(starts), scene.frames, 2))
    speed = rng.uniform(0.3, 1.0, len(starts)) * vmax
    heading = rng.uniform(0, 2 * np.pi, len(starts))
    free = np.array([i not in forced for i in range(len(starts))])
    pos = np.array(starts, dtype=np.float64)
    for t in range(scene.frames):
        for i, path in forced.items():
            pos[i] = path[t]
        centres[:, t] = pos
        heading += rng.normal(0, 0.25, len(starts))
        proposed = pos + speed[:, None] * np.column_stack([np.sin(heading), np.cos(heading)])
        for i, path in forced.items():
            proposed[i] = path[min(t + 1, scene.frames - 1)]
        for _ in range(20):
            pairs = cKDTree(proposed).query_pairs(scene.diameter * scene.clearance, output_type="ndarray")
            clash = np.zeros(len(starts), bool)
            clash[pairs.ravel()] = True
            clash &= free
            if not clash.any():
                break
            heading[clash] = rng.uniform(0, 2 * np.pi, clash.sum())
            proposed[clash] = pos[clash] + speed[clash, None] * np.column_stack(
                [np.sin(heading[clash]), np.cos(heading[clash])]
            )
        else:
            proposed[clash] = pos[clash]  # boxed in: it waits a frame
        pos = proposed
    inside = (centres[..., 0] >= 0) & (centres[..., 0] <= h - 1) & (centres[..., 1] >= 0) & (centres[..., 1] <= w - 1)
    # a crossing pair meets only each other: an object its paths run into (a slow one cannot get out
    # of the way) is left out of the scene
    for i in forced:
        near = np.hypot(*(centres - centres[i][None]).transpose(2, 0, 1)).min(axis=1) < scene.diameter * scene.clearance
        inside[near & free] = False
    drawn = inside.copy()
    gap_objects = rng.choice(len(starts), round(scene.gaps * len(starts)), replace=False)
    for i in gap_objects:
        in_field = np.flatnonzero(inside[i])
        if len(in_field) >= 5:
            length = int(rng.integers(1, 3))
            t0 = int(rng.integers(in_field[1], in_field[-1] - length))
            drawn[i, t0 : t0 + length] = False
    movie = np.full((scene.frames, h, w), 100.0)
    labels = np.zeros((scene.frames, h, w), np.int32)
    r = scene.diameter / 2
    yy, xx = np.mgrid[-int(r) - 3 : int(r) + 4, -int(r) - 3 : int(r) + 4]
    brightness = rng.uniform(300, 500, len(starts))
    for t in range(scene.frames):
        for obj in np.flatnonzero(drawn[:, t]):
            cy, cx = centres[obj, t]
            iy, ix = round(float(cy)), round(float(cx))
            dist = np.hypot(yy + iy - cy, xx + ix - cx)
            blob = np.clip(r + 0.5 - dist, 0, 1)  # a disc with an anti-aliased edge
            ys, xs = yy + iy, xx + ix
            ok = (ys >= 0) & (ys < h) & (xs >= 0) & (xs < w)
            movie[t, ys[ok], xs[ok]] += brightness[obj] * blob[ok]
            labels[t, ys[ok][blob[ok] >= 0.5], xs[ok][blob[ok] >= 0.5]] = obj + 1
    movie += rng.normal(0, scene.noise, movie.shape)
    # an object hidden under another in the label image (a crossing) is not seen there either
    seen = drawn.copy()
    for t in range(scene.frames):
        present = set(np.unique(labels[t]).tolist())
        for obj in np.flatnonzero(drawn[:, t]):
            if obj + 1 not in present:
                seen[obj, t] = False
    if seen_in == "movie":
        for t in range(scene.frames):
            idx = np.flatnonzero(drawn[:, t])
            pairs = cKDTree(centres[idx, t]).query_pairs(scene.diameter, output_type="ndarray")
            seen[idx[pairs.ravel()], t] = False
    truth_centres = np.where(seen[..., None], centres, np.nan)
    links: set[tuple[int, int, int]] = set()
    spans: set[tuple[int, int, int]] = set()
    gap_links = 0
    for i in range(len(starts)):
        ts = np.flatnonzero(seen[i])
        for first, then in itertools.pairwise(ts.tolist()):
            if inside[i, first : then + 1].all():  # a gap in the field, not a leave and return
                spans.add((i, first, then))
                if then - first <= 3:
                    links.add((i, first, then))
                    gap_links += then - first > 1
    spacings = []
    for t in range(scene.frames):
        pts = centres[seen[:, t], t]
        if len(pts) > 1:
            spacings.append(float(np.median(cKDTree(pts).query(pts, k=2)[0][:, 1])))
    truth = Truth(truth_centres, float(np.median(spacings)), links, gap_links, crossing_pairs, spans)
    return movie, labels, truth


def assign(truth: Truth, t: np.ndarray, y: np.ndarray, x: np.ndarray, radius: float) -> np.ndarray:
    """The true object each detection is (-1: none within `radius`), one detection per object."""
    owner = np.full(len(t), -1)
    for frame in np.unique(t):
        rows = np.flatnonzero(t == frame)
        seen = np.flatnonzero(~np.isnan(truth.centres[:, int(frame), 0]))
        if not len(seen):
            continue
        dist, k = cKDTree(truth.centres[seen, int(frame)]).query(np.column_stack([y[rows], x[rows]]))
        taken: set[int] = set()
        for n in np.argsort(dist):  # the closest claim first: one detection per object
            j = int(seen[k[n]])
            if dist[n] <= radius and j not in taken:
                owner[rows[n]] = j
                taken.add(j)
    return owner


def link_recall(
    truth: Truth, track_id: np.ndarray, t: np.ndarray, y: np.ndarray, x: np.ndarray, radius: float
) -> float:
    """Share of the true links found: an object's two appearances in one track, with no other
    object's detection between them (a detection that is no object's, a merged blob, may be)."""
    owner = assign(truth, t, y, x, radius)
    found: set[tuple[int, int, int]] = set()
    keep = owner >= 0
    tid, tt, own = track_id[keep], t[keep], owner[keep]
    order = np.lexsort((tt, tid))
    for a, b in itertools.pairwise(order):
        if tid[a] == tid[b] and own[a] == own[b]:
            found.add((int(own[a]), int(tt[a]), int(tt[b])))
    return len(found & truth.links) / max(len(truth.links), 1)


def track_speed(track_id: np.ndarray, t: np.ndarray, y: np.ndarray, x: np.ndarray) -> float:
    """Path length over time of a track table, px per frame (as Truth.mean_speed)."""
    order = np.lexsort((t, track_id))
    same = track_id[order][1:] == track_id[order][:-1]
    steps = np.hypot(np.diff(y[order]), np.diff(x[order]))[same]
    frames = np.diff(t[order])[same]
    return float(steps.sum() / max(frames.sum(), 1))


def naive_tracks(t: np.ndarray, y: np.ndarray, x: np.ndarray, cutoff: float) -> np.ndarray:
    """Track ids from nearest-neighbour linking frame to frame (closest pairs first, one to one,
    no gap closing): what one writes without a tracking library."""
    track_id = np.arange(len(t))
    frames = np.unique(t)
    for f0, f1 in itertools.pairwise(frames):
        a, b = np.flatnonzero(t == f0), np.flatnonzero(t == f1)
        if f1 != f0 + 1 or not len(a) or not len(b):
            continue
        d = np.hypot(y[a][:, None] - y[b][None], x[a][:, None] - x[b][None])
        used_a: set[int] = set()
        used_b: set[int] = set()
        for flat in np.argsort(d, axis=None):
            i, j = np.unravel_index(flat, d.shape)
            if d[i, j] > cutoff:
                break
            if i not in used_a and j not in used_b:
                used_a.add(int(i))
                used_b.add(int(j))
                track_id[b[j]] = track_id[a[i]]
    return track_id
