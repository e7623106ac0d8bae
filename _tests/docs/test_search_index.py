"""The search index on disk: reuse across restarts, per-file refresh, recovery, and sharing.

A "restart" is a new Python process over the same docs and index file, as a server restart is;
the doc reads it makes are counted by a DocStore whose texts() (search's one way to read docs)
counts the docs it is asked for.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from biopb_mcp.docs.search import fts
from biopb_mcp.docs.search import query as search_mod
from biopb_mcp.docs.search.query import search_docs
from biopb_mcp.docs.store import DocStore
from biopb_mcp.errors import SearchUnavailable
from biopb_mcp.text.doc_views import read_doc

_OLD = 1_700_000_000
"""An mtime well in the past: a file not edited this second, so its stamp can be trusted."""

_CHILD = textwrap.dedent("""\
    import json, sys
    from pathlib import Path
    from biopb_mcp.docs.search.query import search_docs
    from biopb_mcp.docs.shelf import Shelf
    from biopb_mcp.docs.store import DocStore

    class CountingShelf(Shelf):
        reads = 0

        def texts(self, doc_ids):
            CountingShelf.reads += len(doc_ids)
            return super().texts(doc_ids)

    local, shipped, db = (Path(a) for a in sys.argv[1:4])
    store = DocStore(local, shipped_dir=shipped, version="1.0", search_db=db)
    store.shelf = store.listing.shelf = CountingShelf(local, shipped)  # the reads search makes
    hits = {q: sorted(h.doc_id for h in search_docs(store, q, 50)) for q in sys.argv[4:]}
    print(json.dumps({"reads": CountingShelf.reads, "hits": hits}))
""")


def _write(path: Path, text: str, mtime: int | None = _OLD) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))


@pytest.fixture
def tiers(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(local, shipped, db): ten listed local docs, each with its own word, and an empty shipped tier."""
    local, shipped = tmp_path / "local", tmp_path / "shipped"
    _write(shipped / "index.md", "# docs\n\n## Lab\n- lab/: lab docs\n")
    for n in range(10):
        _write(local / f"lab/doc{n}.md", f"# Doc {n}\n\n## Steps\nuniqword{n} and sharedword here.\n")
    return local, shipped, tmp_path / "state" / "search.sqlite3"


