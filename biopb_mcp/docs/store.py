"""DocStore: the two tiers, which doc wins for an id, reading, the rendered index; a facade.

Everything is read fresh from disk on every call; the only caches are validated by a file's own
stamp (see `filecache`), so they go stale with the file, never with time. The read views live in
`views`, the write path in `writes`, the linter in `lint`, diffs in `textdiff`, where a tier's
files are in `tier`.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import biopb_mcp
from biopb_mcp.docs import index as index_mod
from biopb_mcp.docs import lint, views, writes
from biopb_mcp.docs import manifest as manifest_mod
from biopb_mcp.docs.changes import ChangeFeed
from biopb_mcp.docs.frontmatter import Parsed, parse
from biopb_mcp.docs.history import History
from biopb_mcp.docs.ids import INDEX_ID, check_id, check_write_id, parse_ref
from biopb_mcp.docs.limits import BODY_MAX_LINES, INDEX_MAX_ENTRIES
from biopb_mcp.docs.tier import Found, Peeked, Tier
from biopb_mcp.docs.views import Origin, View
from biopb_mcp.docs.writes import WriteResult
from biopb_mcp.errors import (
    DocError,
    DocNotFound,
    DocProblem,
    DocUnreadable,
    InvalidDocId,
    WriteRefused,
)
from biopb_mcp.fs.atomic import sweep_stale_temps, tier_lock, write_atomic
from biopb_mcp.fs.stamps import FileCache, Stamp, stamp, stamp_of

__all__ = ["SHIPPED_DIR", "DocInfo",
           "DocStore", "WriteResult"]

logger = logging.getLogger(__name__)

SHIPPED_DIR: Path = Path(biopb_mcp.__file__).parent / "_docs_data"
"""The shipped seed: read-only, part of the wheel."""

INDEX_FILE = "index.md"
DEFAULT_INDEX = "# biopb docs\n\n## References\n\n## Procedures\n"
"""Seeded when even the shipped tier has no index (a broken install); the agent fills it."""

WITHHELD_LINK = "[[…]]"
"""What a link to a withheld doc shows instead of its target: that a link was there, not where."""

_LINK = re.compile(r"\[\[([^\[\]\s|#]+)\]\]")

@dataclass(frozen=True)
class DocInfo:
    """Metadata of one doc, derived from where its file sits and its frontmatter."""

    doc_id: str
    title: str
    description: str
    origin: Origin
    updated: str
    packages: list[str]
    path: Path


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
        self.local = Tier(Path(local_dir), writable=not read_only)
        self.shipped = Tier(Path(shipped_dir), writable=False)
        self.local_dir = self.local.root
        self.shipped_dir = self.shipped.root
        self.search_db = search_db
        """The search index file (a cache its owner places, e.g. in a state dir); None keeps it in memory."""
        self.read_only = read_only
        """Never create or change a file: the index is not seeded, the manifest not refreshed
        (a person reading docs from a terminal should find the disk as it was)."""
        self.version = version
        self.withheld = frozenset(withhold)
        """Shipped ids treated as not shipped (see `withholds`)."""
        self.history_keep = history_keep
        self.history = History(self.local_dir, history_keep)
        self.changes = ChangeFeed()
        """The one change feed over the docs folders (search and resource subscriptions read it)."""
        self._parsed_cache: FileCache[str, Parsed] = FileCache()
        self._manifest_cache: FileCache[Path, manifest_mod.Manifest] = FileCache(max_entries=1)
        self._setup_warned = False
        self._swept = False

    # ----------------------------------------------------------------- setup

    @property
    def index_path(self) -> Path:
        """The local index file."""
        return self.local_dir / INDEX_FILE

    @property
    def manifest_path(self) -> Path:
        """The change manifest beside the local docs."""
        return self.local_dir / manifest_mod.MANIFEST_NAME

    def _ensure(self) -> frozenset[str]:
        """Seed the local index on first access and refresh the manifest on a version bump.

        Returns the shipped ids that changed at the last bump (the manifest is read once per call).
        """
        if self.read_only:
            return self._changed_ids()
        try:
            if not os.path.lexists(self.index_path):
                with tier_lock(self.local_dir):
                    if not os.path.lexists(self.index_path):
                        text = self.shipped_index_text()
                        write_atomic(self.index_path, text, root=self.local_dir)
                        logger.info("Seeded the local docs index %s from the shipped one", self.index_path)
        except OSError as exc:
            if not self._setup_warned:
                logger.warning("Cannot set up the local docs tier %s: %s", self.local_dir, exc)
                self._setup_warned = True
        if not self._swept:
            self._swept = True
            # Off the caller's path: a walk of a large tier must not delay the first handshake.
            threading.Thread(target=self._sweep, name="docs-temp-sweep", daemon=True).start()
        return self._changed_ids()

    def _sweep(self) -> None:
        removed = sweep_stale_temps(self.local_dir)
        if removed:
            logger.info("Removed %d temp file(s) left by interrupted writes in %s", removed, self.local_dir)

    def _changed_ids(self) -> frozenset[str]:
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
            return manifest_mod.bump(current, self.version, manifest_mod.hash_files(self.shipped.files())).changed
        try:
            with tier_lock(self.local_dir):
                current = manifest_mod.load(path)  # another process may have refreshed it
                if current is not None and current.version == self.version:
                    return current.changed
                hashes = manifest_mod.hash_files(self.shipped.files())
                fresh = manifest_mod.bump(current, self.version, hashes)
                manifest_mod.save(path, fresh)
                if fresh.changed:
                    logger.info(
                        "Docs: version %s -> %s changed shipped docs: %s",
                        fresh.previous_version, self.version, ", ".join(sorted(fresh.changed)),
                    )
                return fresh.changed
        except OSError as exc:
            if not self._setup_warned:
                logger.warning("Cannot refresh the docs manifest %s: %s", path, exc)
                self._setup_warned = True
            return frozenset()

    # ----------------------------------------------------------------- which docs exist

    def withholds(self, doc_id: str) -> bool:
        """Whether the shipped doc `doc_id` is withheld: to every reader it is not shipped.

        The one place that decides. A withheld doc is never listed, read, searched, suggested or
        named by a link in a shipped doc, so nothing the server answers reveals that it exists;
        a local doc of the same id is the agent's own and reads as any local doc.
        """
        return doc_id in self.withheld

    def shipped_files(self) -> dict[str, str]:
        """id -> file path of every shipped doc this store serves (withheld ones left out)."""
        files = self.shipped.files()
        return {i: p for i, p in files.items() if not self.withholds(i)} if self.withheld else files

    def has_shipped(self, doc_id: str) -> bool:
        """Whether a served shipped doc is there for `doc_id`."""
        return not self.withholds(doc_id) and self.shipped.exists(doc_id)

    def _shown(self, text: str) -> str:
        """A shipped text as served: each link to a withheld doc shows as `WITHHELD_LINK`."""
        if not self.withheld or "[[" not in text:
            return text
        return _LINK.sub(lambda m: WITHHELD_LINK if self.withholds(m.group(1)) else m.group(0), text)

    def shipped_ids(self, files: dict[str, str] | None = None) -> list[str]:
        """Shipped ids the release lists: banked ids (a segment starting `_`) left out.

        The one place banking is enforced; only the New-shipped tail consumes it.
        """
        files = self.shipped_files() if files is None else files
        return sorted(i for i in files if not self.withholds(i) and not any(seg.startswith("_") for seg in i.split("/")))

    def doc_ids(self) -> list[str]:
        """Every id that names a doc file in either tier (banked and unindexed local included), sorted.

        A file listed here may still be unreadable (not UTF-8, …): doc_text / read_doc say so.
        """
        return sorted(set(self.local.ids()) | set(self.shipped_files()))

    def list_inputs(self) -> tuple[list[str], list[str], bool]:
        """What the doc lists (listed, surfaced) derive from: the index files and the manifest,
        every folder of both tiers that may hold docs (a file added, removed or renamed changes
        its folder's stamp), and whether a link was met in them (a folder link is not descended:
        what a link leads to is not among the folders). Hidden folders (history, locks) never
        hold docs.
        """
        files = [os.fspath(self.index_path), os.fspath(self.manifest_path),
                 os.fspath(self.shipped_dir / self.index_path.name)]
        folders: list[str] = []
        linked = False
        for root in (self.local_dir, self.shipped_dir):
            pending = [os.fspath(root)]
            while pending:
                directory = pending.pop()
                folders.append(directory)
                try:
                    entries = list(os.scandir(directory))
                except OSError:
                    continue
                for entry in entries:
                    if entry.is_symlink():
                        linked = True
                    elif entry.is_dir() and not entry.name.startswith("."):
                        pending.append(entry.path)
        return files, folders, linked

    def doc_entries(self) -> list[tuple[str, str, Origin]]:
        """`(id, file path, origin)` of every doc, shadowing applied, from one walk per tier.

        What search and other whole-corpus views read: the same walk as `doc_ids`, so a view never
        finds a file the store would not (hidden names, history, temp files, escaping symlinks).
        """
        local = self.local.files()
        shipped = self.shipped_files()
        out = [(doc_id, path, Origin.SHIPPED) for doc_id, path in shipped.items() if doc_id not in local]
        out += [
            (doc_id, path, Origin.SHADOW if doc_id in shipped else Origin.LOCAL) for doc_id, path in local.items()
        ]
        return out

    def not_found(self, doc_id: str, what: str = "", *, kind: DocProblem = DocProblem.NO_DOC) -> DocNotFound:
        """The refusal for an id no tier has, with the closest ids that exist."""
        close = difflib.get_close_matches(doc_id, self.doc_ids(), n=3, cutoff=0.6)
        hint = f" Closest: {', '.join(close)}." if close else ""
        return DocNotFound(f"No doc {doc_id!r}{what}.{hint}", kind=kind, doc_id=doc_id, suggestions=close)

    # ----------------------------------------------------------------- which doc wins

    def _locate(self, doc_id: str) -> tuple[Origin, Path]:
        """(origin, path) of the doc that wins for `doc_id`: local over shipped, without reading it.

        The shadowing rule, written only here. Something at the local path wins even when it
        cannot be read (a directory named `x.md`): the read then says what is wrong with it,
        rather than quietly serving the shipped text.

        Raises:
            InvalidDocId: the id resolves outside a tier.
            DocNotFound: neither tier has it.
        """
        local = self.local.path(doc_id)
        if os.path.exists(local):
            shadow = self.has_shipped(doc_id)
            return (Origin.SHADOW if shadow else Origin.LOCAL), local
        shipped = self.shipped.path(doc_id)
        if not self.withholds(doc_id) and os.path.exists(shipped):
            return Origin.SHIPPED, shipped
        raise self.not_found(doc_id)

    def _tier_of(self, origin: Origin) -> Tier:
        return self.shipped if origin == Origin.SHIPPED else self.local

    def _resolve(self, doc_id: str) -> tuple[str, Origin, Path]:
        """(text, origin, path) of the doc that wins for `doc_id` (see `_locate`)."""
        origin, path = self._locate(doc_id)
        try:
            text = self._tier_of(origin).read(doc_id)
            return (self._shown(text) if origin == Origin.SHIPPED else text), origin, path
        except FileNotFoundError:  # removed since _locate looked
            raise self.not_found(doc_id) from None

    def read_local(self, doc_id: str) -> str | None:
        """The local text, or None when there is no local file. Raises DocUnreadable, InvalidDocId."""
        try:
            return self.local.read(doc_id)
        except FileNotFoundError:
            return None

    def read_shipped(self, doc_id: str) -> str | None:
        """The shipped text as served, or None when the release has no such doc (or withholds it).

        Raises DocUnreadable, InvalidDocId.
        """
        if self.withholds(check_id(doc_id)):
            return None
        try:
            return self._shown(self.shipped.read(doc_id))
        except FileNotFoundError:
            return None

    def _parsed_and_mtime(self, tier: Tier, doc_id: str) -> tuple[Parsed, float]:
        """Parsed frontmatter of a doc file and its mtime, from one stat, cached on the file's stamp."""
        path = tier.file(doc_id)
        now = time.time_ns()
        st = os.stat(path)
        stamps = (stamp_of(st),)
        hit = self._parsed_cache.get(path, stamps)
        if hit is not None:
            return hit, st.st_mtime
        try:
            text = tier.read(doc_id)
        except InvalidDocId as exc:  # the walk found it inside; a folder became a link since
            raise DocUnreadable(str(exc), doc_id=doc_id) from exc
        parsed = parse(text)
        self._parsed_cache.put(path, stamps, parsed, now)
        return parsed, st.st_mtime

    def description(self, tier: Tier, doc_id: str) -> str:
        """The one-line description of a doc file (its title if it has none); never raises."""
        try:
            parsed = self._parsed_and_mtime(tier, doc_id)[0]
        except (OSError, DocUnreadable, InvalidDocId) as exc:
            logger.warning("Docs: cannot describe %s: %s", doc_id, exc)
            return "(unreadable)"
        return parsed.description or parsed.title or ""

    # ----------------------------------------------------------------- reading

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
        self._ensure()
        if r.view == "history":
            return views.history_page(self, r.doc_id)
        if r.view == "version":
            assert r.version is not None
            return views.version_page(self, r.doc_id, r.version)
        if r.doc_id == INDEX_ID:
            return views.index_diff_page(self)
        if r.view == "diff":
            return views.diff_page(self, r.doc_id)
        text, origin, path = self._resolve(r.doc_id)
        return views.doc_page(self, r.doc_id, origin, path, text)

    def doc_text(self, doc_id: str) -> tuple[str, Origin]:
        """(file text without read_doc's header, origin) of the doc that wins for `doc_id`.

        The text is exactly what read_doc shows under its header, frontmatter included.

        Raises:
            InvalidDocId, DocNotFound, DocUnreadable.
        """
        if check_id(doc_id) == INDEX_ID:
            raise _index_is_not_a_doc()
        text, origin, _ = self._resolve(doc_id)
        return text, origin

    def info(self, doc_id: str) -> DocInfo:
        """Id, title, description, origin, updated, packages and path of one doc.

        Raises:
            InvalidDocId, DocNotFound, DocUnreadable.
        """
        if check_id(doc_id) == INDEX_ID:
            raise _index_is_not_a_doc()
        origin, path = self._locate(doc_id)
        try:
            parsed, mtime = self._parsed_and_mtime(self._tier_of(origin), doc_id)
        except FileNotFoundError:  # removed since _locate looked
            raise self.not_found(doc_id) from None
        return DocInfo(
            doc_id=doc_id,
            title=parsed.title or doc_id,
            description=parsed.description,
            origin=origin,
            updated=parsed.updated or views.when(mtime),
            packages=parsed.packages,
            path=path,
        )

    def _winners(self, doc_ids: Sequence[str], want_text: Callable[[str, Stamp], bool]) -> Iterator[Peeked | str]:
        """`Tier.peek_many` over both tiers with the shadowing rule: a peek for each id whose
        doc wins in a folder read as a batch, or the id alone where a link is on the way (the
        caller takes the one-doc path). Ids with no doc are left out."""
        pending = list(doc_ids)
        for tier in (self.local, self.shipped):
            if tier is self.shipped:
                pending = [doc_id for doc_id in pending if not self.withholds(doc_id)]
            absent = []
            for peek in tier.peek_many(pending, want_text):
                if peek.found is Found.NOTHING:
                    absent.append(peek.doc_id)
                elif peek.found is Found.LINK:
                    yield peek.doc_id
                elif tier is self.shipped and peek.text is not None and self.withheld:
                    yield dataclasses.replace(peek, text=self._shown(peek.text))
                else:
                    yield peek
            pending = absent

    def texts(self, doc_ids: Sequence[str]) -> dict[str, str | DocError]:
        """`doc_text`'s text of each id, or why it cannot be read; an id with no doc is left out.

        For a batch (search indexing thousands of docs): each folder is opened once.
        """
        found: dict[str, str | DocError] = {}
        for peek in self._winners(doc_ids, lambda _path, _stamp: True):
            if isinstance(peek, Peeked):
                found[peek.doc_id] = peek.error if peek.error is not None else peek.text or ""
                continue
            try:
                found[peek] = self.doc_text(peek)[0]
            except DocNotFound:
                continue
            except DocError as exc:
                found[peek] = exc
            except (OSError, UnicodeError) as exc:
                found[peek] = DocUnreadable(f"Cannot read doc {peek!r}: {exc}.", doc_id=peek)
        return found

    def summaries(self, doc_ids: Sequence[str]) -> dict[str, Parsed | DocError]:
        """Parsed frontmatter of the doc that wins for each id, or why it cannot be read; an id
        whose doc is gone is left out. In the ids' order.

        `info`'s title and description for a batch (a listing page), with the same shadowing
        and the same cache: each folder is opened once (see `Tier.peek_many`), where `info`
        walks every path from the root.
        """
        found: dict[str, Parsed | DocError] = {}
        cached: dict[str, Parsed] = {}

        def want_text(path: str, st: Stamp) -> bool:
            hit = self._parsed_cache.get(path, (st,))
            if hit is not None:
                cached[path] = hit
            return hit is None

        read_from = time.time_ns()  # before any read: a change during one is never cached
        for peek in self._winners(doc_ids, want_text):
            if not isinstance(peek, Peeked):  # a link below a tier root: the one-doc path decides
                try:
                    found[peek] = self._parsed_and_mtime(self._tier_of(self._locate(peek)[0]), peek)[0]
                except (DocNotFound, FileNotFoundError):
                    continue
                except (DocUnreadable, InvalidDocId) as exc:
                    found[peek] = exc
                except OSError as exc:
                    found[peek] = DocUnreadable(f"Cannot read doc {peek!r}: {exc.strerror or exc}.", doc_id=peek)
            elif peek.error is not None:
                found[peek.doc_id] = peek.error
            elif peek.text is not None:
                assert peek.stamp is not None
                found[peek.doc_id] = parsed = parse(peek.text)
                self._parsed_cache.put(peek.path, (peek.stamp,), parsed, read_from)
            else:
                found[peek.doc_id] = cached[peek.path]
        return {doc_id: found[doc_id] for doc_id in doc_ids if doc_id in found}

    # ----------------------------------------------------------------- the index

    def shipped_index_text(self) -> str:
        """The index this release ships, or a blank one when the install has none."""
        try:
            text = self.shipped.read_file(INDEX_FILE)
        except (FileNotFoundError, DocUnreadable) as exc:
            logger.warning("No usable shipped index in %s (%s); seeding a blank one", self.shipped_dir, exc)
            return DEFAULT_INDEX
        if not self.withheld:
            return text
        drop = {e.line for e in index_mod.parse(text.replace("\r\n", "\n")).entries if self.withholds(e.doc_id)}
        return "\n".join(line for i, line in enumerate(text.replace("\r\n", "\n").split("\n")) if i not in drop)

    def index_text_at_disk(self) -> str:
        """The local index file's text; a link there is refused (DocUnreadable), never followed."""
        return self.local.read_file(INDEX_FILE)

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
        changed = self._ensure()
        text, problem = self.index_text()
        parsed = index_mod.parse(text)
        shipped = self.shipped_files()
        local_cache: dict[str, bool] = {}

        def local_exists(doc_id: str) -> bool:
            if doc_id not in local_cache:
                local_cache[doc_id] = self.local.exists(doc_id)
            return local_cache[doc_id]

        def exists(doc_id: str) -> bool:
            return doc_id in shipped or local_exists(doc_id)

        def shadows(doc_id: str) -> bool:
            return doc_id in shipped and local_exists(doc_id)

        listed_entries = parsed.entry_ids
        ignored = set(parsed.ignored)
        new_ids = [i for i in self.shipped_ids(shipped) if i not in listed_entries and i not in ignored]
        stale_ids = sorted(i for i in changed if shadows(i))
        rendered = index_mod.IndexFacts(
            body=index_mod.annotate(parsed, exists=exists, shadows=shadows, hide_ignored=hide_ignored),
            new_docs=[(i, self.description(self.shipped, i)) for i in new_ids],
            stale_docs=[(i, self.description(self.shipped, i)) for i in stale_ids],
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
        changed = self._ensure()
        parsed = index_mod.parse(self.index_text()[0])
        if walked is None:
            shipped = self.shipped_files()
            local = set(self.local.ids())
        else:
            shipped = {i: p for i, p, origin in walked if origin == Origin.SHIPPED}
            shipped.update({i: "" for i, _, origin in walked if origin == Origin.SHADOW})
            local = {i for i, _, origin in walked if origin != Origin.SHIPPED}
        every = local | set(shipped)
        ignored = set(parsed.ignored)
        entries = parsed.entry_ids
        surfaced = {i for i in entries if i in every}
        surfaced.update(i for i in self.shipped_ids(shipped) if i not in entries and i not in ignored)
        surfaced.update(i for i in changed if i in shipped and i in local)
        prefixes = tuple(e.doc_id + "/" for e in parsed.entries if e.collection)
        if prefixes:
            # "/_" in "/" + id: a banked segment, without splitting every id of a large tier
            surfaced.update(i for i in every if i.startswith(prefixes) and "/_" not in "/" + i and i not in ignored)
        return frozenset(surfaced)

    # ----------------------------------------------------------------- writing

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
                    self._ensure()
                    if doc_id == INDEX_ID:
                        return writes.write_index(self, body, old, new)
                    return writes.write_doc(self, doc_id, body, old, new, title)
                finally:
                    self.history.forget()
        except OSError as exc:
            raise WriteRefused(
                f"Cannot write {doc_id!r} in {self.local_dir}: {exc}.", kind=DocProblem.WRITE_FAILED, doc_id=doc_id
            ) from exc

    # ----------------------------------------------------------------- watchers, lint, status

    def local_state(self) -> dict[str, tuple[int, int]]:
        """id (and "index") -> (mtime_ns, size) of every local doc file, for change watchers."""
        state: dict[str, tuple[int, int]] = {}
        try:
            st = os.stat(self.index_path)
            state[INDEX_ID] = (st.st_mtime_ns, st.st_size)
        except OSError:
            pass
        for doc_id, entry in self.local.scan():
            try:
                st = entry.stat()
            except OSError:
                continue
            state[doc_id] = (st.st_mtime_ns, st.st_size)  # type: ignore[index]
        return state

    def check(self) -> list[str]:
        """Lint both tiers: ids, readability, caps, index entries that do not resolve, shipped links."""
        self._ensure()
        return lint.check(self)

    def check_warnings(self) -> list[str]:
        """What is legal but probably unintended: local docs the agent is never shown."""
        return lint.check_warnings(self)

    def summary(self) -> dict[str, object]:
        """Tiers' paths, doc counts, index entries against the cap: for server_status and the CLI."""
        self._ensure()
        text, note = self.index_text()
        parsed = index_mod.parse(text)
        return {
            "local_dir": str(self.local_dir),
            "shipped_dir": str(self.shipped_dir),
            "local_docs": len(self.local.ids()),
            "shipped_docs": len(self.shipped_files()),
            "index_entries": parsed.entry_count,
            "index_max_entries": INDEX_MAX_ENTRIES,
            "body_max_lines": BODY_MAX_LINES,
            "history_keep": self.history_keep,
            "version": self.version,
            "index_problem": note,
        }


def _index_is_not_a_doc() -> InvalidDocId:
    return InvalidDocId("'index' is not a doc: it is the index (render_index() renders it).",
                        kind=DocProblem.INDEX_NOT_A_DOC, doc_id=INDEX_ID)
