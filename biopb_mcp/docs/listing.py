"""The index file and what it lists: seeding it, the release's change manifest, the facts of the
rendered index, and the store's one :class:`~biopb_mcp.docs.visibility.Visibility` (what the
index lists and surfaces: what search, resources, prompts and completions cover)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from biopb_mcp.docs import index as index_mod
from biopb_mcp.docs import manifest as manifest_mod
from biopb_mcp.docs import visibility
from biopb_mcp.docs.shelf import INDEX_FILE, Shelf
from biopb_mcp.docs.visibility import Visibility
from biopb_mcp.errors import DocUnreadable
from biopb_mcp.fs.atomic import tier_lock, write_atomic
from biopb_mcp.fs.stamps import FileCache, Stamp, settled_stamps, stamp, stamps

__all__ = ["DEFAULT_INDEX", "Listing"]

logger = logging.getLogger(__name__)

DEFAULT_INDEX = "# biopb docs\n\n## References\n\n## Procedures\n"
"""Seeded when even the shipped tier has no index (a broken install); the agent fills it."""


class Listing:
    """The local index over a :class:`Shelf`. Thread-safe (the writes take the tier lock)."""

    def __init__(self, shelf: Shelf, version: str, *, read_only: bool = False) -> None:
        self.shelf = shelf
        self.version = version
        self.read_only = read_only
        self._manifest_cache: FileCache[Path, manifest_mod.Manifest] = FileCache(max_entries=1)
        self._visibility: FileCache[tuple[str, ...], Visibility] = FileCache(max_entries=1)
        self._watched: list[str] | None = None
        """The paths the last visibility was derived from: stat'ed to tell whether it still holds."""
        self._setup_warned = False

    @property
    def manifest_path(self) -> Path:
        """The change manifest beside the local docs."""
        return self.shelf.local_dir / manifest_mod.MANIFEST_NAME

    def prepare(self) -> frozenset[str]:
        """The setup steps every reader of the index runs first: seed the local index if it is
        missing, refresh the manifest on a version bump. Returns the shipped ids that changed at
        the last bump."""
        self.seed_index()
        return self.changed_ids()

    def seed_index(self) -> None:
        """Copy the shipped index to the local tier on first access (never over a file there)."""
        if self.read_only:
            return
        try:
            if not os.path.lexists(self.shelf.index_path):
                with tier_lock(self.shelf.local_dir):
                    if not os.path.lexists(self.shelf.index_path):
                        text = self.shipped_index_text()
                        write_atomic(self.shelf.index_path, text, root=self.shelf.local_dir)
                        logger.info("Seeded the local docs index %s from the shipped one", self.shelf.index_path)
        except OSError as exc:
            if not self._setup_warned:
                logger.warning("Cannot set up the local docs tier %s: %s", self.shelf.local_dir, exc)
                self._setup_warned = True

    def shipped_index_text(self) -> str:
        """The index this release ships, or a blank one when the install has none."""
        try:
            text = self.shelf.shipped.read_file(INDEX_FILE)
        except (FileNotFoundError, DocUnreadable) as exc:
            logger.warning("No usable shipped index in %s (%s); seeding a blank one", self.shelf.shipped_dir, exc)
            return DEFAULT_INDEX
        if not self.shelf.withheld:
            return text
        drop = {e.line for e in index_mod.parse(text.replace("\r\n", "\n")).entries if self.shelf.withholds(e.doc_id)}
        return "\n".join(line for i, line in enumerate(text.replace("\r\n", "\n").split("\n")) if i not in drop)

    def index_text_at_disk(self) -> str:
        """The local index file's text; a link there is refused (DocUnreadable), never followed."""
        return self.shelf.local.read_file(INDEX_FILE)

    def index_text(self) -> tuple[str, DocUnreadable | None]:
        """(local index text, why it could not be read, or None). Never raises: render must not crash."""
        try:
            return self.index_text_at_disk(), None
        except FileNotFoundError:
            return self.shipped_index_text(), None
        except DocUnreadable as exc:
            logger.warning("Docs: local index unreadable, rendering the shipped one: %s", exc)
            return self.shipped_index_text(), exc

    def visibility(self, inputs: tuple[list[str], list[str]] | None = None) -> Visibility:
        """What the docs show now (``docs.visibility``), after the setup steps.

        Built from one read of the index and the tiers (walked whole only on first need, see
        ``Visibility``), and kept while the stamps
        of what it derives from (``list_inputs``: the index files, the manifest, every folder)
        hold: a file added, removed or renamed changes its folder's stamp, an edit of the index
        its own. A racy stamp is never trusted (``fs.stamps``): while a tier changed in the last
        seconds, each call builds a model of its own from fresh reads and none is kept. Such a
        model needs no stamp, so they are taken only up to the first racy one (its ``inputs``
        stay empty) and no folder is walked.

        ``inputs``, the (files, folders) of a ``list_inputs`` the caller just made, spares a second
        walk of the folders; its model carries the stamps of all of them, racy or not.
        """
        changed = self.prepare()
        watched = self._watched if inputs is None else inputs[0] + inputs[1]
        now = time.time_ns()  # before the stamps and the reads below
        signature: tuple[Stamp | None, ...] | None = None
        if watched is not None:
            signature = stamps(watched) if inputs is not None else settled_stamps(watched, now)
            if signature is None:
                # Changed a moment ago: a model built now could not be kept (its stamps are
                # racy), so the rest of the stamps and the walk of every folder are skipped
                # until they settle.
                return self._build(changed, {})
            kept = self._visibility.get(tuple(watched), signature)
            if kept is not None:
                return kept
        if inputs is None:
            files, folders, _ = self.list_inputs()  # a folder may have come or gone
            if signature is None or watched != files + folders:
                watched = files + folders
                signature = stamps(watched)
        assert watched is not None and signature is not None
        found = self._build(changed, dict(zip(watched, signature, strict=True)))
        self._watched = watched
        self._visibility.put(tuple(watched), signature, found, now)
        return found

    def _build(self, changed: frozenset[str], inputs: dict[str, Stamp | None]) -> Visibility:
        text, problem = self.index_text()
        local = self.shelf.local
        folders: dict[str, bool] = {}  # one model, one snapshot: each folder is looked at once

        def local_has(doc_id: str) -> bool:
            return local.has_doc(doc_id, folders)

        return visibility.build(
            text,
            problem,
            self.shelf.shipped_files(),
            local_has,
            self.shelf.doc_entries,
            changed,
            self.shelf.withheld,
            inputs,
        )

    def index_facts(self, *, hide_ignored: bool = False) -> index_mod.IndexFacts:
        """What read_doc("index") and the handshake show, as facts (``text.index`` renders them).

        `hide_ignored=True` shows each `ignored:` line as a count instead of the ids.
        """
        seen = self.visibility()
        return index_mod.IndexFacts(
            body=index_mod.annotate(seen.index, exists=seen.exists, shadows=seen.shadows, hide_ignored=hide_ignored),
            new_docs=[(i, self.shelf.description(self.shelf.shipped, i)) for i in seen.new],
            stale_docs=[(i, self.shelf.description(self.shelf.shipped, i)) for i in seen.stale],
            unreadable=seen.problem,
        )

    def listed_ids(self) -> list[str]:
        """Ids the rendered index lists that resolve: entries in index order, then the tails."""
        return list(self.visibility().listed)

    def surfaced_ids(self) -> frozenset[str]:
        """Ids the index surfaces: resolving entries, docs under a listed collection (`- x/:`),
        the New-shipped tail and the stale tail. What search covers.

        Ignored, banked and unindexed local docs are left out: they stay readable by exact id,
        but a search that found them would undo the agent's `ignored:` choices (and the bench's
        ablation of the procedures).
        """
        return self.visibility().surfaced

    def list_inputs(self) -> tuple[list[str], list[str], bool]:
        """What the doc lists (listed, surfaced) derive from: the index files and the manifest,
        every folder of both tiers that may hold docs (a file added, removed or renamed changes
        its folder's stamp), and whether a link was met in them (a folder link is not descended:
        what a link leads to is not among the folders). Hidden folders (history, locks) never
        hold docs.
        """
        files = [
            os.fspath(self.shelf.index_path),
            os.fspath(self.manifest_path),
            os.fspath(self.shelf.shipped_dir / INDEX_FILE),
        ]
        folders, linked = self.shelf.folders()
        return files, folders, linked

    def changed_ids(self) -> frozenset[str]:
        """Shipped ids that changed at the last version bump (refreshing the manifest on a bump)."""
        path = self.manifest_path
        now = time.time_ns()
        signature = (stamp(path),)
        current = self._manifest_cache.get(path, signature)
        if current is None:
            current = manifest_mod.load(path)
            if current is not None:
                self._manifest_cache.put(path, signature, current, now)
        if current is not None and current.version == self.version:
            return current.changed
        if self.read_only:
            return manifest_mod.bump(current, self.version, manifest_mod.hash_files(self.shelf.shipped.files())).changed
        try:
            with tier_lock(self.shelf.local_dir):
                current = manifest_mod.load(path)  # another process may have refreshed it
                if current is not None and current.version == self.version:
                    return current.changed
                hashes = manifest_mod.hash_files(self.shelf.shipped.files())
                fresh = manifest_mod.bump(current, self.version, hashes)
                manifest_mod.save(path, fresh)
                if fresh.changed:
                    logger.info(
                        "Docs: version %s -> %s changed shipped docs: %s",
                        fresh.previous_version,
                        self.version,
                        ", ".join(sorted(fresh.changed)),
                    )
                return fresh.changed
        except OSError as exc:
            if not self._setup_warned:
                logger.warning("Cannot refresh the docs manifest %s: %s", path, exc)
                self._setup_warned = True
            return frozenset()
