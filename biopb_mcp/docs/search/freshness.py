"""What search must look at before a query: the surfaced docs, and which of them may have changed.

Search keeps an index of files; before each query it must know that every edit so far (by
write_doc, by hand, by another server) is in it. Stat'ing every file per query does that at a
syscall per doc, the larger part of a query at 5,000 docs. Where the folders can be watched
(`biopb_mcp.fs.watch`, Linux inotify), a query stats only the files with an event since the
last one, the rows this process has not matched to the disk, and a rolling slice of the rest
(for what inotify cannot report). Elsewhere every file is stat'ed, as before.

The list of surfaced docs (a walk of both tiers and a parse of the index) is kept while nothing
it derives from changed: an event naming a new doc, the index or the manifest, or a folder; or,
without watches, a changed stamp of one of those.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from biopb_mcp.docs.ids import DOC_SUFFIX, INDEX_ID
from biopb_mcp.docs.views import Origin
from biopb_mcp.fs.stamps import Stamp, is_settled, stamp
from biopb_mcp.fs.watch import Changes, WatchUnavailable

if TYPE_CHECKING:
    from biopb_mcp.docs.changes import Cursor
    from biopb_mcp.docs.search.fts import Indexed
    from biopb_mcp.docs.store import DocStore

__all__ = ["ROLLING", "Freshness", "Scope", "Target"]

logger = logging.getLogger(__name__)

ROLLING = 64
"""Doc files re-stat'ed per query beside those with an event, in turn: a change the folder watch
cannot report (a write through mmap, a network filesystem written from another machine) is found
within (docs / this) queries."""

Target = tuple[tuple[str, str], str, str, Origin]
"""((tier root, id), id, file path, origin) of one surfaced doc."""


@dataclass
class Scope:
    """The surfaced docs, and what they were derived from."""

    targets: list[Target]
    inputs: dict[str, Stamp | None]  # the index, the manifest and every folder: stamps at the walk
    folders: list[str] | None  # the folders alone; None when a tier holds a symlink
    hooks: dict[str, str] = field(default_factory=dict)  # id -> the hook of its index entry
    answer: tuple[int, dict[str, Origin], set[int]] | None = None
    """The last refresh's (index generation, id -> origin, allowed rows): reused while current."""

    @functools.cached_property
    def by_path(self) -> dict[str, int]:
        return {target[2]: n for n, target in enumerate(self.targets)}


def _index_target(store: DocStore) -> Target:
    """The index itself, searched for the prose between its entries (a rule a lab keeps there):
    the local file, or the shipped one while there is none."""
    if os.path.lexists(store.shelf.index_path):
        return (os.fspath(store.local_dir), INDEX_ID), INDEX_ID, os.fspath(store.shelf.index_path), Origin.LOCAL
    shipped = os.fspath(store.shipped_dir / store.shelf.index_path.name)
    return (os.fspath(store.shipped_dir), INDEX_ID), INDEX_ID, shipped, Origin.SHIPPED


def _hidden(path: str) -> bool:
    """A hidden name (history, locks, temp files) never holds or is a doc."""
    return path.rpartition("/")[2].startswith(".")


def _is_doc(path: str) -> bool:
    return path.endswith(DOC_SUFFIX) and not _hidden(path)


def _is_new_doc(path: str, scope: Scope) -> bool:
    return _is_doc(path) and path not in scope.by_path


