"""DocStore: the two tiers, read_doc / write_doc, the rendered index.

Everything is read fresh from disk on every call; the only caches are keyed by a file's own
(mtime_ns, size), so they go stale with the file, never with time. Writes take the local tier's
lock (threads and processes), are atomic, keep history, and append new docs to the index.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import biopb_mcp
from biopb_mcp.docs import BODY_MAX_LINES, FILE_MAX_BYTES, INDEX_MAX_ENTRIES, nofollow
from biopb_mcp.docs import index as index_mod
from biopb_mcp.docs import lint
from biopb_mcp.docs import manifest as manifest_mod
from biopb_mcp.docs.atomic import sweep_stale_temps, tier_lock, write_atomic
from biopb_mcp.docs.filecache import FileCache, stamp, stamp_of
from biopb_mcp.docs.frontmatter import Parsed, normalize, parse, read_text, read_text_in
from biopb_mcp.docs.history import SOURCE_HAND_EDIT, SOURCE_SHIPPED, SOURCE_WRITE, History
from biopb_mcp.docs.ids import (
    INDEX_ID,
    check_id,
    check_write_id,
    doc_path,
    is_valid_id,
    parse_ref,
    scan_tier,
    walk_tier,
)
from biopb_mcp.errors import (
    DocError,
    DocNotFound,
    DocUnreadable,
    InvalidDocId,
    WriteRefused,
)

logger = logging.getLogger(__name__)

SHIPPED_DIR: Path = Path(biopb_mcp.__file__).parent / "_docs_data"
"""The shipped seed: read-only, part of the wheel."""

INDEX_FILE = "index.md"
DEFAULT_INDEX = "# biopb docs\n\n## References\n\n## Procedures\n"
"""Seeded when even the shipped tier has no index (a broken install); the agent fills it."""

ORIGIN_SHIPPED = "shipped"
ORIGIN_LOCAL = "local"
ORIGIN_SHADOW = "local (shadows shipped)"

AUTHORING_GATE = """\
Before writing, hold the doc to these rules:
- Write only a procedure you have validated end to end with the user, with several steps; never a
  dataset-specific one (no file names, sample ids or one-off numbers from this session).
- Phrase the index hook as the user's request ("segment nuclei in a 3D stack"), not as a title.
- Update an existing doc rather than write a near-duplicate: read the index first, and prefer an
  old/new edit to a new file.
- Verify that every name, flag or call the doc quotes still exists (inspect_object or a quick run)
  before relying on it: a local doc has no contract test behind it.
- Link with [[id]] what this doc depends on or hands off to, not everything it mentions.
See the shipped doc "authoring" for checkpoint types and how to write parameter rules."""
"""The write_doc authoring gate (what keeps the store worth reading); the server puts it in the tool's docstring."""

_LINK = re.compile(r"\[\[([^\[\]\s|#]+)\]\]")  # "[" excluded: a run of "[[[[" stays linear
_CODE = re.compile(r"^(```|~~~).*?^\1[^\n]*$|`[^`\n]*`", re.S | re.M)
"""Fenced blocks and inline code spans: a `[[x]]` quoted there is an example, not a link."""


@dataclass(frozen=True)
class WriteResult:
    """What write_doc did; `text` is what the agent sees (the diff, plus the index append)."""

    doc_id: str
    created: bool
    changed: bool
    text: str


@dataclass(frozen=True)
class DocInfo:
    """Metadata of one doc, derived from where its file sits and its frontmatter."""

    doc_id: str
    title: str
    description: str
    origin: str
    updated: str
    packages: list[str]
    path: Path


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch))


def _matches(text: str, sub: str) -> tuple[int, bool]:
    """How many times `sub` is in `text`, for an old/new replace that must be unambiguous.

    Returns (non-overlapping count, whether two matches overlap). Overlaps count as ambiguous
    ("aa" is in "aaa" at two places, which str.count calls one). Never walks every overlapping
    match: a long `old` that matches at many overlapping places in a long doc made that
    O(len(doc) x len(old)) under the tier lock, minutes for a 10 KB `old` in a 1 MB doc.
    """
    first = text.find(sub)
    if first == -1:
        return 0, False
    count = text.count(sub)
    if count > 1:
        return count, False
    return 1, text.find(sub, first + 1) != -1


def _strip_render_marks(index_text: str) -> str:
    """Drop the `(missing)` / `(local copy)` marks the renderer appends to entry lines.

    They are the loader's knowledge, not the agent's text: an index written back from a read of
    the rendered index must not pile them up.
    """
    parsed = index_mod.parse(index_text)
    lines = list(parsed.lines)
    for entry in parsed.entries:
        line = lines[entry.line].rstrip()
        for mark in (index_mod.MISSING, index_mod.LOCAL_COPY):
            while line.endswith(" " + mark):
                line = line[: -len(mark) - 1].rstrip()
        lines[entry.line] = line
    return "\n".join(lines)


def _line_count(text: str) -> int:
    """Lines as an editor counts them: newline-separated (str.splitlines also breaks at a form feed, U+2028, …)."""
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