def _run_child(tiers: tuple[Path, Path, Path], *queries: str) -> dict:
    local, shipped, db = tiers
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(local), str(shipped), str(db), *queries],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_restart_reuses_the_index_and_refreshes_only_changed_files(tiers: tuple[Path, Path, Path]) -> None:
    local, _, db = tiers
    first = _run_child(tiers, "sharedword", "uniqword3")
    assert first["reads"] == 10
    assert len(first["hits"]["sharedword"]) == 10
    assert db.is_file()

    again = _run_child(tiers, "sharedword", "uniqword3")
    assert again == {"reads": 0, "hits": first["hits"]}  # nothing re-read after a restart

    _write(local / "lab/doc3.md", "# Doc 3\n\n## Steps\nreplacedword now.\n", mtime=_OLD + 60)
    edited = _run_child(tiers, "uniqword3", "replacedword", "sharedword")
    assert edited["reads"] == 1
    assert edited["hits"] == {
        "uniqword3": [],
        "replacedword": ["lab/doc3"],
        "sharedword": sorted(f"lab/doc{n}" for n in range(10) if n != 3),
    }

    (local / "lab/doc5.md").unlink()
    deleted = _run_child(tiers, "uniqword5", "sharedword")
    assert deleted["reads"] == 0
    assert deleted["hits"]["uniqword5"] == []
    assert "lab/doc5" not in deleted["hits"]["sharedword"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM docs WHERE doc_id = 'lab/doc5'").fetchone() == (0,)


def test_a_corrupt_index_file_is_rebuilt_with_a_log_line(
    tiers: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    local, shipped, db = tiers
    db.parent.mkdir(parents=True)
    db.write_bytes(b"this is not a database, just garbage " * 200)
    store = DocStore(local, shipped_dir=shipped, version="1.0", search_db=db)
    with caplog.at_level(logging.WARNING, logger="biopb_mcp.docs.search.fts"):
        hits = search_docs(store, "uniqword7")
    assert [h.doc_id for h in hits] == ["lab/doc7"]
    assert any("unreadable" in r.getMessage() and str(db) in r.getMessage() for r in caplog.records)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM docs WHERE doc_id != 'index'").fetchone() == (10,)


def test_an_index_file_replaced_by_garbage_while_open_is_rebuilt(
    tiers: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    local, shipped, db = tiers
    store = DocStore(local, shipped_dir=shipped, version="1.0", search_db=db)
    assert len(search_docs(store, "sharedword", 50)) == 10
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    replacement = db.with_name("garbage")
    replacement.write_bytes(b"\x00garbage" * 4096)
    os.replace(replacement, db)  # a new file under the name: the open connection still reads the old one
    _write(local / "lab/doc1.md", "# Doc 1\n\n## Steps\nfreshword\n", mtime=_OLD + 60)
    with caplog.at_level(logging.WARNING, logger="biopb_mcp.docs.search.fts"):
        assert [h.doc_id for h in search_docs(store, "freshword")] == ["lab/doc1"]
        assert len(search_docs(store, "sharedword", 50)) == 9
    assert any("rebuilding" in r.getMessage() for r in caplog.records)


def test_an_index_of_another_schema_is_rebuilt(
    tiers: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    local, shipped, db = tiers
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE docs (path TEXT, words TEXT)")
        conn.execute("INSERT INTO docs VALUES ('lab/doc1', 'stale')")
        conn.execute("PRAGMA user_version = 0")
    store = DocStore(local, shipped_dir=shipped, version="1.0", search_db=db)
    with caplog.at_level(logging.INFO, logger="biopb_mcp.docs.search.fts_file"):
        assert [h.doc_id for h in search_docs(store, "uniqword2")] == ["lab/doc2"]
    assert any("schema 0" in r.getMessage() for r in caplog.records)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (fts.SCHEMA_VERSION,)


def test_without_fts5_search_says_why_and_the_store_still_works(
    tiers: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    local, shipped, _ = tiers

    def no_fts5() -> None:  # what a Python built against an SQLite without FTS5 raises
        raise sqlite3.OperationalError("no such module: fts5")

    monkeypatch.setattr(fts, "fts5_probe", no_fts5)
    store = DocStore(local, shipped_dir=shipped, version="1.0", search_db=local.parent / "nofts" / "s.sqlite3")
    with pytest.raises(SearchUnavailable, match="FTS5") as caught:
        search_docs(store, "uniqword1")
    assert "no such module: fts5" in str(caught.value)
    assert "uniqword1" in read_doc(store, "lab/doc1")
    store.write_doc("lab/doc1", old="uniqword1", new="otherword1")
    assert "otherword1" in read_doc(store, "lab/doc1")


def test_an_index_file_that_cannot_be_created_falls_back_to_memory(
    tiers: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    local, shipped, _ = tiers
    blocker = local.parent / "not-a-dir"
    blocker.write_text("a file where the state dir should be", encoding="utf-8")
    store = DocStore(local, shipped_dir=shipped, version="1.0", search_db=blocker / "search.sqlite3")
    with caplog.at_level(logging.WARNING, logger="biopb_mcp.docs.search.query"):
        assert [h.doc_id for h in search_docs(store, "uniqword4")] == ["lab/doc4"]
    assert any("in memory" in r.getMessage() for r in caplog.records)


def test_a_settled_tier_still_shows_every_added_removed_and_edited_doc_at_once(tiers: tuple[Path, Path, Path]) -> None:
    """The doc list is kept while no folder changed: an added or removed file changes its folder."""
    local, shipped, db = tiers
    for folder in (local, local / "lab", shipped):
        os.utime(folder, (_OLD, _OLD))
    store = DocStore(local, shipped_dir=shipped, version="1.0", search_db=db)
    assert len(search_docs(store, "sharedword", 50)) == 10  # seeds the local index: the root changes
    for path in (local, store.shelf.index_path, store.listing.manifest_path):
        os.utime(path, (_OLD, _OLD))
    assert len(search_docs(store, "sharedword", 50)) == 10  # now every stamp is old: the list is kept
    _write(local / "lab/new.md", "# New\n\nnewword\n", mtime=_OLD)
    assert [h.doc_id for h in search_docs(store, "newword")] == ["lab/new"]
    (local / "lab/new.md").unlink()
    assert search_docs(store, "newword") == []
    _write(local / "lab/doc2.md", "# Doc 2\n\n## Steps\nedited in place, longer than before\n", mtime=_OLD)
    assert [h.doc_id for h in search_docs(store, "edited in place")] == ["lab/doc2"]
    nested = local / "lab" / "deeper"
    nested.mkdir()
    os.utime(nested, (_OLD, _OLD))
    os.utime(local / "lab", (_OLD, _OLD))
    assert len(search_docs(store, "sharedword", 50)) == 9
    _write(nested / "inner.md", "# Inner\n\ninnerword\n", mtime=_OLD)  # only the new folder changes
    assert [h.doc_id for h in search_docs(store, "innerword")] == ["lab/deeper/inner"]


def test_stores_sharing_an_index_file_score_only_their_own_rows(
    tiers: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another store's rows never take the places a capped scoring pass has."""
    local, shipped, db = tiers
    monkeypatch.setattr(fts, "RANK_CAP", 4)  # fewer than the first store's ten matching sections
    first = DocStore(local, shipped_dir=shipped, version="1.0", search_db=db)
    assert len(search_docs(first, "sharedword", 50)) == 4
    other_local = tmp_path / "other"
    for n in range(2):
        _write(other_local / f"lab/mine{n}.md", f"# Mine {n}\n\nsharedword too\n")
    second = DocStore(other_local, shipped_dir=shipped, version="1.0", search_db=db)
    assert sorted(h.doc_id for h in search_docs(second, "sharedword", 50)) == ["lab/mine0", "lab/mine1"]
    assert sorted(h.doc_id for h in search_docs(second, "sharedword too", 50)) == ["lab/mine0", "lab/mine1"]


def test_a_phrase_too_common_to_score_still_comes_first(
    tiers: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A phrase in more sections than a pass scores is listed unscored, in index order (bm25 would
    first count every section holding it); a rarer phrase is still ranked."""
    local, shipped, db = tiers
    monkeypatch.setattr(fts, "RANK_CAP", 4)  # the phrase "sharedword here" is in ten sections
    _write(local / "lab/near.md", "# Near\n\n## Steps\nsharedword sharedword sharedword, then here.\n")
    store = DocStore(local, shipped_dir=shipped, version="1.0", search_db=db)
    hits = search_docs(store, "sharedword here", 4)
    assert [h.doc_id for h in hits] == [f"lab/doc{n}" for n in range(4)]  # the first in walk order
    assert hits == sorted(hits, key=lambda h: -h.score)
    near = search_docs(store, "sharedword sharedword", 4)  # a phrase only lab/near holds
    assert [h.doc_id for h in near][:1] == ["lab/near"]


_WRITER = textwrap.dedent("""\
    import sys
    from pathlib import Path
    from biopb_mcp.docs.search.query import search_docs
    from biopb_mcp.docs.store import DocStore

    local, db, me, other, rounds = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
    store = DocStore(local, shipped_dir=local / "no-shipped", version="1.0", search_db=db)
    for n in range(rounds):
        store.write_doc(f"{me}/d{n}", body=f"# {me} {n}\\n\\nword{me} number{n}\\n")
        mine = {h.doc_id for h in search_docs(store, f"word{me}", 50)}
        assert f"{me}/d{n}" in mine, (n, sorted(mine))  # its own write is seen at once
        search_docs(store, f"word{other}", 50)  # the other's rows, as they are being written
    print("ok")
""")


def test_two_processes_write_and_search_one_index_at_once(tmp_path: Path) -> None:
    local, db = tmp_path / "local", tmp_path / "state" / "search.sqlite3"
    _write(local / "index.md", "# docs\n\n## Lab\n- pa/: a\n- pb/: b\n", mtime=None)
    rounds = 12
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(local), str(db), me, other, str(rounds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for me, other in (("pa", "pb"), ("pb", "pa"))
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0 and out.strip() == "ok", err
    store = DocStore(local, shipped_dir=local / "no-shipped", version="1.0", search_db=db)
    for me in ("pa", "pb"):
        assert sorted(h.doc_id for h in search_docs(store, f"word{me}", 50)) == sorted(
            f"{me}/d{n}" for n in range(rounds)
        )


def test_a_row_id_is_never_given_twice(tmp_path: Path) -> None:
    """A server that read row ids before another dropped a doc must not meet a new doc's sections
    under the dropped doc's id."""
    index = fts.FtsIndex(tmp_path / "search.sqlite3")
    sections = [("Steps", "## Steps\nsome text\n")]

    def put(doc_id: str) -> int:
        with index.writing():
            index.put("/tier", doc_id, (1, 1, 1), fts.digest(doc_id), True, lambda: sections)
        return index.rows()[("/tier", doc_id)].row

    first, last = put("a"), put("b")
    with index.writing():
        index.drop([("/tier", "b")])
    again = fts.FtsIndex(tmp_path / "search.sqlite3")  # another server, or this one restarted
    with again.writing():
        again.put("/tier", "c", (1, 1, 1), fts.digest("c"), True, lambda: sections)
    assert len({first, last, again.rows()[("/tier", "c")].row}) == 3
    index.close()
    again.close()


def test_an_index_another_release_rebuilt_under_its_schema_is_taken_back(tiers: tuple[Path, Path, Path]) -> None:
    """Servers of two releases may share a state dir: a file rebuilt under another layout while
    this server has it open is rebuilt again at the next search, never an error."""
    local, shipped, db = tiers
    store = DocStore(local, shipped_dir=shipped, version="1.0", search_db=db)
    assert len(search_docs(store, "sharedword", 50)) == 10
    with sqlite3.connect(db) as conn:  # what a release without roots.last_doc does to the file
        conn.execute("DROP TABLE roots")
        conn.execute("CREATE TABLE roots (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE)")
        conn.execute("PRAGMA user_version = 1")
    _write(local / "lab/new.md", "# New\n\n## Steps\nnewword\n")
    assert [h.doc_id for h in search_docs(store, "newword")] == ["lab/new"]
    assert len(search_docs(store, "sharedword", 50)) == 10


def _another_apps_database(path: Path) -> bytes:
    """A database of some other program: its tables, its rows, its bytes (to prove them unchanged)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
        conn.execute("CREATE TABLE docs (id INTEGER PRIMARY KEY, note TEXT)")  # a name ours uses too
        conn.executemany("INSERT INTO moz_places (url) VALUES (?)", [(f"https://example.org/{n}",) for n in range(50)])
    conn.close()
    return path.read_bytes()


@pytest.mark.parametrize("how", ["link", "file"])
def test_another_apps_database_at_the_index_path_is_never_modified(
    tiers: tuple[Path, Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    """Linked to, or sitting at, the index's name: left alone byte for byte; search answers from
    an index in memory and the log says why."""
    local, shipped, db = tiers
    foreign = tmp_path / "other-app" / "places.sqlite" if how == "link" else db
    before = _another_apps_database(foreign)
    if how == "link":
        db.parent.mkdir(parents=True, exist_ok=True)
        db.symlink_to(foreign)
    store = DocStore(local, shipped_dir=shipped, version="1.0", search_db=db)
    with caplog.at_level(logging.WARNING, logger="biopb_mcp.docs.search.fts"):
        assert [h.doc_id for h in search_docs(store, "uniqword3")] == ["lab/doc3"]
    assert foreign.read_bytes() == before
    assert not Path(f"{foreign}-wal").exists() and not Path(f"{foreign}-shm").exists()
    with sqlite3.connect(foreign) as conn:
        assert conn.execute("SELECT count(*) FROM moz_places").fetchone() == (50,)
    conn.close()
    assert (db.is_symlink()) == (how == "link")
    assert any("in memory" in r.getMessage() and str(db) in r.getMessage() for r in caplog.records)


def test_the_index_and_its_sidecars_are_private_in_a_shared_state_dir(tiers: tuple[Path, Path, Path]) -> None:
    """A configured state dir others may read: the index holds doc text, as its -wal does."""
    local, shipped, db = tiers
    db.parent.mkdir(parents=True)
    db.parent.chmod(0o755)
    old_umask = os.umask(0o022)
    try:
        store = DocStore(local, shipped_dir=shipped, version="1.0", search_db=db)
        assert [h.doc_id for h in search_docs(store, "uniqword5")] == ["lab/doc5"]
        files = [p for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]
        assert len(files) == 3
        assert {oct(p.stat().st_mode & 0o777) for p in files} == {oct(0o600)}
    finally:
        os.umask(old_umask)


def test_an_index_left_readable_by_an_older_release_is_made_private(tiers: tuple[Path, Path, Path]) -> None:
    local, shipped, db = tiers
    store = DocStore(local, shipped_dir=shipped, version="1.0", search_db=db)
    assert len(search_docs(store, "sharedword", 50)) == 10
    for corpus in search_mod._corpora.values():  # as a restart: the next search opens the file again
        corpus.close()
    search_mod._corpora.clear()
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{db}{suffix}").exists():
            Path(f"{db}{suffix}").chmod(0o644)
    again = DocStore(local, shipped_dir=shipped, version="1.0", search_db=db)
    assert len(search_docs(again, "sharedword", 50)) == 10
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{db}{suffix}").exists():
            assert Path(f"{db}{suffix}").stat().st_mode & 0o077 == 0, suffix