@dataclass
class Freshness:
    """One store's change tracking for its search index. Not thread-safe: search holds a lock."""

    scope: Scope | None = None
    watch: Cursor | None = None  # this search's place in the store's change feed
    sweep: bool = True  # the next query stats every file (nothing before the watch was seen)
    verified: dict[tuple[str, str], Stamp] = field(default_factory=dict)  # stamps this process saw on disk
    seen_generation: int = -1  # the index generation the last refresh ended at
    unsettled: bool = False  # the last refresh left a row read too soon after its file changed
    roll: int = 0  # where the next rolling re-stat starts
    checked_scope: Scope | None = None  # the scope the last query's suspects were chosen from
    closed: bool = False  # closed, or this system cannot watch: every file is stat'ed per query

    def close(self) -> None:
        self.closed = True  # an evicted corpus a search still holds must not open a watch nobody closes
        if self.watch is not None:
            self.watch.close()
            self.watch = None

    def failed(self) -> None:
        """A refresh did not finish: the events it read and the stamps it saw are not in the
        index, so the next query checks every file."""
        self.sweep = True
        self.seen_generation = -1

    def suspects(
        self, store: DocStore, rows: dict[tuple[str, str], Indexed], generation: int
    ) -> tuple[Scope, list[Target]]:
        """The scope, and the targets to stat now (each changed since the last query, or not
        known not to have)."""
        changes = self.watch.take() if self.watch is not None else None  # later changes wait for the next query
        if changes is not None:
            self._forget_scope_if_changed(changes)
        scope = self._current_scope(store)
        if self.watch is None or changes is None or not changes.complete or self.sweep or scope.folders is None:
            self.sweep = False
            self.checked_scope = scope
            return scope, scope.targets
        by_path, targets = scope.by_path, scope.targets
        chosen = {n for path in changes.paths if (n := by_path.get(path)) is not None}
        new_scope, self.checked_scope = scope is not self.checked_scope, scope
        if new_scope or self.unsettled or generation != self.seen_generation:
            # Rows may differ from what this process saw on disk: written by another server,
            # never indexed (newly surfaced: an index line, a shadowing copy removed), or read
            # too soon after a change to be trusted.
            verified = self.verified
            for n, (key, _, _, _) in enumerate(targets):
                entry = rows.get(key)
                if entry is None or not entry.settled or entry.stamp != verified.get(key):
                    chosen.add(n)
        if targets:
            start = self.roll % len(targets)
            chosen.update(n % len(targets) for n in range(start, start + min(ROLLING, len(targets))))
            self.roll = start + ROLLING
        return scope, [targets[n] for n in sorted(chosen)]

    def refreshed(self, generation: int, unsettled: bool, *, others_wrote: bool) -> None:
        """Record where a refresh left the index. Rows another server committed while it ran
        were not compared with the disk: then the next query compares every row."""
        self.seen_generation, self.unsettled = (-1 if others_wrote else generation), unsettled

    def seen(self, key: tuple[str, str], now: Stamp | None) -> None:
        """Record the stamp a stat found (None: the file is gone)."""
        if now is None:
            self.verified.pop(key, None)
        else:
            self.verified[key] = now

    def _forget_scope_if_changed(self, changes: Changes) -> None:
        scope = self.scope
        if scope is None:
            return
        if (
            not changes.complete
            or any(path in scope.inputs for path in changes.paths)
            or any(not _hidden(path) for path in changes.folders)
            or any(_is_new_doc(path, scope) for path in changes.created)
            # a doc gone (not replaced: a rename over it or a swap also shows it created)
            or any(_is_doc(path) for path in changes.removed - changes.created)
        ):  # a shipped doc may win again
            self.scope = None
            return
        # Events were read for these folders: their stamps now are expected, not a change nobody
        # reported (which still forces a new walk, below).
        for folder in {path.rpartition("/")[0] for path in changes.paths}:
            if folder in scope.inputs:
                scope.inputs[folder] = stamp(folder)

    def _current_scope(self, store: DocStore) -> Scope:
        kept = self.scope
        if kept is not None and all(stamp(path) == st for path, st in kept.inputs.items()):
            return kept
        started = time.time_ns()
        files, found, linked = store.list_inputs()
        folders = None if linked else found  # where a link leads is not watched: stat every file
        watching = folders is not None and self._watch(store, folders)  # before the walk: later changes are queued
        seen = store.listing.visibility((files, found))  # the stamps it was derived from: after the watch
        inputs = dict(seen.inputs)
        roots = {Origin.SHIPPED: os.fspath(store.shipped_dir)}
        local = os.fspath(store.local_dir)
        targets = [
            ((roots.get(origin, local), doc_id), doc_id, path, origin)
            for doc_id, (path, origin) in seen.docs.items()
            if doc_id in seen.surfaced
        ]
        targets.append(_index_target(store))
        hooks = dict(seen.hooks)
        scope = Scope(targets, inputs, folders, hooks)
        # Without a watch, a stamp this recent may not show the next change: walk again next time.
        settled = watching or (folders is not None and all(is_settled(st, started) for st in inputs.values()))
        self.scope = scope if settled else None
        return scope

    def _watch(self, store: DocStore, folders: list[str]) -> bool:
        """Follow exactly ``folders`` in the store's change feed; False when this system cannot."""
        if self.closed:
            return False
        try:
            if self.watch is None:
                self.watch = store.follow_changes()
            if self.watch.watch(folders):
                self.sweep = True  # what happened in a newly watched folder before now was not seen
            return True
        except WatchUnavailable as exc:
            logger.info("Search stats every doc per query: cannot watch the docs folders (%s)", exc)
            self.close()
            return False
