"""Version history of local docs through the store (biopb_mcp/docs/history.py)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from _tests.support.write_reports import as_agent_reads
from biopb_mcp.docs.history import HISTORY_DIR, first_change
from biopb_mcp.docs.store import DocStore
from biopb_mcp.errors import DocNotFound, InvalidDocId
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.docs import FOR_AGENT
from biopb_mcp.text.index import render_index


@pytest.fixture
def store(tmp_path: Path) -> DocStore:
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "index.md").write_text("# docs\n\n## References\n- kernel: the kernel\n")
    (shipped / "kernel.md").write_text("# Kernel\n\nOne kernel.\n")
    return DocStore(tmp_path / "local", shipped_dir=shipped, version="1.0", history_keep=50)


V1 = "# Proc\n\nFirst text.\n"
V2 = "# Proc\n\nSecond text.\n"
V3 = "# Proc\n\nSecond text.\nThird line.\n"


def test_three_versions_list_read_v1_and_restore(store: DocStore) -> None:
    for body in (V1, V2, V3):
        store.write_doc("proc", body=body)
    listing = read_doc(store, "proc@history")
    rows = [line for line in listing.splitlines() if line.startswith("- v")]
    assert len(rows) == 3
    assert rows[0].startswith("- v1 · ") and "first version: # Proc" in rows[0]
    assert "line 3: Second text." in rows[1]
    assert rows[2].startswith("- v3 (current) · ") and "line 4: Third line." in rows[2]
    assert f"{len(V1.encode())} bytes" in rows[0]
    v1 = read_doc(store, "proc@v1", FOR_AGENT)
    header, text = v1.split("\n\n", 1)
    assert header.startswith("proc@v1 — version 1, saved ") and 'write_doc("proc", body=' in header
    assert text == V1
    restored = as_agent_reads(store.write_doc("proc", body=text))
    assert restored.changed and "+First text." in restored.text
    assert (store.local_dir / "proc.md").read_text() == V1
    assert "- v4 (current)" in read_doc(store, "proc@history")


def test_a_hand_edit_between_writes_is_kept_as_its_own_version(store: DocStore) -> None:
    store.write_doc("proc", body=V1)
    (store.local_dir / "proc.md").write_text("# Proc\n\nEdited by hand in vim.\n")
    assert "differs from v1 (edited outside the server)" in read_doc(store, "proc@history")
    result = as_agent_reads(store.write_doc("proc", body=V2))  # a stale body write would otherwise clobber the edit
    assert 'kept as v2 (read_doc("proc@v2"))' in result.text
    listing = read_doc(store, "proc@history")
    assert "- v2 · " in listing and "hand edit" in listing
    assert read_doc(store, "proc@v2").endswith("Edited by hand in vim.\n")
    assert read_doc(store, "proc@v3").endswith(V2)


def test_shadow_history_starts_from_the_shipped_text(store: DocStore) -> None:
    store.write_doc("kernel", old="One kernel.", new="One kernel, shared.")
    listing = read_doc(store, "kernel@history")
    assert "- v1 · " in listing and "shipped text" in listing
    assert read_doc(store, "kernel@v1").endswith("# Kernel\n\nOne kernel.\n")


def test_file_found_on_disk_before_the_first_write_is_kept(store: DocStore) -> None:
    render_index(store)
    (store.local_dir / "dropped.md").write_text("# Dropped\n\nBy hand.\n")
    store.write_doc("dropped", old="By hand.", new="By the agent.")
    listing = read_doc(store, "dropped@history")
    assert "found on disk" in listing and "- v2 (current)" in listing


def test_history_is_bounded_and_numbers_keep_counting(tmp_path: Path, store: DocStore) -> None:
    small = DocStore(store.local_dir, shipped_dir=store.shipped_dir, version="1.0", history_keep=3)
    for i in range(6):
        small.write_doc("proc", body=f"# Proc\n\nversion {i}\n")
    listing = read_doc(small, "proc@history")
    assert [line.split(" · ")[0] for line in listing.splitlines() if line.startswith("- v")] == [
        "- v4",
        "- v5",
        "- v6 (current)",
    ]
    assert len(list((small.local_dir / HISTORY_DIR / "proc").glob("v*.txt"))) == 3
    with pytest.raises(DocNotFound, match="kept versions are v4–v6"):
        read_doc(small, "proc@v1")


def test_index_writes_are_versioned_too(store: DocStore) -> None:
    store.write_doc("proc", body=V1)  # appends to the index
    listing = read_doc(store, "index@history")
    assert "found on disk" in listing and "- v2 (current)" in listing and "## Unfiled" in listing
    assert "- proc:" not in read_doc(store, "index@v1")


def test_history_is_never_an_id_nor_listed(store: DocStore) -> None:
    store.write_doc("proc", body=V1)
    store.write_doc("a/b", body=V2)
    assert (store.local_dir / HISTORY_DIR / "a%b").is_dir()
    assert store.shelf.doc_ids() == ["a/b", "kernel", "proc"]
    assert HISTORY_DIR not in render_index(store)
    assert all(not i.startswith(".") for i in store.listed_ids() + list(store.shelf.local_state()))
    for ref in (".history/proc/v1", f"{HISTORY_DIR}/proc"):
        with pytest.raises(InvalidDocId):
            read_doc(store, ref)
        with pytest.raises(InvalidDocId):
            store.write_doc(ref, body="x")
    assert not any(name.endswith(".md") for name in os.listdir(store.local_dir / HISTORY_DIR))


def test_history_of_unknown_and_unwritten_docs(store: DocStore) -> None:
    with pytest.raises(DocNotFound):
        read_doc(store, "nothing@history")
    assert "no local copy yet" in read_doc(store, "kernel@history")
    with pytest.raises(DocNotFound, match="No history"):
        read_doc(store, "kernel@v1")


def test_broken_history_log_is_rebuilt_from_the_files(store: DocStore) -> None:
    store.write_doc("proc", body=V1)
    store.write_doc("proc", body=V2)
    (store.local_dir / HISTORY_DIR / "proc" / "versions.jsonl").write_text("{not json")
    assert read_doc(store, "proc@v1").endswith(V1)
    store.write_doc("proc", body=V3)
    assert "- v3 (current)" in read_doc(store, "proc@history")


def test_first_change_summaries() -> None:
    assert first_change(None, "\n# T\n") == "first version: # T"
    assert first_change("a\nb\n", "a\nc\n") == "line 2: c"
    assert first_change("a\nb\nc", "a\nb") == "line 3 removed: c"


def _time_editors(
    monkeypatch: pytest.MonkeyPatch,
    path: Path,
    *,
    during: str | None = None,
    by_rename: str | None = None,
    after: str | None = None,
) -> None:
    """Editors acting at fixed points of the next write_doc, by wrapping the store's own guard
    (which runs unchanged): `during` saved in place while the temp file is fsynced; `by_rename`
    saved by rename after the guard's reads, at the last instant before the replace; `after`
    saved, in place, after the replace, by an editor that opened the file before it."""
    from biopb_mcp.docs import writes
    from biopb_mcp.fs import nofollow

    real_guard = writes._late_edit_guard

    def timed_guard(*args: object) -> object:
        guard = real_guard(*args)  # type: ignore[arg-type]

        @contextlib.contextmanager
        def around(replacing: nofollow.Replacing) -> Iterator[None]:
            if during is not None:
                path.write_text(during, encoding="utf-8")
            late = os.open(path, os.O_WRONLY) if after is not None else None
            with guard(replacing):
                if by_rename is not None:
                    saved = path.with_name(f".{path.name}.editor-save")
                    saved.write_text(by_rename, encoding="utf-8")
                    os.replace(saved, path)
                yield  # the replace runs here
                if late is not None and after is not None:
                    os.ftruncate(late, 0)
                    os.pwrite(late, after.encode(), 0)
                    os.close(late)

        return around

    monkeypatch.setattr(writes, "_late_edit_guard", timed_guard)


def _kept_texts(store: DocStore, doc_id: str) -> list[str]:
    listing = read_doc(store, f"{doc_id}@history")
    numbers = [line.split()[1] for line in listing.splitlines() if line.startswith("- v")]
    return [read_doc(store, f"{doc_id}@{n}").split("\n\n", 1)[1] for n in numbers]


def test_hand_saves_racing_a_write_are_kept_before_at_and_after_its_replace(
    store: DocStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three editors racing one write_doc: every text is in history, the write's text on disk."""
    store.write_doc("proc", body=V1)
    path = store.local_dir / "proc.md"
    during = "# Proc\n\nSaved in place during the fsync.\n"
    by_rename = "# Proc\n\nSaved by rename at the last instant.\n"
    after = "# Proc\n\nSaved in place after the replace.\n"
    _time_editors(monkeypatch, path, during=during, by_rename=by_rename, after=after)
    store.write_doc("proc", body=V2)

    assert path.read_text(encoding="utf-8") == V2
    assert sorted(p.name for p in store.local_dir.iterdir() if p.name.startswith(".proc")) == []  # no temp left
    assert _kept_texts(store, "proc") == [V1, during, by_rename, after, V2]
    assert read_doc(store, "proc@history").count("hand edit") == 3


