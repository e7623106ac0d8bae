"""DocStore: the docs store's facade over its parts, and the few methods the adapters call.

The parts take each other, not the facade: the ``shelf`` (both tiers, shadowing, withholding,
reading), the ``listing`` (the index file, the manifest, and the one ``visibility``: what the
index lists and surfaces), the ``history`` (kept versions), ``changes`` (the change feed over the
folders) and ``search`` (its index, opened on first use). The read views are in ``views``, the
write path in ``writes``, the linter in ``lint``, the procedures in ``procedures``. Adapters (the
server, the CLI, ``text``) call the facade's methods, never a part. Everything is read fresh from
disk on every call; the only caches are validated by a file's own stamp (``fs.stamps``), so they
go stale with the file, never with time.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import biopb_mcp
from biopb_mcp.docs import index as index_mod
from biopb_mcp.docs import lint, procedures, views, writes
from biopb_mcp.docs.changes import ChangeFeed, Cursor
from biopb_mcp.docs.history import History
from biopb_mcp.docs.ids import INDEX_ID, check_write_id, parse_ref
from biopb_mcp.docs.limits import BODY_MAX_LINES, INDEX_MAX_ENTRIES
from biopb_mcp.docs.listing import Listing
from biopb_mcp.docs.shelf import DocInfo, Shelf
from biopb_mcp.docs.views import Origin, View
from biopb_mcp.docs.visibility import Visibility
from biopb_mcp.docs.writes import WriteResult
from biopb_mcp.errors import DocProblem, WriteRefused
from biopb_mcp.fs.atomic import sweep_stale_temps, tier_lock
from biopb_mcp.fs.stamps import FileCache

if TYPE_CHECKING:
    from biopb_mcp.docs.search.query import Hit, Search

__all__ = ["SHIPPED_DIR", "DocInfo", "DocStore", "WriteResult"]

logger = logging.getLogger(__name__)

SHIPPED_DIR: Path = Path(biopb_mcp.__file__).parent / "_docs_data"
"""The shipped seed: read-only, part of the wheel."""


class DocStore:
    """The docs store over a local (writable) and a shipped (read-only) tier. Thread-safe."""

    def __init__(
        self,
        local_dir: Path,
        *,
        shipped_dir: Path = SHIPPED_DIR,
        version: str = biopb_mcp.__version__,
        history_keep: int = 50,
        read_only: bool = False,
        search_db: Path | None = None,
        withhold: Iterable[str] = (),
    ) -> None:
        self.shelf = Shelf(Path(local_dir), Path(shipped_dir), read_only=read_only, withhold=withhold)
        self.listing = Listing(self.shelf, version, read_only=read_only)
        self.history_keep = history_keep
        self.history = History(self.shelf.local_dir, history_keep)
        self.changes = ChangeFeed()
        """The one change feed over the docs folders (search and resource subscriptions read it)."""
        self.local_dir = self.shelf.local_dir
        self.shipped_dir = self.shelf.shipped_dir
        self.search_db = search_db
        """The search index file (a cache its owner places, e.g. in a state dir); None keeps it in memory."""
        self.read_only = read_only
        """Never create or change a file: the index is not seeded, the manifest not refreshed
        (a person reading docs from a terminal should find the disk as it was)."""
        self.version = version
        self._swept = False
        self.procedure_reads: FileCache[str, procedures.Read] = procedures.new_cache()
        """What each doc says of itself as a procedure, by file and stamp (``procedures``)."""
        self._search: Search | None = None
        self._search_lock = threading.Lock()

    @property
    def search(self) -> Search:
        """This store's search (``docs.search.query``): its index and the lock around it, made
        on first use (a store that never searches never imports SQLite) and closed with the store."""
        with self._search_lock:
            if self._search is None:
                from biopb_mcp.docs.search.query import Search

                self._search = Search()
                # The index file and the folder watch go with the store; at exit the OS closes
                # them, without waiting on a search a worker thread may still be running.
                weakref.finalize(self, self._search.close).atexit = False
            return self._search

    def close(self) -> None:
        """Close the search index and its folder watch (reopened by the next search)."""
        with self._search_lock:
            search = self._search
        if search is not None:
            search.close()

    # ----------------------------------------------------------------- setup

    def _prepare(self) -> frozenset[str]:
        """Before a read or a write: the listing's setup (seed the index, refresh the manifest),
        and once per store a sweep of the temp files crashed writers left, off the caller's path.
        Returns the shipped ids that changed at the last version bump."""
        changed = self.listing.prepare()
        if not self._swept and not self.read_only:
            self._swept = True
            threading.Thread(target=self._sweep_temps, name="docs-temp-sweep", daemon=True).start()
        return changed

    def _sweep_temps(self) -> None:
        removed = sweep_stale_temps(self.local_dir)
        if removed:
            logger.info("Removed %d temp file(s) left by interrupted writes in %s", removed, self.local_dir)

    # ----------------------------------------------------------------- what the adapters call

    def view(self, ref: str) -> View:
        """`index`, `<id>`, `<id>@diff`, `<id>@history` or `<id>@v<N>` as facts (``docs.views``);
        ``biopb_mcp.text.doc_views`` words them for a reader.

        Raises:
            InvalidDocId: outside the grammar, an unknown view, or a path leaving its tier.
            DocNotFound: no such doc or version (the message names the closest ids).
            DocUnreadable: the file exists but is not readable UTF-8 text (names the file).
        """
        r = parse_ref(ref)
        if r.doc_id == INDEX_ID and r.view is None:
            return views.IndexPage(self.index_facts())
        self._prepare()
        if r.view == "history":
            return views.history_page(self, r.doc_id)
        if r.view == "version":
            assert r.version is not None
            return views.version_page(self, r.doc_id, r.version)
        if r.doc_id == INDEX_ID:
            return views.index_diff_page(self)
        if r.view == "diff":
            return views.diff_page(self, r.doc_id)
        text, origin, path = self.shelf.resolve(r.doc_id)
        return views.doc_page(self, r.doc_id, origin, path, text)

    def doc_text(self, doc_id: str) -> tuple[str, Origin]:
        """(file text without read_doc's header, origin) of the doc that wins for `doc_id`."""
        return self.shelf.doc_text(doc_id)

    def info(self, doc_id: str) -> DocInfo:
        """Id, title, description, origin, updated, packages and path of one doc."""
        return self.shelf.info(doc_id)

    def index_facts(self, *, hide_ignored: bool = False) -> index_mod.IndexFacts:
        """What read_doc("index") and the handshake show, as facts (``text.index`` renders them)."""
        self._prepare()
        return self.listing.index_facts(hide_ignored=hide_ignored)

    def visibility(self) -> Visibility:
        """What the docs show now: listed, surfaced, ignored, banked, withheld (``docs.visibility``),
        kept while the index and the tiers' folders keep their stamps."""
        return self.listing.visibility()

    def listed_ids(self) -> list[str]:
        """Ids the rendered index lists that resolve: entries in index order, then the tails."""
        return list(self.visibility().listed)

    def surfaced_ids(self) -> frozenset[str]:
        """Ids the index surfaces (what search, resources and prompts cover)."""
        return self.visibility().surfaced

    def doc_ids(self) -> list[str]:
        """Every id that names a doc file in either tier (banked and unindexed local included), sorted."""
        return self.shelf.doc_ids()

    def procedures(self) -> list[procedures.Procedure]:
        """The procedures the index lists now, in index order (``docs.procedures``)."""
        return procedures.procedures(self)

    def search_docs(self, query: str, max_results: int = 5) -> list[Hit]:
        """The best sections of the surfaced docs for ``query`` (``docs.search.query.search_docs``).

        Raises:
            InvalidQuery: an empty or overlong query, max_results outside 1..50, a query too costly.
            SearchUnavailable: no FTS5 in this Python's sqlite3, or the index file cannot be used.
        """
        from biopb_mcp.docs.search.query import search_docs

        return search_docs(self, query, max_results)

    def warm_search(self) -> int:
        """Bring the search index up to date now; the count of searchable docs."""
        from biopb_mcp.docs.search.query import warm_index

        return warm_index(self)

    # ----------------------------------------------------------------- change watchers

    def list_inputs(self) -> tuple[list[str], list[str], bool]:
        """The files and folders the doc lists derive from, and whether a link was met among the
        folders (``Listing.list_inputs``): what a change watcher follows."""
        return self.listing.list_inputs()

    def follow_changes(self) -> Cursor:
        """A reader's own place in the store's one change feed (``docs.changes``)."""
        return self.changes.cursor()

    def local_state(self) -> dict[str, tuple[int, int]]:
        """id (and "index") -> (mtime_ns, size) of every local doc file, for change watchers."""
        return self.shelf.local_state()

    def local_file(self, doc_id: str) -> Path:
        """The local file of ``doc_id`` (the local index for ``index``), whether or not it exists.

        Raises:
            InvalidDocId: bad id, or a path that resolves outside the tier.
        """
        return self.shelf.index_path if doc_id == INDEX_ID else self.shelf.local.path(doc_id)

    def write_doc(
        self,
        doc_id: str,
        body: str | None = None,
        old: str | None = None,
        new: str | None = None,
        section: str | None = None,
    ) -> WriteResult:
        """Create or change a local doc (or the index): `body` alone, or `old` + `new`.

        `section` files a new doc's index line under that heading (made if absent) instead of
        `## Unfiled`; with old/new, on the index, or on a doc that exists it is refused.

        Raises:
            InvalidDocId: bad id, a view such as `x@diff`, a path leaving the tier.
            WriteRefused: a wrong argument combination, old matching 0 or 2+ times, a cap, a
                `section` that does not apply.
            DocNotFound: old/new on a doc that does not exist.
            DocUnreadable: the local file is there but cannot be read (fix it by hand first).
        """
        check_write_id(doc_id)
        writes.check_args(body, old, new)
        title = writes.check_section(doc_id, section, body)
        try:
            with tier_lock(self.local_dir):
                try:
                    self._prepare()
                    if doc_id == INDEX_ID:
                        return writes.write_index(self, body, old, new)
                    return writes.write_doc(self, doc_id, body, old, new, title)
                finally:
                    self.history.forget()
        except OSError as exc:
            raise WriteRefused(
                f"Cannot write {doc_id!r} in {self.local_dir}: {exc}.", kind=DocProblem.WRITE_FAILED, doc_id=doc_id
            ) from exc

    def restore(self, doc_id: str, n: int) -> WriteResult:
        """Put version ``n`` of ``doc_id`` back as its text, by an ordinary write: the text it
        replaces is kept as a version too, so a restore is undone the same way.

        Raises:
            DocNotFound: no such version kept (the message says which are).
            DocUnreadable: the version file is damaged.
            WriteRefused: as `write_doc` refuses (a cap, a failed write).
        """
        check_write_id(doc_id)
        self._prepare()
        _, text = self.history.read(doc_id, n)
        return self.write_doc(doc_id, body=text)

    def check(self) -> list[lint.Finding]:
        """Lint both tiers: ids, readability, caps, index entries that do not resolve, shipped links
        (findings: ``biopb_mcp.text.lint`` words them)."""
        self._prepare()
        return lint.check(self)

    def check_warnings(self) -> list[lint.Finding]:
        """What is legal but probably unintended: local docs the agent is never shown."""
        return lint.check_warnings(self)

    def summary(self) -> dict[str, object]:
        """Tiers' paths, doc counts, index entries against the cap: for server_status and the CLI.
        ``index_problem`` is the DocUnreadable of a local index that cannot be read, or None."""
        self._prepare()
        text, note = self.listing.index_text()
        parsed = index_mod.parse(text)
        return {
            "local_dir": str(self.local_dir),
            "shipped_dir": str(self.shipped_dir),
            "local_docs": len(self.shelf.local.ids()),
            "shipped_docs": len(self.shelf.shipped_files()),
            "index_entries": parsed.entry_count,
            "index_max_entries": INDEX_MAX_ENTRIES,
            "body_max_lines": BODY_MAX_LINES,
            "history_keep": self.history_keep,
            "version": self.version,
            "index_problem": note,
        }
