"""Values derived from files, kept while the files' stats say they are unchanged.

A file's stamp is its (inode, mtime_ns, size). A stamp taken within `RACY_NS` of its file's last
change cannot be trusted to show the next change: coarse mtime clocks (a few ms here, 1–2 s on
some filesystems) let a second same-size edit keep the same stamp. Like git's "racily clean"
entries, a value derived from a file that recent is never cached: it is recomputed until the
file is older. This is the one place that rule is written; every cache over doc files uses it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

__all__ = ["RACY_NS", "FileCache", "Stamp", "is_settled", "settled_stamps", "stamp", "stamp_of", "stamps"]

RACY_NS = 2_000_000_000
"""A file changed this recently (ns) may change again without its stamp changing."""

Stamp = tuple[int, int, int]
"""(inode, mtime_ns, size) of a file: what a cached value is validated against."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def stamp_of(st: os.stat_result) -> Stamp:
    """The stamp of a stat the caller already has."""
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def stamp(path: str | os.PathLike[str]) -> Stamp | None:
    """The stamp of `path` (links followed), or None when it cannot be stat'ed (gone, unreadable)."""
    try:
        return stamp_of(os.stat(path))
    except OSError:
        return None


def stamps(paths: Iterable[str]) -> tuple[Stamp | None, ...]:
    """Stamps of several paths, for a value derived from all of them (a listing of directories)."""
    return tuple(stamp(path) for path in paths)


def settled_stamps(paths: Iterable[str], now_ns: int) -> tuple[Stamp | None, ...] | None:
    """`stamps` of `paths` when every one is settled at `now_ns`; None at the first racy one,
    the rest not stat'ed: a value derived from them then cannot be kept, so its caller derives
    it afresh and needs no more stamps."""
    found = []
    for path in paths:
        st = stamp(path)
        if not is_settled(st, now_ns):
            return None
        found.append(st)
    return tuple(found)


def is_settled(st: Stamp | None, now_ns: int | None = None) -> bool:
    """Whether `st` is old enough at `now_ns` to be trusted as unchanged while it stays equal.

    A missing file (None) is settled: its appearance changes the stamp. Pass as `now_ns` the
    time taken *before* the file was read, so a change landing during the read is never trusted.
    """
    if st is None:
        return True
    return st[1] < (time.time_ns() if now_ns is None else now_ns) - RACY_NS


class FileCache(Generic[K, V]):
    """key -> value, each kept with the stamps it was derived from and returned only while they hold.

    The cache saves work and never decides an answer: a caller stamps the files now, asks for
    the value at those stamps, and on a miss computes it and offers it back with the stamps and
    the time taken before the files were read; values derived from racy stamps are dropped.
    Thread-safe; at most `max_entries` values and, when `weigh` is given, at most `max_weight`
    of their summed weights (bytes, say), the oldest dropped first.
    """

    def __init__(
        self, max_entries: int = 50_000, *, max_weight: int | None = None, weigh: Callable[[V], int] | None = None
    ) -> None:
        self.max_entries = max_entries
        self.max_weight = max_weight
        self._weigh = weigh
        self._data: dict[K, tuple[tuple[Stamp | None, ...], V, int]] = {}
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: K, stamps: tuple[Stamp | None, ...]) -> V | None:
        """The value cached for `key` if it was derived from exactly `stamps`, else None."""
        with self._lock:
            hit = self._data.get(key)
        if hit is not None and hit[0] == stamps:
            return hit[1]
        return None

    def put(self, key: K, stamps: tuple[Stamp | None, ...], value: V, now_ns: int) -> bool:
        """Keep `value` for `key` unless any of `stamps` is racy at `now_ns`, or it alone
        outweighs the bound; True when kept."""
        weight = self._weigh(value) if self._weigh is not None else 0
        keep = all(is_settled(st, now_ns) for st in stamps)
        keep = keep and (self.max_weight is None or weight <= self.max_weight)
        with self._lock:
            self._drop(key)
            if not keep:
                return False
            self._data[key] = (stamps, value, weight)
            self._weight += weight
            while len(self._data) > self.max_entries or (
                self.max_weight is not None and self._weight > self.max_weight
            ):
                self._drop(next(iter(self._data)))
        return True

    def _drop(self, key: K) -> None:
        gone = self._data.pop(key, None)
        if gone is not None:
            self._weight -= gone[2]

    @property
    def weight(self) -> int:
        """The summed weight of the values kept."""
        with self._lock:
            return self._weight

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)
