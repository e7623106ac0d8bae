"""The index file and what it lists: seeding it, the release's change manifest, the facts of the
rendered index, and the ids it lists and surfaces (what search, resources and prompts cover)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from biopb_mcp.docs import index as index_mod
from biopb_mcp.docs import manifest as manifest_mod
from biopb_mcp.docs.shelf import INDEX_FILE, Shelf
from biopb_mcp.docs.views import Origin
from biopb_mcp.errors import DocUnreadable
from biopb_mcp.fs.atomic import tier_lock, write_atomic
from biopb_mcp.fs.stamps import FileCache, stamp

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

    def index_text(self) -> tuple[str, str | None]:
        """(local index text, why it could not be read, or None). Never raises: render must not crash."""
        try:
            return self.index_text_at_disk(), None
        except FileNotFoundError:
            return self.shipped_index_text(), None
        except DocUnreadable as exc:
            logger.warning("Docs: local index unreadable, rendering the shipped one: %s", exc)
            return self.shipped_index_text(), str(exc)

    def _render_parts(self, hide_ignored: bool = False) -> tuple[index_mod.IndexFacts, list[str]]:
        """What the rendered index shows, and the ids it lists (resolving entries, new tail, stale tail)."""
        changed = self.prepare()
        text, problem = self.index_text()
        parsed = index_mod.parse(text)
        shipped = self.shelf.shipped_files()
        local_cache: dict[str, bool] = {}

        def local_exists(doc_id: str) -> bool:
            if doc_id not in local_cache:
                local_cache[doc_id] = self.shelf.local.exists(doc_id)
            return local_cache[doc_id]

        def exists(doc_id: str) -> bool:
            return doc_id in shipped or local_exists(doc_id)

        def shadows(doc_id: str) -> bool:
            return doc_id in shipped and local_exists(doc_id)

        listed_entries = parsed.entry_ids
        ignored = set(parsed.ignored)
        new_ids = [i for i in self.shelf.shipped_ids(shipped) if i not in listed_entries and i not in ignored]
        stale_ids = sorted(i for i in changed if shadows(i))
        rendered = index_mod.IndexFacts(
            body=index_mod.annotate(parsed, exists=exists, shadows=shadows, hide_ignored=hide_ignored),
            new_docs=[(i, self.shelf.description(self.shelf.shipped, i)) for i in new_ids],
            stale_docs=[(i, self.shelf.description(self.shelf.shipped, i)) for i in stale_ids],
            unreadable=problem,
        )
        ids: list[str] = []
        seen: set[str] = set()
        for doc_id in [e.doc_id for e in parsed.entries if not e.collection and exists(e.doc_id)] + new_ids + stale_ids:
            if doc_id not in seen:
                seen.add(doc_id)
                ids.append(doc_id)
        return rendered, ids

    def index_facts(self, *, hide_ignored: bool = False) -> index_mod.IndexFacts:
        """What read_doc("index") and the handshake show, as facts (``text.index`` renders them).

        `hide_ignored=True` shows each `ignored:` line as a count instead of the ids.
        """
        return self._render_parts(hide_ignored)[0]

    def listed_ids(self) -> list[str]:
        """Ids the rendered index lists that resolve: entries in index order, then the tails."""
        return self._render_parts()[1]

    def surfaced_ids(self, walked: list[tuple[str, str, Origin]] | None = None) -> frozenset[str]:
        """Ids the index surfaces: resolving entries, docs under a listed collection (`- x/:`),
        the New-shipped tail and the stale tail. What search covers.

        Ignored, banked and unindexed local docs are left out: they stay readable by exact id,
        but a search that found them would undo the agent's `ignored:` choices (and the bench's
        ablation of the procedures). `walked`, a fresh `doc_entries()`, spares a second walk.
        """
        changed = self.prepare()
        parsed = index_mod.parse(self.index_text()[0])
        if walked is None:
            shipped = self.shelf.shipped_files()
            local = set(self.shelf.local.ids())
        else:
            shipped = {i: p for i, p, origin in walked if origin == Origin.SHIPPED}
            shipped.update({i: "" for i, _, origin in walked if origin == Origin.SHADOW})
            local = {i for i, _, origin in walked if origin != Origin.SHIPPED}
        every = local | set(shipped)
        ignored = set(parsed.ignored)
        entries = parsed.entry_ids
        surfaced = {i for i in entries if i in every}
        surfaced.update(i for i in self.shelf.shipped_ids(shipped) if i not in entries and i not in ignored)
        surfaced.update(i for i in changed if i in shipped and i in local)
        prefixes = tuple(e.doc_id + "/" for e in parsed.entries if e.collection)
        if prefixes:
            # "/_" in "/" + id: a banked segment, without splitting every id of a large tier
            surfaced.update(i for i in every if i.startswith(prefixes) and "/_" not in "/" + i and i not in ignored)
        return frozenset(surfaced)

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
        stamps = (stamp(path),)
        current = self._manifest_cache.get(path, stamps)
        if current is None:
            current = manifest_mod.load(path)
            if current is not None:
                self._manifest_cache.put(path, stamps, current, now)
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
