"""The resources walk over a real DocStore in tmp dirs: order, cursor, gaps, bad files."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from _tests.support.doc_corpus import make_corpus as make_local_corpus
from biopb_mcp.docs.lint import Lint
from biopb_mcp.docs.resources import (
    INDEX_URI,
    PAGE_SIZE,
    Listing,
    doc_uri,
    list_page,
    parse_cursor,
    walk,
)
from biopb_mcp.docs.store import DocStore
from biopb_mcp.errors import DocProblem, DocUnreadable, InvalidCursor, InvalidDocId


def make_corpus(root: Path, n: int) -> tuple[DocStore, list[str]]:
    """A store over the shared corpus: ``n`` listed docs with nested ids."""
    local, shipped, ids = make_local_corpus(root, n)
    return DocStore(local, shipped_dir=shipped), ids


def test_walk_is_index_then_listed_ids_in_id_order(tmp_path: Path) -> None:
    store, ids = make_corpus(tmp_path, 250)
    pages = []
    cursor = None
    while True:
        page = list_page(store, cursor)
        pages.append(page)
        if page.next_cursor is None:
            break
        assert page.next_cursor == page.entries[-1].uri  # the cursor is the last URI of the page
        cursor = page.next_cursor
    assert [len(p.entries) for p in pages] == [PAGE_SIZE, PAGE_SIZE, 51]
    uris = [e.uri for p in pages for e in p.entries]
    assert uris == [INDEX_URI] + [doc_uri(i) for i in ids]
    first = pages[0].entries[1]
    assert first.name.startswith("Title ") and first.description.startswith("What doc")
    assert first.mime_type == "text/markdown"


def test_cursor_is_stateless_across_store_objects(tmp_path: Path) -> None:
    store, _ = make_corpus(tmp_path, 150)
    page1 = list_page(store)
    again = DocStore(store.local_dir, shipped_dir=store.shipped_dir)  # a "restarted" store
    assert list_page(again, page1.next_cursor) == list_page(store, page1.next_cursor)


def test_doc_indexed_behind_the_cursor_is_left_out_of_the_walk(tmp_path: Path) -> None:
    store, ids = make_corpus(tmp_path, 150)
    page1 = list_page(store)
    store.write_doc("aaa/new", body="# New\n\nA new doc.\n")  # sorts before every cursor
    assert "aaa/new" in store.listed_ids()
    page2 = list_page(store, page1.next_cursor)
    walked = [e.uri for e in page1.entries + page2.entries]
    assert walked == [INDEX_URI] + [doc_uri(i) for i in ids]  # no duplicate, no gap
    assert page2.next_cursor is None
    assert doc_uri("aaa/new") in [e.uri for e in walk(store)]  # a fresh walk has it


def test_cursor_naming_a_vanished_doc_still_resumes(tmp_path: Path) -> None:
    store, ids = make_corpus(tmp_path, 120)
    page1 = list_page(store)
    last = page1.entries[-1].uri.removeprefix("biopb://docs/")
    (store.local_dir / f"{last}.md").unlink()
    rest = list_page(store, page1.next_cursor)
    assert [e.uri for e in rest.entries] == [doc_uri(i) for i in ids[ids.index(last) + 1 :]]


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "garbage",
        "file:///etc/passwd",
        "biopb://docs/",
        "biopb://docs/a b",
        "biopb://docs/x@diff",
        "biopb://docs/../up",
    ],
)
def test_malformed_cursor_is_refused(tmp_path: Path, cursor: str) -> None:
    store, _ = make_corpus(tmp_path, 3)
    with pytest.raises(InvalidCursor, match="cursor"):
        list_page(store, cursor)


def test_parse_cursor_index_restarts_at_docs() -> None:
    assert parse_cursor(INDEX_URI) is None
    assert parse_cursor("biopb://docs/a/b-c.d") == "a/b-c.d"


def test_unreadable_doc_is_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store, ids = make_corpus(tmp_path, 5)
    bad = ids[2]
    (store.local_dir / f"{bad}.md").write_bytes(b"# Bad\n\n\xff\xfe not utf-8\n")
    with caplog.at_level(logging.WARNING, logger="biopb_mcp.docs.resources"):
        uris = [e.uri for e in walk(store)]
    assert doc_uri(bad) not in uris
    assert len(uris) == 1 + 4
    assert any(bad in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


def test_unreadable_last_doc_gives_no_empty_next_page(tmp_path: Path) -> None:
    store, ids = make_corpus(tmp_path, PAGE_SIZE)  # index + 99 docs on page 1, one doc left over
    (store.local_dir / f"{ids[-1]}.md").write_bytes(b"\xff\xfe")
    page = list_page(store)
    assert len(page.entries) == PAGE_SIZE and page.next_cursor is None


def backdate(root: Path) -> None:
    """Age every file and directory by an hour, as a corpus that predates the server would be."""
    old = time.time() - 3600
    for top, _dirs, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(top, name), (old, old))
        os.utime(top, (old, old))


def titles(listing: Listing) -> dict[str, str]:
    out: dict[str, str] = {}
    cursor = None
    while True:
        page = listing.page(cursor)
        out.update((e.uri, e.name) for e in page.entries)
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


def test_listing_cache_is_reused_and_sees_every_kind_of_change(tmp_path: Path) -> None:
    store, ids = make_corpus(tmp_path, 30)
    index = store.local_dir / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + "- grp1/later: not written yet\n", encoding="utf-8")
    store.listed_ids()  # first access writes the manifest
    backdate(tmp_path)
    listing = Listing(store)
    first = titles(listing)
    assert titles(listing) == first and listing.rebuilds == 1  # nothing changed: ids computed once

    (store.local_dir / f"{ids[3]}.md").write_text("# Renamed by hand\n\nSame doc.\n", encoding="utf-8")
    assert titles(listing)[doc_uri(ids[3])] == "Renamed by hand"  # a doc edit: its entry refreshed

    (store.local_dir / "grp1" / "later.md").write_text("# Later\n", encoding="utf-8")  # index untouched
    assert titles(listing).get(doc_uri("grp1/later")) == "Later"  # a file appearing in a known dir

    (store.local_dir / f"{ids[5]}.md").unlink()
    assert doc_uri(ids[5]) not in titles(listing)  # a file vanishing

    (store.local_dir / "newgrp").mkdir()
    (store.local_dir / "newgrp" / "x.md").write_text("# X\n", encoding="utf-8")
    with index.open("a", encoding="utf-8") as f:
        f.write("- newgrp/x: added by hand\n")
    assert titles(listing).get(doc_uri("newgrp/x")) == "X"  # a new directory and index line


def test_an_index_entry_naming_index_is_not_listed_twice_nor_loops_the_walk(tmp_path: Path) -> None:
    """`index` is the index, not a doc: a `- index: …` line must not add a second index resource.

    Its URI equals the index's, so a page ending on it handed back a cursor that restarts the walk.
    """
    store, ids = make_corpus(tmp_path, 3)
    with (store.local_dir / "index.md").open("a", encoding="utf-8") as fh:
        fh.write("- index: this very file\n")
    listing = Listing(store)
    uris: list[str] = []
    cursor = None
    for _ in range(10):  # bounded: the bug made this walk endless
        page = listing.page(cursor, page_size=2)
        uris += [e.uri for e in page.entries]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert cursor is None
    assert uris == [INDEX_URI] + [doc_uri(i) for i in ids]
    assert "index" not in store.listed_ids()


def test_indexed_symlink_leaving_the_tier_is_skipped_not_fatal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An index entry naming a local symlink to a file outside the tier: the store refuses to read
    it, and the listing skips it with a warning like any unreadable file, never failing the page."""
    store, ids = make_corpus(tmp_path, 3)
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\n\nnot a doc\n", encoding="utf-8")
    os.symlink(outside, store.local_dir / "escape.md")
    with (store.local_dir / "index.md").open("a", encoding="utf-8") as fh:
        fh.write("- escape: points outside\n")
    with caplog.at_level(logging.WARNING, logger="biopb_mcp.docs.resources"):
        uris = [e.uri for e in walk(store)]
    assert uris == [INDEX_URI] + [doc_uri(i) for i in ids]
    assert any("escape" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    escapes = [p.facts["error"] for p in store.check() if p.kind is Lint.INDEX_ESCAPES]
    assert [(e.kind, e.doc_id) for e in escapes if isinstance(e, InvalidDocId)] == [(DocProblem.ESCAPES_TIER, "escape")]


def test_batch_reads_open_each_folder_once_yet_keep_shadowing_links_and_bad_files(tmp_path: Path) -> None:
    """`DocStore.summaries` (a page's batch read) answers as `info` does, and `DocStore.texts` as
    `doc_text` does, for every kind of place."""
    local, shipped, outside = tmp_path / "local", tmp_path / "shipped", tmp_path / "outside"
    for folder in (local / "lab", shipped / "ref", outside):
        folder.mkdir(parents=True)
    (shipped / "index.md").write_text("# docs\n", encoding="utf-8")
    (shipped / "ref" / "both.md").write_text("# Shipped title\n", encoding="utf-8")
    (shipped / "ref" / "only.md").write_text("# Only shipped\n", encoding="utf-8")
    (local / "ref").mkdir()
    (local / "ref" / "both.md").write_text("# Local title\n", encoding="utf-8")
    (local / "lab" / "plain.md").write_text("# Plain\n", encoding="utf-8")
    (local / "lab" / "alias.md").symlink_to(local / "lab" / "plain.md")  # a link that stays inside
    (local / "lab" / "binary.md").write_bytes(b"\x00\x01 not text")
    (outside / "secret.md").write_text("# SECRET outside the tier\n", encoding="utf-8")
    (local / "away").symlink_to(outside, target_is_directory=True)  # a folder leading out
    store = DocStore(local, shipped_dir=shipped)
    ids = ["away/secret", "lab/alias", "lab/binary", "lab/gone", "lab/plain", "ref/both", "ref/only"]

    batch = store.shelf.summaries(ids)

    assert list(batch) == ["away/secret", "lab/alias", "lab/binary", "lab/plain", "ref/both", "ref/only"]
    titles = {doc_id: getattr(found, "title", None) for doc_id, found in batch.items()}
    assert titles == {
        "away/secret": None,
        "lab/alias": "Plain",
        "lab/binary": None,
        "lab/plain": "Plain",
        "ref/both": "Local title",
        "ref/only": "Only shipped",
    }
    for doc_id in ("away/secret", "lab/binary", "lab/alias", "lab/plain", "ref/both", "ref/only"):
        try:
            single = store.info(doc_id).title
        except (DocUnreadable, InvalidDocId):
            single = None
        assert titles[doc_id] == single, doc_id
    again = {doc_id: getattr(found, "title", None) for doc_id, found in store.shelf.summaries(ids).items()}
    assert again == titles  # the second read comes from the cache, unchanged

    texts = store.shelf.texts(ids)  # the same batch read for whole texts (search indexing)
    assert list(texts) == list(batch)
    for doc_id, text in texts.items():
        try:
            expected: object = store.doc_text(doc_id)[0]
        except (DocUnreadable, InvalidDocId) as exc:
            expected = type(exc)
        assert (type(text) if isinstance(text, Exception) else text) == expected, doc_id
