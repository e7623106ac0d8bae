"""The one change feed over the docs folders: which files changed since a reader last asked.

Search needs it before every query (to re-read only what changed) and resource subscriptions
need it to announce hand edits; both read the same inotify watch (``biopb_mcp.fs.watch``) through
a cursor of their own, so one event reaches each reader once and no reader walks the tier to
find out that nothing happened. Where inotify is missing or refused, a cursor says so
(``WatchUnavailable`` from :meth:`Cursor.watch`, an incomplete :class:`Changes` from
:meth:`Cursor.take`) and its reader compares stats instead.
"""

from __future__ import annotations

import threading

from biopb_mcp.fs.watch import Changes, DirWatch, WatchUnavailable

__all__ = ["ChangeFeed", "Cursor"]


def _merge(into: Changes, more: Changes) -> None:
    into.paths |= more.paths
    into.created |= more.created
    into.removed |= more.removed
    into.folders |= more.folders
    into.complete = into.complete and more.complete


class Cursor:
    """One reader's place in the feed: the changes queued for it since its last :meth:`take`."""

    def __init__(self, feed: ChangeFeed) -> None:
        self._feed = feed
        self.folders: frozenset[str] = frozenset()
        self.pending = Changes()

    def watch(self, folders: list[str]) -> bool:
        """Follow exactly ``folders`` from now on; True when one of them is new to this reader (what
        happened there before now was not seen) or could not be watched.

        Raises:
            WatchUnavailable: this system cannot watch folders: compare stats instead.
        """
        return self._feed._watch(self, frozenset(folders))

    def take(self) -> Changes:
        """What changed in the followed folders since the last call (incomplete when unknown)."""
        return self._feed._take(self)

    def close(self) -> None:
        """Stop following; the feed's watch shrinks to what other readers follow."""
        self._feed._release(self)


class ChangeFeed:
    """An inotify watch over the union of the folders its cursors follow. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dirwatch: DirWatch | None = None
        self._cursors: list[Cursor] = []
        self._unavailable: WatchUnavailable | None = None

    @property
    def readers(self) -> int:
        """How many readers follow the feed (one inotify watch serves them all)."""
        with self._lock:
            return len(self._cursors)

    def cursor(self) -> Cursor:
        cursor = Cursor(self)
        with self._lock:
            self._cursors.append(cursor)
        return cursor

    def _watch(self, cursor: Cursor, folders: frozenset[str]) -> bool:
        with self._lock:
            if self._unavailable is not None:
                raise self._unavailable
            try:
                if self._dirwatch is None:
                    self._dirwatch = DirWatch()
                self._pump()  # events queued so far belong to the old folder sets
                new_to_reader = bool(folders - cursor.folders)
                cursor.folders = folders
                added = self._dirwatch.watch(sorted(set().union(*(c.folders for c in self._cursors))))
            except WatchUnavailable as exc:
                self._unavailable = exc
                self._close_watch()
                raise
            return new_to_reader or added

    def _take(self, cursor: Cursor) -> Changes:
        with self._lock:
            if self._dirwatch is None:
                return Changes(complete=False)
            self._pump()
            taken, cursor.pending = cursor.pending, Changes()
            return taken

    def _pump(self) -> None:
        """Read the queue once and hand each event to every reader (caller holds the lock)."""
        assert self._dirwatch is not None
        found = self._dirwatch.changes()
        if not (found.paths or found.folders or not found.complete):
            return
        for cursor in self._cursors:
            mine = Changes(complete=found.complete)
            mine.paths = {p for p in found.paths if p.rpartition("/")[0] in cursor.folders}
            mine.created = found.created & mine.paths
            mine.removed = found.removed & mine.paths
            mine.folders = {p for p in found.folders if p.rpartition("/")[0] in cursor.folders}
            _merge(cursor.pending, mine)

    def _release(self, cursor: Cursor) -> None:
        with self._lock:
            if cursor in self._cursors:
                self._cursors.remove(cursor)
            if self._dirwatch is not None:
                try:
                    if self._cursors:
                        self._dirwatch.watch(sorted(set().union(*(c.folders for c in self._cursors))))
                    else:
                        self._close_watch()
                except WatchUnavailable:  # shrinking cannot hit a limit; a closed fd ends the watch
                    self._close_watch()

    def _close_watch(self) -> None:
        if self._dirwatch is not None:
            self._dirwatch.close()
            self._dirwatch = None

    def close(self) -> None:
        with self._lock:
            self._cursors.clear()
            self._close_watch()
