"""The full-text index behind search: SQLite FTS5 rows per doc section, kept in one file.

One row per `##` section; one `docs` row per doc file, keyed by the file's tier root and doc id,
holding the (inode, mtime_ns, size) stamp it was read at and a digest of its text, so a restarted
server checks each file with a stat and re-reads only what changed. The file may be shared by
several servers (WAL, a busy timeout, short write transactions). A file of ours that is missing,
of another layout or corrupt is unlinked and rebuilt from empty with a log line: it is a cache,
never the truth. Anything else at the index's name is left alone and the index kept in memory
(`biopb_mcp.docs.search.fts_file`).

This module knows nothing of the docs store: callers hand it sections and stamps.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from biopb_mcp.docs.search.fts_file import ForeignFile, Replaced, file_id, open_file, unlink_files
from biopb_mcp.docs.search.sections import atoms, compounds, fold
from biopb_mcp.errors import SearchUnavailable

__all__ = [
    "MAX_SECTIONS",
    "SECTION_BITS",
    "FtsIndex",
    "IndexBusy",
    "Indexed",
    "Section",
    "TermStats",
    "TooCostly",
    "digest",
    "encode_compound",
    "fts5_probe",
]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 3
"""Kept in the file's user_version: a file written under another layout is rebuilt, not read."""

BUSY_TIMEOUT_S = 1.0
"""How long a write waits for another process's write transaction before giving up (`IndexBusy`):
servers sharing the file hold it for a batch of docs at a time, milliseconds; a process that holds
it longer must not stall every search behind it."""

SECTION_BITS = 12
"""A section's rowid is its doc's id shifted by this, plus its number: a doc's rows are one range."""
_DOC_BITS = 28
"""A doc's id is its tier root's number shifted by this, plus its own: a root's rows are one
range, so a search scores only its own tiers' rows (several stores may share a file)."""
RANK_CAP = 1_000
"""Most rows one query pass scores (see FtsIndex.candidates); scoring is FTS5's cost per row."""
PHRASE_WORDS = 12
"""Most words of the query an FTS5 phrase matches (the rest is confirmed on the section's text):
FTS5 matches a phrase inside one row without ever yielding to SQLite's progress handler, at a
cost of the row's length times the phrase's, seconds for a long query over a megabyte of one word."""
PREFIX_WORDS = 4
"""Most query words the prefix pass expands: expanding a prefix merges every term it starts."""
PREFIX_MIN_CHARS = 4
"""Shortest query word expanded as a prefix ("a*" would merge most of the vocabulary)."""
_PROGRESS_STEPS = 1_000
"""SQLite virtual-machine steps between two checks of a query's deadline."""
MAX_SECTIONS = 1 << SECTION_BITS
"""Sections per doc; later `##` sections of a longer doc are merged into the last row."""

# unicode61 splits at `_` and `.`, so a compound literal is stored with them mapped to private-use
# characters, which it keeps inside a token: `kernel.promote_after` stays one searchable token.
_COMPOUND_MAP = str.maketrans({".": "\ue000", "_": "\ue001"})

_SCHEMA = (
    # last_doc: the last doc id given out in the root's range; ids are never given twice, so a
    # searcher holding a row id read before another server dropped that doc cannot meet a new
    # doc's sections under it.
    "CREATE TABLE roots (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, last_doc INTEGER NOT NULL DEFAULT 0)",
    # title and hook: the doc's title (first H1) and its own description, what a query naming the
    # doc is matched against besides its sections.
    (
        "CREATE TABLE docs (id INTEGER PRIMARY KEY, root TEXT NOT NULL, doc_id TEXT NOT NULL, "
        "ino INTEGER, mtime_ns INTEGER, size INTEGER, digest BLOB, settled INTEGER NOT NULL, "
        "title TEXT NOT NULL DEFAULT '', hook TEXT NOT NULL DEFAULT '', UNIQUE (root, doc_id))"
    ),
    # body: the section's text (indexed, and what snippets are cut from); literals: its
    # compounds, encoded; heading: shown in a hit, never matched on its own.
    (
        "CREATE VIRTUAL TABLE sections USING fts5(body, literals, heading UNINDEXED, "
        "tokenize = 'unicode61 remove_diacritics 0')"
    ),
)


