"""Search finds edits through folder watches, and without them.

With inotify (Linux) a steady query stats only the files with an event plus a rolling slice, so
these tests count the doc files stat'ed. Every change is made the way a user or another program
makes it: in place, by rename, by a new folder, by `mmap`, which inotify does not report.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from biopb_mcp.docs import changes as changes_mod
from biopb_mcp.docs.search import freshness as freshness_mod
from biopb_mcp.docs.search.freshness import ROLLING
from biopb_mcp.docs.search.query import search_docs
from biopb_mcp.docs.shelf import Shelf
from biopb_mcp.docs.store import DocStore
from biopb_mcp.docs.views import Origin
from biopb_mcp.fs import watch as watch_mod
from biopb_mcp.fs.watch import Changes, WatchUnavailable, parse_events

_OLD = 1_700_000_000
"""An mtime well in the past, so stamps are trusted and nothing is re-read for being recent."""

N_DOCS = 300
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux only")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (_OLD, _OLD))


@pytest.fixture
def store(tmp_path: Path) -> DocStore:
    local, shipped = tmp_path / "local", tmp_path / "shipped"
    _write(shipped / "index.md", "# docs\n\n## Lab\n- lab/: lab docs\n")
    for n in range(N_DOCS):
        _write(local / f"lab/g{n % 3}/doc{n}.md", f"# Doc {n}\n\n## Steps\ntok{n}z and sharedword here.\n")
    return DocStore(local, shipped_dir=shipped, version="1.0", search_db=tmp_path / "state" / "search.sqlite3")


@pytest.fixture
def doc_stats(monkeypatch: pytest.MonkeyPatch, store: DocStore) -> Iterator[Callable[[], int]]:
    """How many times a doc file was stat'ed since the last call (os.stat still runs)."""
    seen: list[str] = []
    real_stat = os.stat
    local = os.fspath(store.local_dir)

    def counting(path: object, *args: object, **kwargs: object) -> os.stat_result:
        text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else ""
        if isinstance(text, str) and text.startswith(local) and text.endswith(".md"):
            seen.append(text)
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", counting)

    def taken() -> int:
        count = len(seen)
        seen.clear()
        return count

    yield taken


def _ids(store: DocStore, query: str) -> list[str]:
    return sorted(hit.doc_id for hit in search_docs(store, query, 50))


@linux_only
def test_a_steady_query_stats_a_slice_and_still_sees_every_kind_of_change(
    store: DocStore, doc_stats: Callable[[], int]
) -> None:
    assert _ids(store, "tok7z") == ["lab/g1/doc7"]
    assert doc_stats() >= N_DOCS  # the first query checks every file
    for _ in range(3):
        assert _ids(store, "tok8z") == ["lab/g2/doc8"]
        assert doc_stats() <= ROLLING + 2  # the rolling slice, not the corpus

    local = store.local_dir
    (local / "lab/g0/doc9.md").write_text("# Doc 9\n\n## Steps\neditedinplace\n", encoding="utf-8")
    os.utime(local / "lab/g0/doc9.md", (_OLD, _OLD))  # the stamp an unwatched check would trust
    assert _ids(store, "editedinplace") == ["lab/g0/doc9"]

    tmp = local / "lab/g1/.doc10.md.tmp"
    tmp.write_text("# Doc 10\n\n## Steps\nreplacedbyrename\n", encoding="utf-8")
    os.replace(tmp, local / "lab/g1/doc10.md")
    assert _ids(store, "replacedbyrename") == ["lab/g1/doc10"]

    (local / "lab/g2/doc11.md").unlink()
    assert _ids(store, "tok11z") == []

    _write(local / "lab/new/deeper/fresh.md", "# Fresh\n\nfreshword\n")
    assert _ids(store, "freshword") == ["lab/new/deeper/fresh"]

    os.rename(local / "lab/g0", local / "lab/moved")
    assert _ids(store, "tok3z") == ["lab/moved/doc3"]
    assert _ids(store, "tok6z") == ["lab/moved/doc6"]  # a folder's docs move with it, none left at the old ids