def test_a_save_by_rename_at_the_last_instant_is_kept_once_with_no_revert(
    store: DocStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old file read through the guard's fd after the replace is not a new text of the doc:
    it is what the doc held before, and keeping it would read as a revert."""
    store.write_doc("proc", body=V1)
    by_rename = "# Proc\n\nSaved by rename at the last instant.\n"
    _time_editors(monkeypatch, store.local_dir / "proc.md", by_rename=by_rename)
    store.write_doc("proc", body=V2)
    assert _kept_texts(store, "proc") == [V1, by_rename, V2]


def test_a_torn_last_log_line_does_not_swallow_the_next_version(store: DocStore) -> None:
    """A crash mid-append leaves a line without its end: the next append starts a line of its own."""
    store.write_doc("proc", body=V1)
    store.write_doc("proc", body=V2)
    log = store.local_dir / HISTORY_DIR / "proc" / "versions.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-1]) + lines[-1][:20])  # v2's line torn by a crash
    (store.local_dir / "proc.md").write_text("# Proc\n\nA hand edit.\n", encoding="utf-8")
    store.write_doc("proc", body=V3)
    assert _kept_texts(store, "proc")[-2:] == ["# Proc\n\nA hand edit.\n", V3]


@pytest.mark.parametrize(
    "bad", [b"[" * 100_000 + b"]" * 100_000, b'{"n": ' * 50_000 + b"1" + b"}" * 50_000], ids=["lists", "objects"]
)
def test_a_deeply_nested_log_line_is_skipped_and_logged_never_breaking_writes_or_the_listing(
    store: DocStore, caplog: pytest.LogCaptureFixture, bad: bytes
) -> None:
    store.write_doc("proc", body=V1)
    log = store.local_dir / HISTORY_DIR / "proc" / "versions.jsonl"
    with log.open("ab") as f:
        f.write(bad + b"\n")
    with caplog.at_level("WARNING", logger="biopb_mcp.docs.history"):
        store.write_doc("proc", body=V2)
        listing = read_doc(store, "proc@history", FOR_AGENT)
    assert "v1" in listing and "v2 (current)" in listing
    assert _kept_texts(store, "proc") == [V1, V2]
    assert any("unusable line" in r.getMessage() for r in caplog.records)