class TooCostly(Exception):
    """A query ran past its deadline and was stopped."""


class IndexBusy(Exception):
    """Another process held the index's write lock for longer than BUSY_TIMEOUT_S."""


def fts5_probe() -> None:
    """Raise sqlite3.Error when this Python's SQLite cannot create an FTS5 table."""
    probe = sqlite3.connect(":memory:")
    try:
        probe.execute("CREATE VIRTUAL TABLE temp.probe USING fts5(x)")
    finally:
        probe.close()


def digest(text: str) -> bytes:
    """A stable digest of a doc's text (the builtin hash differs per process)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def encode_compound(term: str) -> str:
    """A compound literal as the `literals` column stores it (one unicode61 token)."""
    return term.translate(_COMPOUND_MAP)


@dataclass(frozen=True)
class Indexed:
    """What a doc's rows were built from."""

    row: int
    root: str
    doc_id: str
    stamp: tuple[int, int, int]  # (inode, mtime_ns, size)
    digest: bytes | None  # None: the file could not be read, so it has no sections
    settled: bool  # False: read so soon after a change that the stamp cannot be trusted
    title: str = ""
    hook: str = ""


@dataclass(frozen=True)
class Section:
    """One indexed section of a doc."""

    rowid: int
    root: str
    doc_id: str
    heading: str
    body: str


@dataclass(frozen=True)
class TermStats:
    """What BM25 weighs a query's terms by: sections indexed, their mean length in words, and how
    many sections hold each term (words by themselves, literals as `compound` keys)."""

    sections: int
    mean_words: float
    holding: dict[str, int]


def _is_corrupt(exc: sqlite3.Error) -> bool:
    """True for a file that is not (or no longer) a readable database, as opposed to a busy one."""
    return getattr(exc, "sqlite_errorname", "").startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB"))


def _is_other_layout(exc: sqlite3.Error) -> bool:
    """True when the file's tables are not this release's: a server of another release sharing
    the file rebuilt it under its own schema."""
    return isinstance(exc, sqlite3.OperationalError) and str(exc).startswith(("no such column", "no such table"))


