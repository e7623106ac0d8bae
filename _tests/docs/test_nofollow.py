"""The store's own files never follow a link: planted links are refused or replaced, never written
through or read from, and a folder flipped to a link while writes run puts nothing outside."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from biopb_mcp.docs.history import HISTORY_DIR, VERSIONS_FILE
from biopb_mcp.docs.manifest import MANIFEST_NAME
from biopb_mcp.docs.store import DocStore
from biopb_mcp.errors import DocError, DocUnreadable
from biopb_mcp.text.doc_views import read_doc

SECRET = "secret-outside-the-tier"


def snapshot(root: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, root)] = Path(path).read_bytes()
    return out


@pytest.fixture
def tiers(tmp_path: Path) -> tuple[DocStore, Path]:
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "index.md").write_text("# docs\n\n## Procedures\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"# Secret\n\n{SECRET}\n")
    (outside / "victim.txt").write_text(f"{SECRET}\n")
    store = DocStore(tmp_path / "local", shipped_dir=shipped, version="1.0")
    store.write_doc("note", body="# Note\n\nfirst\n")
    return store, outside


def test_a_linked_index_is_refused_and_a_body_write_replaces_the_link(tiers: tuple[DocStore, Path]) -> None:
    store, outside = tiers
    before = snapshot(outside)
    index = store.local_dir / "index.md"
    index.unlink()
    index.symlink_to(outside / "secret.md")
    shown = read_doc(store, "index")
    assert SECRET not in shown and "symbolic link" in shown
    with pytest.raises(DocUnreadable, match="symbolic link"):
        store.write_doc("index", old="Secret", new="Mine")
    store.write_doc("index", body="# docs\n\n## Procedures\n- note: a note\n")
    assert not index.is_symlink() and "- note: a note" in index.read_text()
    assert snapshot(outside) == before


def test_a_planted_history_version_link_is_replaced_not_written_through(tiers: tuple[DocStore, Path]) -> None:
    store, outside = tiers
    before = snapshot(outside)
    folder = store.local_dir / HISTORY_DIR / "note"
    (folder / "v2.txt").symlink_to(outside / "victim.txt")
    store.write_doc("note", body="# Note\n\nsecond\n")
    assert not (folder / "v2.txt").is_symlink()
    assert "second" in read_doc(store, "note@v2")
    assert snapshot(outside) == before


@pytest.mark.timeout(30)
def test_a_history_version_linked_to_an_endless_device_is_refused(tiers: tuple[DocStore, Path]) -> None:
    store, _ = tiers
    store.write_doc("note", body="# Note\n\nsecond\n")
    v1 = store.local_dir / HISTORY_DIR / "note" / "v1.txt"
    v1.unlink()
    v1.symlink_to("/dev/zero")
    with pytest.raises(DocUnreadable, match="symbolic link"):
        read_doc(store, "note@v1")


def test_a_linked_versions_log_is_refused_and_its_target_untouched(tiers: tuple[DocStore, Path]) -> None:
    store, outside = tiers
    before = snapshot(outside)
    log = store.local_dir / HISTORY_DIR / "note" / VERSIONS_FILE
    log.unlink()
    log.symlink_to(outside / "victim.txt")
    with pytest.raises(DocError, match="symbolic link"):
        store.write_doc("note", body="# Note\n\nsecond\n")
    with pytest.raises(DocError, match="symbolic link"):
        read_doc(store, "note@history")
    assert snapshot(outside) == before


def test_a_linked_history_folder_is_refused(tiers: tuple[DocStore, Path]) -> None:
    store, outside = tiers
    before = snapshot(outside)
    history = store.local_dir / HISTORY_DIR
    history.rename(store.local_dir / ".history-old")
    history.symlink_to(outside)
    with pytest.raises(DocError, match="symbolic link"):
        store.write_doc("note", body="# Note\n\nsecond\n")
    with pytest.raises(DocError, match="symbolic link"):
        read_doc(store, "note@history")
    assert snapshot(outside) == before


def test_linked_lock_and_manifest_are_never_written_through(tmp_path: Path, tiers: tuple[DocStore, Path]) -> None:
    store, outside = tiers
    before = snapshot(outside)
    lock = store.local_dir / ".lock"
    lock.unlink()
    lock.symlink_to(outside / "victim.txt")
    with pytest.raises(DocError, match="symbolic link"):
        store.write_doc("note", body="# Note\n\nsecond\n")
    lock.unlink()
    manifest = store.local_dir / MANIFEST_NAME
    manifest.unlink()
    manifest.symlink_to(outside / "victim.txt")
    fresh = DocStore(store.local_dir, shipped_dir=store.shipped_dir, version="2.0")  # a bump rewrites it
    assert fresh.write_doc("note", body="# Note\n\nsecond\n").changed
    assert not manifest.is_symlink()
    assert snapshot(outside) == before


FLIP = """
import os, random, shutil, sys, time
local, outside = sys.argv[1], sys.argv[2]
sub, parked, link = (os.path.join(local, n) for n in ("sub", "sub-parked", "sub-link"))
while True:
    # A write may recreate `sub` while it is away: then that fresh folder is parked instead.
    try:
        os.symlink(outside, link)
        os.rename(sub, parked)  # the real folder stays inside the tier
        os.rename(link, sub)  # sub is now a link leading out of the tier
    except OSError:
        pass
    time.sleep(random.random() * 0.004)  # each state lasts about as long as a write's fsync
    for step in (lambda: os.unlink(link), lambda: os.unlink(sub), lambda: os.rename(parked, sub)):
        try:
            step()
        except OSError:
            pass
    if os.path.isdir(parked):
        shutil.rmtree(parked, ignore_errors=True)
    time.sleep(random.random() * 0.004)