@linux_only
def test_a_change_no_event_reports_is_found_by_the_rolling_restat(store: DocStore) -> None:
    """A write through a shared mmap raises no inotify event while the file stays mapped (the
    close event comes at unmap); the file's mtime still moves."""
    assert _ids(store, "tok5z") == ["lab/g2/doc5"]
    path = store.local_dir / "lab/g2/doc5.md"
    found_after = None
    with path.open("r+b") as f, mmap.mmap(f.fileno(), 0) as view:
        at = view.find(b"tok5z")
        view[at : at + 5] = b"mapzq"
        view.flush()
        for query in range(1, N_DOCS // ROLLING + 3):
            if _ids(store, "mapzq") == ["lab/g2/doc5"]:
                found_after = query
                break
    assert found_after is not None, "a change inotify does not report was never found"


def test_without_folder_watches_every_file_is_checked(
    store: DocStore, doc_stats: Callable[[], int], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused() -> None:
        raise WatchUnavailable(28, "inotify watch limit reached")

    monkeypatch.setattr(changes_mod, "DirWatch", refused)  # the store's change feed cannot watch
    assert _ids(store, "tok7z") == ["lab/g1/doc7"]
    doc_stats()
    (store.local_dir / "lab/g0/doc9.md").write_text("# Doc 9\n\n## Steps\nnowatchedit\n", encoding="utf-8")
    os.utime(store.local_dir / "lab/g0/doc9.md", (_OLD, _OLD))
    assert _ids(store, "nowatchedit") == ["lab/g0/doc9"]
    assert doc_stats() >= N_DOCS


def _event(wd: int, mask: int, name: bytes = b"") -> bytes:
    padded = name + b"\0" * (16 - len(name) % 16) if name else b""  # NUL-padded, as the kernel does
    return struct.pack("iIII", wd, mask, 0, len(padded)) + padded


def test_events_name_files_and_flag_lost_or_structural_changes() -> None:
    folders = {1: "/docs/lab", 2: "/docs/gone"}
    found = Changes()
    parse_events(_event(1, watch_mod.IN_CLOSE_WRITE, b"a.md") + _event(1, watch_mod.IN_ATTRIB, b"b.md"), folders, found)
    assert found == Changes(paths={"/docs/lab/a.md", "/docs/lab/b.md"}, complete=True)
    parse_events(_event(1, watch_mod.IN_CREATE | watch_mod.IN_ISDIR, b"sub"), folders, found)
    assert found.folders == {"/docs/lab/sub"} and found.created == {"/docs/lab/sub"} and found.complete
    parse_events(_event(2, watch_mod.IN_DELETE_SELF) + _event(2, watch_mod.IN_IGNORED), folders, found)
    assert not found.complete and folders == {1: "/docs/lab"}
    overflow = Changes()
    parse_events(_event(-1, watch_mod.IN_Q_OVERFLOW), folders, overflow)
    assert not overflow.complete
    unknown = Changes()
    parse_events(_event(9, watch_mod.IN_MODIFY, b"x.md"), folders, unknown)
    assert unknown == Changes()


class _CountingWalks(Shelf):
    walks = 0

    def doc_entries(self) -> list[tuple[str, str, Origin]]:
        self.walks += 1
        return super().doc_entries()


def _store_with(shelf: Shelf, store: DocStore) -> DocStore:
    """A store over the same tiers and index file whose shelf is ``shelf`` (a subclass that counts
    or interferes): the listing reads through it too."""
    made = DocStore(store.local_dir, shipped_dir=store.shipped_dir, version="1.0", search_db=store.search_db)
    made.shelf = made.listing.shelf = shelf
    return made


@linux_only
def test_a_write_to_a_listed_doc_keeps_the_doc_list_a_new_doc_walks_it_once(store: DocStore) -> None:
    """An atomic write renames a temp file over the doc: its folder's stamp moves, yet no doc came
    or went, so the events say no new walk is needed; a new doc needs one."""
    walks = _CountingWalks(store.local_dir, store.shipped_dir)
    counting = _store_with(walks, store)
    for _ in range(2):  # the first use seeds the local index, which the next query walks again for
        assert _ids(counting, "tok4z") == ["lab/g1/doc4"]
    walked = walks.walks
    counting.write_doc("lab/g1/doc4", body="# Doc 4\n\n## Steps\nrewrittenword\n")
    assert _ids(counting, "rewrittenword") == ["lab/g1/doc4"]
    assert _ids(counting, "tok4z") == []
    assert walks.walks == walked
    counting.write_doc("lab/g1/brandnew", body="# New\n\n## Steps\nbrandnewword\n")
    assert _ids(counting, "brandnewword") == ["lab/g1/brandnew"]
    assert _ids(counting, "brandnewword") == ["lab/g1/brandnew"]
    assert walks.walks == walked + 1


@linux_only
def test_removing_a_local_copy_brings_back_the_shipped_doc_it_shadowed(tmp_path: Path) -> None:
    """With more docs than the rolling re-stat covers in one query: the new walk itself must
    check the doc that became surfaced (no event names its file)."""
    local, shipped = tmp_path / "local", tmp_path / "shipped"
    _write(shipped / "index.md", "# docs\n\n## References\n- ref/kernel: the kernel\n- lab/: lab docs\n")
    for n in range(3 * ROLLING):
        _write(local / f"lab/doc{n}.md", f"# Doc {n}\n\n## Steps\nfiller {n}\n")
    _write(shipped / "ref/kernel.md", "# Kernel\n\n## Use\nshippedword in the release text\n")
    _write(local / "ref/kernel.md", "# Kernel\n\n## Use\nlocalword in the lab's copy\n")
    store = DocStore(local, shipped_dir=shipped, version="1.0", search_db=tmp_path / "search.sqlite3")
    for _ in range(2):  # the second query runs on the folder watches
        assert [(h.doc_id, h.origin) for h in search_docs(store, "localword")] == [("ref/kernel", Origin.SHADOW)]
        assert _ids(store, "shippedword") == []
    (local / "ref/kernel.md").unlink()
    assert [(h.doc_id, h.origin) for h in search_docs(store, "shippedword")] == [("ref/kernel", "shipped")]
    assert _ids(store, "localword") == []


@linux_only
def test_a_doc_newly_listed_in_the_index_is_searched_at_once(store: DocStore) -> None:
    _write(store.local_dir / "zz/notes.md", "# Notes\n\n## Found\nnoteword unlisted so far\n")
    for _ in range(2):
        assert _ids(store, "noteword") == []  # not surfaced: the index does not list it
    store.write_doc("index", old="- lab/: lab docs", new="- lab/: lab docs\n- zz/notes: notes")
    assert _ids(store, "noteword") == ["zz/notes"]


@linux_only
def test_a_tier_root_that_is_a_link_still_shows_every_edit(tmp_path: Path) -> None:
    real, shipped = tmp_path / "real", tmp_path / "shipped"
    _write(shipped / "index.md", "# docs\n\n## Top\n" + "".join(f"- top{n}: t\n" for n in range(3 * ROLLING)))
    for n in range(3 * ROLLING):
        _write(real / f"top{n}.md", f"# Top {n}\n\n## S\ntop{n}z alpha\n")
    (tmp_path / "local").symlink_to(real, target_is_directory=True)
    store = DocStore(tmp_path / "local", shipped_dir=shipped, version="1.0", search_db=tmp_path / "s.sqlite3")
    for _ in range(2):
        assert _ids(store, "top5z") == ["top5"]
    store.write_doc("top5", body="# Top 5\n\n## S\nnewword5 alpha\n")
    assert (_ids(store, "newword5"), _ids(store, "top5z")) == (["top5"], [])
    (real / "top150.md").write_text("# Top 150\n\n## S\nhandedit150 alpha\n", encoding="utf-8")
    os.utime(real / "top150.md", (_OLD, _OLD))
    assert _ids(store, "handedit150") == ["top150"]


@linux_only
def test_rows_another_server_commits_during_a_refresh_are_checked_next(store: DocStore) -> None:
    """Another server read a doc before a hand edit and commits its row while this server is
    indexing something else: the next query compares that row with the disk, not trusting it."""
    from functools import partial

    from biopb_mcp.docs.search.fts import FtsIndex, digest
    from biopb_mcp.docs.search.sections import split_sections
    from biopb_mcp.fs.stamps import stamp

    class Racing(Shelf):
        other: FtsIndex | None = None
        late: tuple[str, tuple[int, int, int], str] | None = None

        def texts(self, doc_ids: object) -> object:  # type: ignore[override]
            if self.other is not None and self.late is not None:
                doc_id, at, text = self.late
                with self.other.writing():  # the other server's late batch lands now
                    self.other.put(
                        os.fspath(self.local_dir),
                        doc_id,
                        at,
                        digest(text),
                        True,
                        partial(split_sections, doc_id, text),
                    )
                self.late = None
            return super().texts(doc_ids)  # type: ignore[arg-type]

    race = Racing(store.local_dir, store.shipped_dir)
    racing = _store_with(race, store)
    for _ in range(2):
        assert _ids(racing, "tok5z") == ["lab/g2/doc5"]
    path = store.local_dir / "lab/g2/doc5.md"
    read_at = stamp(path)
    assert read_at is not None
    read_by_other = (read_at, path.read_text(encoding="utf-8"))
    _write(path, "# Doc 5\n\n## Steps\nhandword5 replaced it\n")
    os.utime(path, (_OLD + 100, _OLD + 100))
    assert _ids(racing, "handword5") == ["lab/g2/doc5"]
    _write(store.local_dir / "lab/g0/doc6.md", "# Doc 6\n\n## Steps\nsixchanged\n")
    race.other = FtsIndex(store.search_db)
    race.late = ("lab/g2/doc5", read_by_other[0], read_by_other[1])
    assert _ids(racing, "sixchanged") == ["lab/g0/doc6"]
    assert (_ids(racing, "handword5"), _ids(racing, "tok5z")) == (["lab/g2/doc5"], [])
    race.other.close()


@linux_only
def test_an_edit_made_while_another_process_holds_the_index_lock_is_found_at_once_and_later(
    store: DocStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write-locked shared index stalls a search only a short while: the changed doc is searched
    directly meanwhile (its stale rows left out), and indexed once the lock is free."""
    import sqlite3

    from biopb_mcp.docs.search import fts

    monkeypatch.setattr(fts, "BUSY_TIMEOUT_S", 0.2)
    monkeypatch.setattr(freshness_mod, "ROLLING", 1)  # the rolling re-stat must not be what finds it
    for _ in range(2):
        assert _ids(store, "tok5z") == ["lab/g2/doc5"]
    _write(store.local_dir / "lab/g2/doc5.md", "# Doc 5\n\n## Steps\nhandword5\n")
    os.utime(store.local_dir / "lab/g2/doc5.md", (_OLD + 9, _OLD + 9))
    assert store.search_db is not None
    other = sqlite3.connect(os.fspath(store.search_db), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock past the busy timeout
    assert (_ids(store, "handword5"), _ids(store, "tok5z")) == (["lab/g2/doc5"], [])
    assert search_docs(store, "doc 5")[0].doc_id == "lab/g2/doc5"  # its title, read directly too
    other.execute("ROLLBACK")
    other.close()
    assert (_ids(store, "handword5"), _ids(store, "tok5z")) == (["lab/g2/doc5"], [])


@linux_only
def test_the_store_owns_its_search_and_closing_it_releases_the_watch(store: DocStore) -> None:
    """No index or watch outlives its store in a process-wide cache: each store's search is its own."""
    assert _ids(store, "tok4z") == ["lab/g1/doc4"]
    assert store.changes.readers == 1  # search follows the store's change feed
    other = DocStore(store.local_dir, shipped_dir=store.shipped_dir, version="1.0")
    assert _ids(other, "tok5z") == ["lab/g2/doc5"]
    assert other.search is not store.search and store.changes.readers == 1
    store.close()
    assert store.changes.readers == 0
    assert _ids(store, "tok6z") == ["lab/g0/doc6"]  # reopened by the next search
    assert store.changes.readers == 1