_CONTEXT = 3


def _diff(before: str, after: str, before_name: str, after_name: str) -> str:
    """difflib's unified diff, run only over the span that differs (plus context).

    Trimming the common head and tail first gives the same hunks but keeps a one-line edit of a
    long doc with repetitive lines from costing difflib's quadratic matching.
    """
    a, b = before.splitlines(), after.splitlines()
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    start = max(0, head - _CONTEXT)
    keep_tail = max(0, tail - _CONTEXT)
    a_part, b_part = a[start : len(a) - keep_tail], b[start : len(b) - keep_tail]
    out = []
    for line in difflib.unified_diff(a_part, b_part, before_name, after_name, lineterm="", n=_CONTEXT):
        hunk = _HUNK.match(line)
        if hunk and start:
            line = _shift_hunk(hunk, start)
        out.append(line)
    return "\n".join(out)


_HUNK = re.compile(r"@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def _shift_hunk(hunk: re.Match[str], offset: int) -> str:
    """Renumber a hunk header produced for a slice that starts `offset` lines into the file."""
    a_start, a_len, b_start, b_len = hunk.group(1), hunk.group(2) or "", hunk.group(3), hunk.group(4) or ""
    # difflib writes start 0 only for an empty range, whose number is the line before it.
    a_new = int(a_start) + offset
    b_new = int(b_start) + offset
    return f"@@ -{a_new}{a_len} +{b_new}{b_len} @@"


def _plural(n: int, singular: str, plural: str) -> str:
    return f"{n} {singular if n == 1 else plural}"


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
    ) -> None:
        self.local_dir = Path(local_dir)
        self.search_db = search_db
        """The search index file (a cache its owner places, e.g. in a state dir); None keeps it in memory."""
        self.read_only = read_only
        """Never create or change a file: the index is not seeded, the manifest not refreshed
        (a person reading docs from a terminal should find the disk as it was)."""
        self.shipped_dir = Path(shipped_dir)
        self.version = version
        self.history_keep = history_keep
        self._history = History(self.local_dir, history_keep)
        self._parsed_cache: FileCache[str, Parsed] = FileCache()
        self._manifest_cache: FileCache[Path, manifest_mod.Manifest] = FileCache(max_entries=1)
        self._setup_warned = False
        self._swept = False

    # ----------------------------------------------------------------- paths and setup

    @property
    def index_path(self) -> Path:
        """The local index file."""
        return self.local_dir / INDEX_FILE

    @property
    def manifest_path(self) -> Path:
        """The change manifest beside the local docs."""
        return self.local_dir / manifest_mod.MANIFEST_NAME

    def _local_file(self, doc_id: str) -> str:
        """Unchecked path string of a (valid) id in the local tier: a cheap stat target."""
        return f"{self.local_dir}{os.sep}{doc_id}.md"

    def _is_local_file(self, doc_id: str) -> bool:
        """True when a local doc file exists for `doc_id`; never for `index`, the index itself.

        An index line `- index: …` names no doc: counting the index file as one would list it a
        second time, under the index's own URI (a resources cursor there restarts the walk).
        """
        if doc_id == INDEX_ID:
            return False
        try:
            return stat.S_ISREG(os.stat(self._local_file(doc_id)).st_mode)
        except OSError:
            return False

    def _shipped_index_text(self) -> str:
        try:
            return read_text(self.shipped_dir / INDEX_FILE)
        except (FileNotFoundError, DocUnreadable) as exc:
            logger.warning("No usable shipped index in %s (%s); seeding a blank one", self.shipped_dir, exc)
            return DEFAULT_INDEX

    def _ensure(self) -> None:
        """Seed the local index on first access and refresh the manifest on a version bump."""
        if self.read_only:
            return
        try:
            if not os.path.lexists(self.index_path):
                with tier_lock(self.local_dir):
                    if not os.path.lexists(self.index_path):
                        text = self._shipped_index_text()
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
        self._changed_ids()

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
            return manifest_mod.bump(current, self.version, manifest_mod.hash_files(self._shipped_files())).changed
        try:
            with tier_lock(self.local_dir):
                current = manifest_mod.load(path)  # another process may have refreshed it
                if current is not None and current.version == self.version:
                    return current.changed
                hashes = manifest_mod.hash_files(self._shipped_files())
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

    # ----------------------------------------------------------------- tiers

    def _shipped_files(self) -> dict[str, str]:
        return {doc_id: e.path for doc_id, e in scan_tier(self.shipped_dir) if doc_id is not None}

    def shipped_ids(self, files: dict[str, str] | None = None) -> list[str]:
        """Shipped ids the release lists: banked ids (a segment starting `_`) left out.

        The one place banking is enforced; only the New-shipped tail consumes it.
        """
        files = self._shipped_files() if files is None else files
        return sorted(i for i in files if not any(seg.startswith("_") for seg in i.split("/")))

    def _local_ids(self) -> list[str]:
        return [doc_id for doc_id, _ in scan_tier(self.local_dir) if doc_id is not None]

    def doc_ids(self) -> list[str]:
        """Every id that names a doc file in either tier (banked and unindexed local included), sorted.

        A file listed here may still be unreadable (not UTF-8, …): doc_text / read_doc say so.
        """
        return sorted(set(self._local_ids()) | set(self._shipped_files()))

    def doc_entries(self) -> list[tuple[str, str, str]]:
        """`(id, file path, origin)` of every doc, shadowing applied, from one walk per tier.

        What search and other whole-corpus views read: the same walk as `doc_ids`, so a view never
        finds a file the store would not (hidden names, history, temp files, escaping symlinks).
        """
        local = {doc_id: e.path for doc_id, e in scan_tier(self.local_dir) if doc_id is not None}
        shipped = self._shipped_files()
        out = [(doc_id, path, ORIGIN_SHIPPED) for doc_id, path in shipped.items() if doc_id not in local]
        out += [
            (doc_id, path, ORIGIN_SHADOW if doc_id in shipped else ORIGIN_LOCAL) for doc_id, path in local.items()
        ]
        return out

    def _not_found(self, doc_id: str, what: str = "") -> DocNotFound:
        close = difflib.get_close_matches(doc_id, self.doc_ids(), n=3, cutoff=0.6)
        hint = f" Closest: {', '.join(close)}." if close else ""
        return DocNotFound(
            f"No doc {doc_id!r}{what}.{hint} read_doc(\"index\") lists the docs; write_doc(id, "
            "body=…) creates one.",
            doc_id=doc_id,
            suggestions=close,
        )

    def _read_local(self, doc_id: str) -> str | None:
        """The local text, or None when there is no local file. Raises DocUnreadable."""
        try:
            return self._local_text(doc_id)
        except FileNotFoundError:
            return None

    def _local_text(self, doc_id: str) -> str:
        """A local doc's text with no link followed below the tier root, except a link that stays
        inside the tier (`doc_path` checks that), read at the place it resolves to, again without
        following links: so a folder swapped for a link between the check and the read cannot
        lead out of the tier.

        Raises:
            InvalidDocId: the id resolves outside the tier.
            FileNotFoundError: no local file.
            DocUnreadable: not a readable UTF-8 text file.
        """
        path = doc_path(self.local_dir, doc_id)
        try:
            return read_text_in(self.local_dir, f"{doc_id}.md")
        except DocUnreadable as exc:
            if not isinstance(exc.__cause__, nofollow.LinkRefused):
                raise
        root_real = os.path.realpath(self.local_dir)
        rel = os.path.relpath(os.path.realpath(path), root_real)
        if rel.startswith(".." + os.sep) or rel == ".." or os.path.isabs(rel):
            raise InvalidDocId(
                f"Doc id {doc_id!r} resolves outside the docs tier {self.local_dir} (through a symlink); "
                "refusing to read or write it."
            )
        return read_text_in(Path(root_real), rel.replace(os.sep, "/"))

    def _read_shipped(self, doc_id: str) -> str | None:
        try:
            return read_text(doc_path(self.shipped_dir, doc_id))
        except FileNotFoundError:
            return None

    def _resolve(self, doc_id: str) -> tuple[str, str, Path]:
        """(text, origin, path) of the doc that wins for `doc_id`: local over shipped."""
        local = doc_path(self.local_dir, doc_id)
        try:
            text = self._local_text(doc_id)
        except FileNotFoundError:
            pass
        else:
            # Only the origin label: nothing is read from the shipped tier here, so the id checked
            # above needs no second symlink-escape check (two realpaths of a deep site-packages
            # path were half the cost of a resources/list page).
            shadow = os.path.isfile(f"{self.shipped_dir}{os.sep}{doc_id}.md")
            return text, ORIGIN_SHADOW if shadow else ORIGIN_LOCAL, local
        shipped = doc_path(self.shipped_dir, doc_id)
        try:
            return read_text(shipped), ORIGIN_SHIPPED, shipped
        except FileNotFoundError:
            raise self._not_found(doc_id) from None

    def _locate(self, doc_id: str) -> tuple[str, Path]:
        """(origin, path) of the doc that wins for `doc_id`, without reading it (see `_resolve`)."""
        local = doc_path(self.local_dir, doc_id)
        if os.path.exists(local):
            shadow = os.path.isfile(f"{self.shipped_dir}{os.sep}{doc_id}.md")
            return (ORIGIN_SHADOW if shadow else ORIGIN_LOCAL), local
        shipped = doc_path(self.shipped_dir, doc_id)
        if os.path.exists(shipped):
            return ORIGIN_SHIPPED, shipped
        raise self._not_found(doc_id)

    def _parsed(self, path: str) -> Parsed:
        """Parsed frontmatter of a file, cached on the file's own (mtime_ns, size)."""
        return self._parsed_and_mtime(path)[0]

    def _parsed_and_mtime(self, path: str) -> tuple[Parsed, float]:
        """`_parsed` plus the file's mtime, from one stat (a listing page does this 100 times)."""
        now = time.time_ns()
        st = os.stat(path)
        stamps = (stamp_of(st),)
        hit = self._parsed_cache.get(path, stamps)
        if hit is not None:
            return hit, st.st_mtime
        parsed = parse(self._text_at(path, st))
        self._parsed_cache.put(path, stamps, parsed, now)
        return parsed, st.st_mtime

    def _text_at(self, path: str, st: os.stat_result) -> str:
        """A listed file's text; a local one read as `_local_text` does, so a folder swapped for a
        link between the walk and the read cannot show an outside file's title or description."""
        rel = os.path.relpath(path, self.local_dir)
        if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel) or not rel.endswith(".md"):
            return read_text(Path(path), st)
        try:
            return self._local_text(rel[: -len(".md")].replace(os.sep, "/"))
        except InvalidDocId as exc:
            raise DocUnreadable(str(exc)) from exc

    def _description(self, doc_id: str, path: str) -> str:
        try:
            parsed = self._parsed(path)
        except (OSError, DocUnreadable) as exc:
            logger.warning("Docs: cannot describe %s: %s", doc_id, exc)
            return "(unreadable)"
        return parsed.description or parsed.title or ""

    # ----------------------------------------------------------------- reading

    def read_doc(self, ref: str) -> str:
        """`index`, `<id>`, `<id>@diff`, `<id>@history` or `<id>@v<N>`, as the agent reads it.

        Raises:
            InvalidDocId: outside the grammar, an unknown view, or a path leaving its tier.
            DocNotFound: no such doc or version (the message names the closest ids).
            DocUnreadable: the file exists but is not readable UTF-8 text (names the file).
        """
        r = parse_ref(ref)
        self._ensure()
        if r.view == "history":
            return self._history_view(r.doc_id)
        if r.view == "version":
            assert r.version is not None
            return self._version_view(r.doc_id, r.version)
        if r.doc_id == INDEX_ID:
            return self.render_index() if r.view is None else self._index_diff()
        if r.view == "diff":
            return self._diff_view(r.doc_id)
        text, origin, path = self._resolve(r.doc_id)
        return self._header(r.doc_id, origin, path, text) + "\n\n" + text

    def _header(self, doc_id: str, origin: str, path: Path, text: str) -> str:
        updated = parse(text).updated
        if updated is None and origin == ORIGIN_SHIPPED:
            # a shipped file's mtime is when this copy was installed or cloned, not when it was written
            return f"{doc_id} — {origin} with biopb-mcp {self.version}"
        if updated is None:
            try:
                updated = _when(os.stat(path).st_mtime)
            except OSError:
                updated = "unknown"
        header = f"{doc_id} — {origin}, updated {updated}"
        if origin == ORIGIN_SHADOW:
            header += f"; read_doc(\"{doc_id}@diff\") compares it with the shipped text"
        return header

    def _diff_view(self, doc_id: str) -> str:
        local = self._read_local(doc_id)
        shipped = self._read_shipped(doc_id)
        if local is None and shipped is None:
            raise self._not_found(doc_id)
        if local is None:
            return f"{doc_id} has no local copy: read_doc(\"{doc_id}\") returns the shipped text itself.\n"
        if shipped is None:
            return f"{doc_id} is a local doc with no shipped counterpart: there is nothing to diff against.\n"
        header = (
            f"{doc_id}@diff — your local copy against the shipped text of this release. The manifest "
            "keeps hashes, not old texts, so this diff mixes your own edits with the release's "
            "changes: '-' lines are only in the shipped text, '+' lines only in your copy."
        )
        body = _diff(shipped, local, f"{doc_id} (shipped)", f"{doc_id} (local copy)")
        return header + "\n\n" + (body if body else "(no differences: the copy equals the shipped text)") + "\n"

    def _index_diff(self) -> str:
        local = self._index_text()[0]
        shipped = self._shipped_index_text()
        body = _diff(shipped, local, "index (shipped)", "index (local)")
        return (
            "index@diff — your local index against the index this release ships.\n\n"
            + (body if body else "(no differences)")
            + "\n"
        )

    def _history_view(self, doc_id: str) -> str:
        current = self._index_text()[0] if doc_id == INDEX_ID else self._read_local(doc_id)
        if doc_id != INDEX_ID and current is None and not self._history.versions(doc_id):
            if not os.path.isfile(doc_path(self.shipped_dir, doc_id)):
                raise self._not_found(doc_id)
            return (
                f"No history for {doc_id!r}: it has no local copy yet (it is the shipped text). "
                "Versions are kept from its first write_doc on.\n"
            )
        return self._history.listing(doc_id, current)

    def _version_view(self, doc_id: str, n: int) -> str:
        version, text = self._history.read(doc_id, n)
        header = (
            f"{doc_id}@v{n} — version {n}, saved {version.time} ({version.source}, "
            f"{version.size:,} bytes). To restore it, write_doc(\"{doc_id}\", body=<the text below>)."
        )
        return header + "\n\n" + text

    def doc_text(self, doc_id: str) -> tuple[str, str]:
        """(file text without read_doc's header, origin) of the doc that wins for `doc_id`.

        The text is exactly what read_doc shows under its header, frontmatter included.

        Raises:
            InvalidDocId, DocNotFound, DocUnreadable.
        """
        check_id(doc_id)
        if doc_id == INDEX_ID:
            raise InvalidDocId("'index' is not a doc: read it with read_doc(\"index\") or render_index().")
        text, origin, _ = self._resolve(doc_id)
        return text, origin

    def info(self, doc_id: str) -> DocInfo:
        """Id, title, description, origin, updated, packages and path of one doc.

        Raises:
            InvalidDocId, DocNotFound, DocUnreadable.
        """
        if check_id(doc_id) == INDEX_ID:
            raise InvalidDocId("'index' is not a doc: read it with read_doc(\"index\") or render_index().")
        origin, path = self._locate(doc_id)
        try:
            parsed, mtime = self._parsed_and_mtime(os.fspath(path))
            updated = parsed.updated or _when(mtime)
        except FileNotFoundError:  # removed since _locate looked
            raise self._not_found(doc_id) from None
        return DocInfo(
            doc_id=doc_id,
            title=parsed.title or doc_id,
            description=parsed.description,
            origin=origin,
            updated=updated,
            packages=parsed.packages,
            path=path,
        )

    # ----------------------------------------------------------------- the index

    def _index_text(self) -> tuple[str, str | None]:
        """(local index text, problem note or None). Never raises: render must not crash."""
        try:
            return read_text_in(self.local_dir, INDEX_FILE), None
        except FileNotFoundError:
            return self._shipped_index_text(), None
        except DocUnreadable as exc:
            logger.warning("Docs: local index unreadable, rendering the shipped one: %s", exc)
            return self._shipped_index_text(), (
                f"> The local index could not be read ({exc}) Showing the shipped index instead; "
                "fix the file, or replace it with write_doc(\"index\", body=…)."
            )

    def _render_parts(self, hide_ignored: bool = False) -> tuple[str, list[str]]:
        """The rendered index and the ids it lists (resolving entries, new tail, stale tail)."""
        self._ensure()
        text, note = self._index_text()
        parsed = index_mod.parse(text)
        shipped = self._shipped_files()
        local_cache: dict[str, bool] = {}

        def local_exists(doc_id: str) -> bool:
            if doc_id not in local_cache:
                local_cache[doc_id] = self._is_local_file(doc_id)
            return local_cache[doc_id]

        def exists(doc_id: str) -> bool:
            return doc_id in shipped or local_exists(doc_id)

        def shadows(doc_id: str) -> bool:
            return doc_id in shipped and local_exists(doc_id)

        listed_entries = parsed.entry_ids
        ignored = set(parsed.ignored)
        new_ids = [i for i in self.shipped_ids(shipped) if i not in listed_entries and i not in ignored]
        stale_ids = sorted(i for i in self._changed_ids() if shadows(i))
        rendered = index_mod.render(
            parsed,
            exists=exists,
            shadows=shadows,
            new_docs=[(i, self._description(i, shipped[i])) for i in new_ids],
            stale_docs=[(i, self._description(i, shipped[i])) for i in stale_ids],
            hide_ignored=hide_ignored,
        )
        if note:
            rendered = note + "\n\n" + rendered
        ids: list[str] = []
        seen: set[str] = set()
        for doc_id in [e.doc_id for e in parsed.entries if not e.collection and exists(e.doc_id)] + new_ids + stale_ids:
            if doc_id not in seen:
                seen.add(doc_id)
                ids.append(doc_id)
        return rendered, ids

    def render_index(self, *, hide_ignored: bool = False) -> str:
        """The index as read_doc("index") and the handshake show it: suffixes and tails added.

        `hide_ignored=True` shows each `ignored:` line as a count instead of the ids.
        """
        return self._render_parts(hide_ignored)[0]

    def listed_ids(self) -> list[str]:
        """Ids the rendered index lists that resolve: entries in index order, then the tails."""
        return self._render_parts()[1]

    def surfaced_ids(self, walked: list[tuple[str, str, str]] | None = None) -> frozenset[str]:
        """Ids the index surfaces: resolving entries, docs under a listed collection (`- x/:`),
        the New-shipped tail and the stale tail. What search covers.

        Ignored, banked and unindexed local docs are left out: they stay readable by exact id,
        but a search that found them would undo the agent's `ignored:` choices (and the bench's
        ablation of the procedures). `walked`, a fresh `doc_entries()`, spares a second walk.
        """
        self._ensure()
        parsed = index_mod.parse(self._index_text()[0])
        if walked is None:
            shipped = self._shipped_files()
            local = set(self._local_ids())
        else:
            shipped = {i: p for i, p, origin in walked if origin == ORIGIN_SHIPPED}
            shipped.update({i: "" for i, _, origin in walked if origin == ORIGIN_SHADOW})
            local = {i for i, _, origin in walked if origin != ORIGIN_SHIPPED}
        every = local | set(shipped)
        ignored = set(parsed.ignored)
        entries = parsed.entry_ids
        surfaced = {i for i in entries if i in every}
        surfaced.update(i for i in self.shipped_ids(shipped) if i not in entries and i not in ignored)
        surfaced.update(i for i in self._changed_ids() if i in shipped and i in local)
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
    ) -> WriteResult:
        """Create or change a local doc (or the index): `body` alone, or `old` + `new`.

        Raises:
            InvalidDocId: bad id, a view such as `x@diff`, a path leaving the tier.
            WriteRefused: a wrong argument combination, old matching 0 or 2+ times, a cap.
            DocNotFound: old/new on a doc that does not exist.
            DocUnreadable: the local file is there but cannot be read (fix it by hand first).
        """
        check_write_id(doc_id)
        self._check_args(body, old, new)
        try:
            with tier_lock(self.local_dir):
                self._ensure()
                if doc_id == INDEX_ID:
                    return self._write_index(body, old, new)
                return self._write_doc(doc_id, body, old, new)
        except OSError as exc:
            raise WriteRefused(f"Cannot write {doc_id!r} in {self.local_dir}: {exc}.") from exc

    @staticmethod
    def _check_args(body: str | None, old: str | None, new: str | None) -> None:
        if body is not None and (old is not None or new is not None):
            raise WriteRefused("Give either body (the whole new text) or old and new (one exact replace), not both.")
        if body is None and old is None and new is None:
            raise WriteRefused(
                "write_doc needs body (the whole new text) or old and new (replace one exact "
                "occurrence); got neither."
            )
        if body is None and (old is None or new is None):
            raise WriteRefused(
                f"old and new go together: got only {'old' if new is None else 'new'}. Pass both, "
                "or body for the whole text."
            )
        for name, value in (("body", body), ("old", old), ("new", new)):
            if value is not None and not isinstance(value, str):
                raise WriteRefused(f"{name} must be text, got {type(value).__name__}.")
        if body is not None and not body.strip():
            raise WriteRefused(
                "body is empty. There is no delete: retire a doc by removing its index entry "
                "(write_doc(\"index\", old=…, new=…))."
            )
        if old is not None and old == "":
            raise WriteRefused("old is empty: give the exact text to replace (copy it from read_doc).")
        for name, value in (("body", body), ("new", new)):
            if value is not None and "\x00" in value:
                raise WriteRefused(f"{name} contains NUL characters; a doc is markdown text.")
        if body is not None and len(body.encode("utf-8")) > FILE_MAX_BYTES:
            raise WriteRefused(f"body is over the {FILE_MAX_BYTES:,} bytes a doc file may have.")

    @staticmethod
    def _apply(doc_id: str, base: str | None, body: str | None, old: str | None, new: str | None) -> str:
        """The text after the write; refuses an old that matches 0 or 2+ times."""
        if body is not None:
            text = normalize(body)
            return text if text.endswith("\n") else text + "\n"
        assert old is not None and new is not None and base is not None
        old_n, new_n = normalize(old), normalize(new)
        count, overlapping = _matches(base, old_n)
        if count == 0:
            raise WriteRefused(
                f"old was not found in {doc_id!r} (0 matches); nothing was changed. Re-read it with "
                f"read_doc(\"{doc_id}\") and copy the exact text (whitespace included)."
            )
        if count > 1 or overlapping:
            times = f"{count} times" if count > 1 else "2 times or more (its matches overlap)"
            raise WriteRefused(
                f"old matches {times} in {doc_id!r}; nothing was changed. Include more of the "
                "surrounding text so it matches exactly once."
            )
        return base.replace(old_n, new_n, 1)

    @staticmethod
    def _check_body_cap(doc_id: str, text: str) -> None:
        lines = _line_count(text)
        if lines > BODY_MAX_LINES:
            raise WriteRefused(
                f"{doc_id!r} would be {lines} lines; a doc may have at most {BODY_MAX_LINES}. "
                "Split it into docs that link each other with [[id]], or tighten it."
            )

    @staticmethod
    def _check_index_cap(old_count: int, new_count: int) -> None:
        # A write that shrinks an over-cap index (a hand edit) stays allowed, so it can be fixed.
        if new_count > INDEX_MAX_ENTRIES and new_count > old_count:
            raise WriteRefused(
                f"The index would have {new_count} entries; the cap is {INDEX_MAX_ENTRIES}. Nothing "
                "was changed. Retire entries first: remove lines of local docs you no longer need, "
                "or move shipped ids to the `ignored:` line."
            )

    def _write_doc(self, doc_id: str, body: str | None, old: str | None, new: str | None) -> WriteResult:
        local_path = doc_path(self.local_dir, doc_id)
        shipped_path = doc_path(self.shipped_dir, doc_id)
        current = self._read_local(doc_id)  # DocUnreadable: never overwrite what we cannot keep
        shipped: str | None = None
        if current is None and (body is None or os.path.isfile(shipped_path)):
            try:
                shipped = self._read_shipped(doc_id)
            except DocUnreadable:
                if body is None:
                    raise
        base = current if current is not None else shipped
        if base is None and body is None:
            raise self._not_found(doc_id, " to edit with old/new; create it with body=…")
        after = self._apply(doc_id, base, body, old, new)
        self._check_body_cap(doc_id, after)
        if base is not None and after == base:
            what = "its local copy" if current is not None else "the shipped text (no local copy was made)"
            return WriteResult(doc_id, created=False, changed=False, text=f"No change: {doc_id!r} already equals this text in {what}; nothing was written.\n")
        created = current is None
        index_before = index_after = None
        if created:
            index_before = self._index_text_for_write()
            parsed_index = index_mod.parse(index_before)
            if doc_id not in parsed_index.entry_ids:
                self._check_index_cap(parsed_index.entry_count, parsed_index.entry_count + 1)
                info = parse(after)
                hook = info.description or info.title or doc_id
                index_after = index_mod.append_unfiled(index_before, index_mod.entry_line(doc_id, hook))
        # Everything is checked: now write, history first so a hand edit is never lost.
        notes: list[str] = []
        if current is not None:
            kept = self._keep_hand_edit(doc_id, current, local_path)
            if kept:
                notes.append(kept)
        elif shipped is not None:
            self._history.record(doc_id, shipped, SOURCE_SHIPPED)
        write_atomic(
            local_path, after, before_replace=self._late_edit_guard(doc_id, local_path, current), root=self.local_dir
        )
        self._history.record(doc_id, after, SOURCE_WRITE)
        if created and shipped is not None:
            head = (f"Created a local copy of shipped doc {doc_id!r}: it now shadows the shipped text, "
                    "which stays untouched.")
        elif created:
            head = f"Created local doc {doc_id!r}."
        else:
            head = f"Updated {doc_id!r}."
        before = base if base is not None else ""
        before_name = f"{doc_id} (shipped)" if created and shipped is not None else f"{doc_id} (before)"
        if created and shipped is None:
            before_name = "/dev/null"
        parts = [head, *notes, "", _diff(before, after, before_name, f"{doc_id} (after)")]
        if index_after is not None and index_before is not None:
            self._store_index(index_before, index_after)
            parts += ["", f"Index: filed under {index_mod.UNFILED_HEADING} (move the line where it belongs):",
                      _diff(index_before, index_after, "index (before)", "index (after)")]
        elif created:
            parts += ["", f"Index: {doc_id!r} already has an entry; left as it is."]
        return WriteResult(doc_id, created=created, changed=True, text="\n".join(parts) + "\n")

    def _keep_hand_edit(self, doc_id: str, current: str, path: Path) -> str | None:
        """Save an on-disk text the server has not seen as its own version; say so if it was a hand edit."""
        try:
            mtime: float | None = os.stat(path).st_mtime
        except OSError:
            mtime = None
        kept = self._history.before_write(doc_id, current, mtime)
        if kept is not None and kept.source == SOURCE_HAND_EDIT:
            return (f"The file had been edited outside the server; that text is kept as v{kept.n} "
                    f"(read_doc(\"{doc_id}@v{kept.n}\")).")
        return None

    def _late_edit_guard(self, doc_id: str, path: Path, seen: str | None) -> Callable[[], None]:
        """A write_atomic hook: a hand edit that landed after `seen` was read is kept in history.

        The lock keeps other servers out, but not an editor; without this, an edit saved while
        the new text was being fsynced would be replaced without a trace.
        """

        def keep_late_edit() -> None:
            try:
                text = self._index_text_at_disk() if doc_id == INDEX_ID else self._local_text(doc_id)
            except (FileNotFoundError, DocError):
                return
            if text != seen:
                self._keep_hand_edit(doc_id, text, path)

        return keep_late_edit

    def _index_text_for_write(self) -> str:
        try:
            return self._index_text_at_disk()
        except FileNotFoundError:
            return self._shipped_index_text()

    def _index_text_at_disk(self) -> str:
        """The local index file's text; a link there is refused (DocUnreadable), never followed."""
        return read_text_in(self.local_dir, INDEX_FILE)

    def _store_index(self, before: str | None, after: str) -> None:
        if before is not None and os.path.exists(self.index_path):
            self._keep_hand_edit(INDEX_ID, before, self.index_path)
        write_atomic(
            self.index_path, after, before_replace=self._late_edit_guard(INDEX_ID, self.index_path, before),
            root=self.local_dir,
        )
        self._history.record(INDEX_ID, after, SOURCE_WRITE)

    def _write_index(self, body: str | None, old: str | None, new: str | None) -> WriteResult:
        try:
            current: str | None = self._index_text_at_disk()
        except FileNotFoundError:
            current = None
        except DocUnreadable:
            if body is None:
                raise
            current = None  # a whole-body write is how an unreadable index gets fixed
        base = current if current is not None else self._shipped_index_text()
        after = _strip_render_marks(self._apply(INDEX_ID, base, body, old, new))
        if after == base and current is not None:
            return WriteResult(INDEX_ID, created=False, changed=False, text="No change: the index already equals this text; nothing was written.\n")
        old_count = index_mod.parse(base).entry_count
        new_count = index_mod.parse(after).entry_count
        self._check_index_cap(old_count, new_count)
        self._store_index(current, after)
        text = (f"Updated the index ({_plural(new_count, 'entry', 'entries')} of at most {INDEX_MAX_ENTRIES}).\n\n"
                + _diff(base, after, "index (before)", "index (after)") + "\n")
        return WriteResult(INDEX_ID, created=False, changed=True, text=text)

    # ----------------------------------------------------------------- watchers, lint, status

    def local_state(self) -> dict[str, tuple[int, int]]:
        """id (and "index") -> (mtime_ns, size) of every local doc file, for change watchers."""
        state: dict[str, tuple[int, int]] = {}
        try:
            st = os.stat(self.index_path)
            state[INDEX_ID] = (st.st_mtime_ns, st.st_size)
        except OSError:
            pass
        for doc_id, entry in scan_tier(self.local_dir):
            try:
                st = entry.stat()
            except OSError:
                continue
            state[doc_id] = (st.st_mtime_ns, st.st_size)  # type: ignore[index]
        return state

    def check(self) -> list[str]:
        """Lint both tiers: ids, readability, caps, index entries that do not resolve, shipped links."""
        self._ensure()
        problems: list[str] = []
        readable: dict[str, dict[str, str]] = {"shipped": {}, "local": {}}
        for tier_name, tier in (("shipped", self.shipped_dir), ("local", self.local_dir)):
            for doc_id, path in walk_tier(tier, include_invalid=True):
                if doc_id is None:
                    problems.append(f"{tier_name}: {path} has a name outside the id grammar, so no id reaches it; rename it.")
                    continue
                try:
                    text = read_text(path)
                except (OSError, DocUnreadable) as exc:
                    problems.append(f"{tier_name}: {doc_id}: {exc}")
                    continue
                readable[tier_name][doc_id] = text
                problems += [f"{tier_name}: {doc_id}: {path}: {p}" for p in lint.frontmatter_problems(text)]
                lines = _line_count(text)
                if lines > BODY_MAX_LINES:
                    problems.append(f"{tier_name}: {doc_id} has {lines} lines; the cap is {BODY_MAX_LINES}.")
        for doc_id, text in sorted(readable["shipped"].items()):
            for target in _LINK.findall(_CODE.sub("", parse(text).body)):
                if target not in readable["shipped"]:
                    problems.append(f"shipped: {doc_id} links [[{target}]], which is not a shipped doc.")
        text, note = self._index_text()
        if note:
            problems.append(f"local: index: {note.lstrip('> ')}")
        parsed = index_mod.parse(text)
        if parsed.entry_count > INDEX_MAX_ENTRIES:
            problems.append(f"index: {parsed.entry_count} entries; the cap is {INDEX_MAX_ENTRIES}.")
        shipped_ids = set(self._shipped_files())
        for entry in parsed.entries:
            if entry.collection:
                continue
            if entry.doc_id == INDEX_ID:
                problems.append(f"index line {entry.line + 1}: 'index' is the index itself, not a doc; remove the line.")
            elif entry.doc_id not in shipped_ids and not self._is_local_file(entry.doc_id):
                problems.append(f"index line {entry.line + 1}: {entry.doc_id!r} resolves to no doc (missing).")
            else:
                try:
                    doc_path(self.local_dir, entry.doc_id)
                except InvalidDocId as exc:  # a symlink (file or folder) leading out of the tier
                    problems.append(f"index line {entry.line + 1}: {exc}")
        for line, token in parsed.bad_entries:
            problems.append(
                f"index line {line + 1}: {token!r} is not a valid id, so the line is not read as an entry."
            )
        for name in parsed.ignored:
            if not is_valid_id(name):
                problems.append(f"index: ignored: names {name!r}, which is not a valid id.")
        return problems

    def check_warnings(self) -> list[str]:
        """What is legal but probably unintended: local docs the agent is never shown."""
        parsed = index_mod.parse(self._index_text()[0])
        warnings = []
        for doc_id in lint.unsurfaced_ids(parsed, self._local_ids(), self._shipped_files()):
            hook = self._description(doc_id, self._local_file(doc_id)) or "<when to use it>"
            warnings.append(
                f"local: {doc_id} is in no index entry, so the agent is never shown it; add the line "
                f"'{index_mod.entry_line(doc_id, hook)}' to {self.index_path}, or its id to the "
                "ignored: line to hide it on purpose."
            )
        return warnings

    def summary(self) -> dict[str, object]:
        """Tiers' paths, doc counts, index entries against the cap: for server_status and the CLI."""
        self._ensure()
        text, note = self._index_text()
        parsed = index_mod.parse(text)
        return {
            "local_dir": str(self.local_dir),
            "shipped_dir": str(self.shipped_dir),
            "local_docs": len(self._local_ids()),
            "shipped_docs": len(self._shipped_files()),
            "index_entries": parsed.entry_count,
            "index_max_entries": INDEX_MAX_ENTRIES,
            "body_max_lines": BODY_MAX_LINES,
            "history_keep": self.history_keep,
            "version": self.version,
            "index_problem": note,
        }