"""


@pytest.mark.timeout(120)
def test_flipping_a_folder_to_a_link_while_writing_puts_nothing_outside(tmp_path: Path) -> None:
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "index.md").write_text("# docs\n\n## Procedures\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    local = tmp_path / "local"
    store = DocStore(local, shipped_dir=shipped, version="1.0", history_keep=0)
    (local / "sub").mkdir(parents=True)
    ids = [f"sub/n{i}" for i in range(8)]
    for doc_id in ids:
        store.write_doc(doc_id, body=f"# {doc_id}\n\nfirst\n")
    # The flipper is its own process, as another party on a shared folder would be: a thread would
    # only switch at the interpreter's whims and rarely land inside the window.
    flipper = subprocess.Popen([sys.executable, "-c", FLIP, str(local), str(outside)])
    written = refused = n = 0
    deadline = time.monotonic() + 90
    try:
        while not (local / "sub-link").exists() and not (local / "sub").is_symlink():
            time.sleep(0.001)  # wait for the first flip
        # A thousand writes, and on until both sides of the race were hit: how the flips and the
        # writes interleave is the scheduler's to decide, more so on a loaded machine.
        while n < 1_000 or not (written and refused):
            assert time.monotonic() < deadline, f"after {n} writes: {written} written, {refused} refused"
            try:
                store.write_doc(ids[n % len(ids)], body=f"# doc\n\nwrite {n}\n")
            except DocError:
                refused += 1
            else:
                written += 1
            n += 1
    finally:
        flipper.terminate()
        flipper.wait(10)
    assert written + refused == n
    leaked = snapshot(outside)
    assert leaked == {}, f"{len(leaked)} of {written} writes landed outside the tier: {sorted(leaked)[:5]}"


def test_a_folder_swapped_for_a_link_after_the_walk_never_shows_an_outside_description(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listings describe docs found by a walk; the folder may become a link before the read."""
    local, shipped, outside = tmp_path / "local", tmp_path / "shipped", tmp_path / "outside"
    (local / "sub").mkdir(parents=True)
    shipped.mkdir()
    outside.mkdir()
    (local / "sub" / "doc.md").write_text("# Doc\n\nAn ordinary lab doc.\n")
    (outside / "doc.md").write_text("# Secret\n\nSECRET-DESCRIPTION outside the tier.\n")
    store = DocStore(local_dir=local, shipped_dir=shipped)
    located = store.shelf.locate

    def locate_then_swap(doc_id: str):
        found = located(doc_id)
        (local / "sub").rename(local / "moved")
        (local / "sub").symlink_to(outside, target_is_directory=True)
        return found

    monkeypatch.setattr(store.shelf, "locate", locate_then_swap)
    try:
        info = store.info("sub/doc")
    except DocUnreadable:
        return
    assert "SECRET" not in (info.description or "") + (info.title or "")