def _rarest_window(phrase: list[str], held: dict[str, int]) -> list[str]:
    """At most PHRASE_WORDS consecutive words of ``phrase``, around its rarest word: FTS5 walks
    the rows holding every word of a phrase, so the rarest one decides what that costs."""
    if len(phrase) <= PHRASE_WORDS:
        return phrase
    rarest = min(range(len(phrase)), key=lambda k: (held.get(phrase[k], 0), k))
    start = max(0, min(rarest - PHRASE_WORDS // 2, len(phrase) - PHRASE_WORDS))
    return phrase[start : start + PHRASE_WORDS]


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """An SQLite varint at ``at`` (big-endian, 7 bits a byte, a full ninth byte): (value, next offset)."""
    value = 0
    for _ in range(8):
        byte = data[at]
        at += 1
        if byte < 0x80:
            return (value << 7) | byte, at
        value = (value << 7) | (byte & 0x7F)
    return (value << 8) | data[at], at + 1


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


class FtsIndex:
    """The section index in one SQLite file (or in memory when ``path`` is None).

    Not thread-safe: the caller serialises use (search holds one lock per index). Safe across
    processes sharing the file.

    Raises:
        SearchUnavailable: this Python's sqlite3 has no FTS5.
    """

    def __init__(self, path: Path | None) -> None:
        try:
            fts5_probe()
        except sqlite3.Error as exc:
            raise SearchUnavailable(
                f"Search needs SQLite's FTS5 extension, which this Python's sqlite3 module "
                f"(SQLite {sqlite3.sqlite_version}) was built without ({exc}). Docs can still be "
                "read and written; run the server with a Python whose sqlite3 has FTS5 "
                "(python.org, conda and most Linux builds do) to search them."
            ) from exc
        self.path = path
        """The index file; None when it is kept in memory (asked for, or the file is not ours)."""
        self._conn: sqlite3.Connection | None = None
        self._file_id: tuple[int, int] | None = None
        self._rows: dict[tuple[str, str], Indexed] = {}
        self._by_row: dict[int, Indexed] = {}
        self._data_version = -1
        self._root_nos: dict[str, int] = {}
        self._last_rows: dict[int, int] = {}  # root number -> its largest row id, in this write transaction
        self.generation = 0
        """Bumped on every change to the rows this process knows: an answer derived at one
        generation holds while it is current."""
        self.reloads = 0
        """Bumped when the rows were re-read after another connection committed."""
        self._held: dict[tuple[str, str], int] = {}  # (column, term) -> sections holding it
        self._held_generation = -1  # the generation `_held` was counted at
        self._ranges: tuple[set[int], list[tuple[int, int]]] | None = None  # the last allowed set's row ranges
        self._open()

    # ------------------------------------------------------------------ the file

    def _connect(self, path: str) -> sqlite3.Connection:
        return sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)

    def _open(self) -> None:
        """Connect to the index file, rebuilding one of ours that is damaged or of another layout;
        in memory when the name holds something that is not ours (see `fts_file`)."""
        if self.path is not None:
            for _ in range(3):  # servers replacing a file at the same moment settle within a round
                try:
                    self._open_file()
                    return
                except Replaced:
                    continue
                except ForeignFile as exc:
                    logger.warning(
                        "Search index %s is not a file of this server (%s): it is left alone, and "
                        "the index is kept in memory. Move it away, or set server.state_dir, to "
                        "keep the index on disk.",
                        self.path,
                        exc,
                    )
                    break
            else:
                logger.warning("Search index %s kept being replaced while opened: keeping it in memory", self.path)
            self.path = None
        conn = self._connect(":memory:")
        for statement in _SCHEMA:
            conn.execute(statement)
        self._conn, self._file_id = conn, None
        self._forget_rows()

    def _open_file(self) -> None:
        assert self.path is not None
        try:
            self._conn, self._file_id = open_file(self.path, self._connect, _SCHEMA, SCHEMA_VERSION)
        except sqlite3.Error as exc:
            if not _is_corrupt(exc):
                raise
            self._replace_file(exc)
            raise Replaced from exc
        self._forget_rows()

    def _replace_file(self, exc: sqlite3.Error) -> None:
        assert self.path is not None
        logger.warning("Search index %s is unreadable (%s): rebuilding it from the docs", self.path, exc)
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        unlink_files(self.path)

    def reopen_if_replaced(self) -> None:
        """Follow another server that replaced a corrupt file: a connection to the old one sees
        none of its writes."""
        if self.path is not None and file_id(self.path) != self._file_id:
            if self._conn is not None:
                self._conn.close()
            self._open()

    def recover(self, exc: sqlite3.Error) -> bool:
        """After ``exc`` from a query: rebuild a corrupt file, or reopen one another release
        rebuilt (this release's schema is restored), and return True (the caller retries)."""
        if self.path is None:
            return False
        if _is_other_layout(exc):
            logger.warning("Search index %s was rebuilt by another release of the server: rebuilding it", self.path)
            self.close()
            self._open()
            return True
        if not _is_corrupt(exc):
            return False
        self._replace_file(exc)
        self._open()
        return True

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            self._open()
        assert self._conn is not None
        return self._conn

    # ------------------------------------------------------------------ docs rows

    def _forget_rows(self) -> None:
        self._rows, self._by_row, self._data_version, self._root_nos = {}, {}, -1, {}
        self.generation += 1

    def rows(self) -> dict[tuple[str, str], Indexed]:
        """Every doc row, by (root, doc id); re-read only when another connection committed."""
        version = self.conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            rows = {}
            for row, root, doc_id, ino, mtime_ns, size, dig, settled, title, hook in self.conn.execute(
                "SELECT id, root, doc_id, ino, mtime_ns, size, digest, settled, title, hook FROM docs"
            ):
                rows[(root, doc_id)] = Indexed(
                    row, root, doc_id, (ino, mtime_ns, size), dig, bool(settled), title, hook
                )
            self._rows = rows
            self._by_row = {r.row: r for r in rows.values()}
            self._data_version = version
            self.generation += 1
            self.reloads += 1
        return self._rows

    @contextmanager
    def writing(self) -> Iterator[None]:
        """One short write transaction (other servers' writes wait up to BUSY_TIMEOUT_S).

        Raises:
            IndexBusy: another process held the write lock all that time; nothing was written.
        """
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorname", "").startswith("SQLITE_BUSY"):
                raise IndexBusy(str(exc)) from exc
            raise
        self._last_rows = {}  # another server may have added rows since the last transaction
        try:
            self.rows()  # what other servers committed before this transaction began
            yield
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            self._forget_rows()  # the in-memory copy may hold rows that were rolled back
            raise

    def put(
        self,
        root: str,
        doc_id: str,
        stamp: tuple[int, int, int],
        dig: bytes | None,
        settled: bool,
        sections: Callable[[], Sequence[tuple[str, str]]],
        about: Callable[[], tuple[str, str]] = lambda: ("", ""),
    ) -> None:
        """Record a doc read at ``stamp`` with text digest ``dig``; its rows are rebuilt from
        ``sections()``, and its (title, hook) taken from ``about()``, only when the stored digest
        differs. Call inside `writing()`.
        """
        conn = self.conn
        old = self._rows.get((root, doc_id))
        if old is None:  # `writing()` re-read the rows under the write lock: none is there
            row = self._next_row(root)
            title, hook = about() if dig is not None else ("", "")
            conn.execute(
                "INSERT INTO docs (id, root, doc_id, ino, mtime_ns, size, digest, settled, title, hook) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (row, root, doc_id, *stamp, dig, int(settled), title, hook),
            )
            if dig is not None:
                self._insert_sections(row, sections())
        else:
            row = old.row
            title, hook = old.title, old.hook
            if old.digest != dig:
                title, hook = about() if dig is not None else ("", "")
            conn.execute(
                "UPDATE docs SET ino = ?, mtime_ns = ?, size = ?, digest = ?, settled = ?, title = ?, hook = ? WHERE id = ?",
                (*stamp, dig, int(settled), title, hook, row),
            )
            if old.digest != dig:
                first = row << SECTION_BITS
                conn.execute("DELETE FROM sections WHERE rowid BETWEEN ? AND ?", (first, first + MAX_SECTIONS - 1))
                if dig is not None:
                    self._insert_sections(row, sections())
        entry = Indexed(row, root, doc_id, stamp, dig, settled, title, hook)
        self._rows[(root, doc_id)] = entry
        self._by_row[row] = entry
        self.generation += 1

    def _root_no(self, root: str) -> int:
        """The number of a tier root (its rows' range), added on first use. Inside `writing()`."""
        number = self._root_nos.get(root)
        if number is None:
            self.conn.execute("INSERT OR IGNORE INTO roots (path) VALUES (?)", (root,))
            number = self._root_nos[root] = int(
                self.conn.execute("SELECT id FROM roots WHERE path = ?", (root,)).fetchone()[0]
            )
        return number

    def _next_row(self, root: str) -> int:
        """A new doc's row id in its root's range. Inside `writing()`, which forgets the counters."""
        number = self._root_no(root)
        last = self._last_rows.get(number)
        if last is None:
            first = number << _DOC_BITS
            given = int(self.conn.execute("SELECT last_doc FROM roots WHERE id = ?", (number,)).fetchone()[0])
            # max(id) too: a server of an older release sharing the file adds rows without last_doc
            used = self.conn.execute(
                "SELECT max(id) FROM docs WHERE id BETWEEN ? AND ?", (first, first + (1 << _DOC_BITS) - 1)
            ).fetchone()[0]
            last = max(given, first, 0 if used is None else int(used))
        self._last_rows[number] = last + 1
        self.conn.execute("UPDATE roots SET last_doc = ? WHERE id = ?", (last + 1, number))
        return last + 1

    def _insert_sections(self, row: int, sections: Sequence[tuple[str, str]]) -> None:
        first = row << SECTION_BITS
        sections = list(sections)
        if len(sections) > MAX_SECTIONS:
            tail = "\n".join(text for _, text in sections[MAX_SECTIONS - 1 :])
            sections = [*sections[: MAX_SECTIONS - 1], (sections[MAX_SECTIONS - 1][0], tail)]
        self.conn.executemany(
            "INSERT INTO sections (rowid, body, literals, heading) VALUES (?, ?, ?, ?)",
            [
                (first + n, text, " ".join(map(encode_compound, compounds(text))), heading)
                for n, (heading, text) in enumerate(sections)
            ],
        )

    def drop(self, keys: Iterable[tuple[str, str]]) -> None:
        """Forget docs and their sections. Call inside `writing()`."""
        conn = self.conn
        for key in keys:
            entry = self._rows.pop(key, None)
            if entry is None:
                continue
            self._by_row.pop(entry.row, None)
            self.generation += 1
            first = entry.row << SECTION_BITS
            conn.execute("DELETE FROM sections WHERE rowid BETWEEN ? AND ?", (first, first + MAX_SECTIONS - 1))
            conn.execute("DELETE FROM docs WHERE id = ?", (entry.row,))

    # ------------------------------------------------------------------ queries

    @contextmanager
    def budget(self, deadline: float) -> Iterator[None]:
        """Stop any SQL run inside past ``deadline`` (time.monotonic()).

        Raises:
            TooCostly: the deadline passed (a statement was interrupted, or a caller's check).
        """
        conn = self.conn
        conn.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_STEPS)
        try:
            yield
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorname", "") == "SQLITE_INTERRUPT":
                raise TooCostly(str(exc)) from None
            raise
        finally:
            conn.set_progress_handler(None, 0)

    def candidates(self, query: str, allowed: set[int], pool: int, deadline: float = float("inf")) -> list[Section]:
        """Sections of the docs whose row is in ``allowed`` that may answer
        ``query``: up to ``pool`` holding the whole query as written (case and whitespace folded),
        then up to ``pool`` holding its terms. Not ranked: the caller scores them all alike.

        FTS5 scores every row a MATCH returns, so a query of common words would score most of
        the corpus. Each pass therefore takes at most RANK_CAP rows, best by BM25 first: the
        phrase (a phrase in more rows than that is listed unscored, in index order), then the OR
        of the query's rarest terms (those a section is found by), then, only while the pool is
        not full, the first RANK_CAP rows holding any term, then a few of its words as prefixes.
        Only the rows of ``allowed``'s tier roots are matched at all. The pools do not depend on
        how many hits a caller shows, so neither does what it shows first.
        """
        words = list(dict.fromkeys(atoms(query)))
        literals = list(dict.fromkeys(compounds(query)))
        terms = [f"body : {_quote(w)}" for w in words]
        terms += [f"literals : {_quote(encode_compound(c))}" for c in literals]
        if not terms:
            return []
        folded = fold(query)
        found: dict[int, Section] = {}
        ranges = self._ranges_of(allowed)

        def wanted(rowid: int) -> bool:
            if time.monotonic() > deadline:
                raise TooCostly("the query's time is up")
            return rowid not in found and (rowid >> SECTION_BITS) in allowed

        counts = {term: self._count(term, ranges) for term in terms}
        phrases = 0
        if not (len(words) == 1 and not literals and folded == words[0]):
            # A plain word needs no phrase pass: every section holding it holds it as written.
            # Otherwise the candidates hold the query's words in order; then, for a longer
            # query, its inner words, as the query may start or end mid-word ("Error: operands
            # could no" sits inside "ValueError: operands could not"). Each candidate is
            # confirmed on its folded text.
            ordered = atoms(query)
            held = {w: counts[f"body : {_quote(w)}"] for w in words}
            matches = [
                f"body : {_quote(' '.join(_rarest_window(phrase, held)))}"
                for phrase in [ordered] + ([ordered[1:-1]] if len(ordered) >= 3 else [])
            ]
            for match in dict.fromkeys(matches):
                # The rows holding the phrase: few enough for the pool are taken as they are
                # (matching is the cost: done once); more are ranked by bm25() (which counts them
                # all first, for the idf); more than a pass may score are taken in index order.
                few = list(self._unscored(match, ranges, pool + 1))
                holders: Iterable[int] = few
                if len(few) > pool:
                    common = self._count(match, ranges) > RANK_CAP
                    holders = self._unscored(match, ranges) if common else self._scored(match, ranges)
                for rowid in holders:
                    if phrases >= pool:
                        break
                    if wanted(rowid):
                        section = self._section(rowid)
                        if folded in fold(section.body):
                            found[rowid] = section
                            phrases += 1
        if phrases >= pool:
            # Sections holding the query as written outrank any that only hold its terms (see
            # `ranking`): with the pool full of them, no term pass could add a hit shown first.
            return list(found.values())
        rare: list[str] = []
        total = 0
        for term in sorted(terms, key=counts.__getitem__):
            if rare and total + counts[term] > RANK_CAP:
                break
            rare.append(term)
            total += counts[term]
        groups = [" OR ".join(rare)] + ([" OR ".join(terms)] if len(rare) < len(terms) else [])
        # Last, a few words as prefixes ("checkpoint" finds "checkpoints"), only while the pool is
        # not full: expanding a prefix merges every term it starts, so the words found least
        # whole, and long enough to say something, are the ones expanded.
        long_words = [w for w in words if len(w) >= PREFIX_MIN_CHARS]
        long_words.sort(key=lambda w: (counts[f"body : {_quote(w)}"], -len(w), w))
        if long_words:
            groups.append(" OR ".join(f"body : {_quote(w)} *" for w in long_words[:PREFIX_WORDS]))
        others = 0
        for group in groups:
            for rowid in self._scored(group, ranges):
                if others >= pool:
                    return list(found.values())
                if wanted(rowid):
                    found[rowid] = self._section(rowid)
                    others += 1
        return list(found.values())

    def _ranges_of(self, allowed: set[int]) -> list[tuple[int, int]]:
        """The section row ranges of the tier roots ``allowed``'s docs are in (kept for the same set:
        a steady search passes the same one each time)."""
        if self._ranges is None or self._ranges[0] is not allowed:
            shift = _DOC_BITS + SECTION_BITS
            roots = sorted({row >> _DOC_BITS for row in allowed})
            self._ranges = (allowed, [(n << shift, ((n + 1) << shift) - 1) for n in roots])
        return self._ranges[1]

    def sections_of(self, row: int, query: str) -> list[Section]:
        """A doc's sections that hold any word or literal of ``query``; its first section when none does."""
        first = row << SECTION_BITS
        terms = [f"body : {_quote(w)}" for w in dict.fromkeys(atoms(query))]
        terms += [f"literals : {_quote(encode_compound(c))}" for c in dict.fromkeys(compounds(query))]
        rowids: list[int] = []
        if terms:
            rowids = [
                r
                for (r,) in self.conn.execute(
                    "SELECT rowid FROM sections WHERE sections MATCH ? AND rowid BETWEEN ? AND ? LIMIT ?",
                    (" OR ".join(terms), first, first + MAX_SECTIONS - 1, MAX_SECTIONS),
                )
            ]
        if not rowids:
            rowids = [
                r
                for (r,) in self.conn.execute(
                    "SELECT rowid FROM sections WHERE rowid BETWEEN ? AND ? ORDER BY rowid LIMIT 1",
                    (first, first + MAX_SECTIONS - 1),
                )
            ]
        return [self._section(r) for r in rowids]

    def stats(self, words: Sequence[str], literals: Sequence[str]) -> TermStats:
        """Section count, mean section length and how many sections hold each term, over the
        whole file (as FTS5's own bm25() counts them)."""
        sections, mean = self._averages()
        if self._held_generation != self.generation:  # counted before the rows last changed
            self._held, self._held_generation = {}, self.generation
        holding: dict[str, int] = {}
        for key, term, column in [(w, w, "body") for w in words] + [
            (f"compound {c}", encode_compound(c), "literals") for c in literals
        ]:
            held = self._held.get((column, term))
            if held is None:  # a common term's count walks its whole doclist: kept while the rows are
                self.conn.execute(
                    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.sections_vocab USING fts5vocab(main, sections, 'col')"
                )
                found = self.conn.execute(
                    "SELECT doc FROM temp.sections_vocab WHERE term = ? AND col = ?", (term, column)
                ).fetchone()
                held = self._held[(column, term)] = int(found[0]) if found else 0
            holding[key] = held
        return TermStats(sections, mean, holding)

    def _averages(self) -> tuple[int, float]:
        """(rows, mean words of the body column) from FTS5's averages record (a row count and a
        token total per column, as SQLite varints); (rows counted, 0.0) if it cannot be read."""
        found = self.conn.execute("SELECT block FROM sections_data WHERE id = 1").fetchone()
        if found is not None and isinstance(found[0], bytes):
            values: list[int] = []
            at = 0
            block = found[0]
            try:
                while at < len(block) and len(values) < 2:
                    value, at = _varint(block, at)
                    values.append(value)
            except IndexError:
                values = []
            if len(values) == 2 and values[0] > 0:
                return values[0], values[1] / values[0]
        return int(self.conn.execute("SELECT count(*) FROM sections_docsize").fetchone()[0]), 0.0

    def _count(self, match: str, ranges: list[tuple[int, int]]) -> int:
        """Rows matching in ``ranges``, counted up to RANK_CAP + 1 each (cheap: no scoring)."""
        return sum(
            int(
                self.conn.execute(
                    "SELECT count(*) FROM (SELECT 1 FROM sections WHERE sections MATCH ? AND rowid BETWEEN ? AND ? LIMIT ?)",
                    (match, first, last, RANK_CAP + 1),
                ).fetchone()[0]
            )
            for first, last in ranges
        )

    def _scored(self, match: str, ranges: list[tuple[int, int]]) -> Iterator[int]:
        """Row ids of at most RANK_CAP rows matching per range, best BM25 first. Sorted by
        SQLite and read lazily: a caller that stops at its first rows never pays to move the
        rest into Python."""
        if not ranges:
            return
        one = "SELECT rowid, bm25(sections) AS score FROM sections WHERE sections MATCH ? AND rowid BETWEEN ? AND ? LIMIT ?"
        sql = " UNION ALL ".join(f"SELECT * FROM ({one})" for _ in ranges) + " ORDER BY score, rowid"
        cursor = self.conn.execute(sql, [arg for first, last in ranges for arg in (match, first, last, RANK_CAP)])
        try:
            for rowid, _ in cursor:
                yield rowid
        finally:
            cursor.close()  # an abandoned read would hold the file's read snapshot open

    def _unscored(self, match: str, ranges: list[tuple[int, int]], cap: int = RANK_CAP) -> Iterator[int]:
        """Row ids of at most ``cap`` rows matching per range, in rowid order, read lazily."""
        for first, last in ranges:
            cursor = self.conn.execute(  # capped: each row may cost its caller a fetch and a compare
                "SELECT rowid FROM sections WHERE sections MATCH ? AND rowid BETWEEN ? AND ? LIMIT ?",
                (match, first, last, cap),
            )
            try:
                for (rowid,) in cursor:
                    yield rowid
            finally:
                cursor.close()

    def _section(self, rowid: int) -> Section:
        heading, body = self.conn.execute("SELECT heading, body FROM sections WHERE rowid = ?", (rowid,)).fetchone()
        entry = self._by_row[rowid >> SECTION_BITS]
        return Section(rowid, entry.root, entry.doc_id, heading, body)

    def row_ids(self, keys: Iterable[tuple[str, str]]) -> set[int]:
        """Row ids of the given (root, doc id) keys that are indexed."""
        rows = self._rows
        return {rows[k].row for k in keys if k in rows}
