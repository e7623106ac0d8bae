"""The docs' one visibility model: each doc's state, and one model per state of the files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from biopb_mcp.docs.store import DocStore
from biopb_mcp.docs.visibility import Shown
from biopb_mcp.fs import stamps


def _tiers(tmp_path: Path) -> DocStore:
    local, shipped = tmp_path / "local", tmp_path / "shipped"
    files = {
        shipped / "index.md": "# i\n",
        shipped / "entry.md": "# Entry\n",
        shipped / "tail.md": "# In the New-shipped tail\n",
        shipped / "skipped.md": "# Ignored\n",
        shipped / "_bank/kept.md": "# Banked\n",
        shipped / "secret.md": "# Withheld\n",
        local / "lab/a.md": "# Under a folder line\n",
        local / "lab/_draft.md": "# Banked under a folder line\n",
        local / "loose.md": "# No line\n",
        local / "index.md": "# i\n\n## Docs\n- entry: e\n- lab/: lab docs\n- gone: no such doc\n\nignored: skipped\n",
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return DocStore(local, shipped_dir=shipped, version="1.0", withhold=["secret"])


def test_each_doc_has_one_state_and_every_reader_sees_the_same(tmp_path: Path) -> None:
    store = _tiers(tmp_path)
    seen = store.visibility()
    states = {
        doc_id: seen.state(doc_id)
        for doc_id in ("entry", "tail", "lab/a", "skipped", "_bank/kept", "lab/_draft", "loose", "secret", "gone")
    }
    assert states == {
        "entry": Shown.LISTED,
        "tail": Shown.LISTED,
        "lab/a": Shown.SURFACED,
        "skipped": Shown.IGNORED,
        "_bank/kept": Shown.BANKED,
        "lab/_draft": Shown.BANKED,
        "loose": Shown.UNLISTED,
        "secret": Shown.WITHHELD,
        "gone": Shown.ABSENT,
    }
    assert store.listed_ids() == ["entry", "tail"]
    assert store.surfaced_ids() == {"entry", "tail", "lab/a"}
    assert "secret" not in seen.reading_order() and "skipped" not in seen.reading_order()
    assert seen.reading_order()[:4] == ["index", "entry", "lab/a", "tail"]


def test_the_model_is_kept_while_nothing_changed_and_rebuilt_after_a_change(tmp_path: Path) -> None:
    store = _tiers(tmp_path)
    store.visibility()  # the first access writes the manifest
    old = time.time() - 3600
    for top, _dirs, files in os.walk(tmp_path):
        for name in files:
            os.utime(os.path.join(top, name), (old, old))
        os.utime(top, (old, old))
    first = store.visibility()
    assert store.visibility() is first  # settled stamps: built once
    (store.local_dir / "lab" / "b.md").write_text("# New under the folder line\n", encoding="utf-8")
    again = store.visibility()
    assert again is not first and again.state("lab/b") is Shown.SURFACED


def test_asking_the_tier_per_id_finds_exactly_what_the_walk_finds(tmp_path: Path) -> None:
    """The index is rendered without a walk, by asking the tier per id: that answer must be the
    walk's for every kind of place (links in and out, linked folders, folders named like docs)."""
    from biopb_mcp.docs.tier import Tier

    root, outside = tmp_path / "local", tmp_path / "outside"
    (root / "lab" / "deep").mkdir(parents=True)
    (root / ".hidden").mkdir()
    (root / "dir.md").mkdir()
    outside.mkdir()
    for rel in ("plain.md", "lab/a.md", "lab/deep/b.md", ".hidden/c.md", "lab/.d.md", "Bad Name.md"):
        (root / rel).write_text("# x\n", encoding="utf-8")
    (outside / "secret.md").write_text("# secret\n", encoding="utf-8")
    (outside / "folder").mkdir()
    (outside / "folder" / "e.md").write_text("# e\n", encoding="utf-8")
    os.symlink(root / "plain.md", root / "inside-link.md")
    os.symlink(outside / "secret.md", root / "escape.md")
    os.symlink(outside / "folder", root / "linked")
    os.symlink(root / "lab", root / "lab-again")
    tier = Tier(root, writable=True)
    walked = set(tier.files())
    asked = [
        "plain", "lab/a", "lab/deep/b", "hidden/c", "lab/d", "Bad Name", "dir", "inside-link", "escape",
        "linked/e", "lab-again/a", "index", "missing", "lab/missing", "plain/x",
    ]  # fmt: skip
    assert walked == {"plain", "lab/a", "lab/deep/b", "inside-link"}
    assert {doc_id for doc_id in asked if tier.has_doc(doc_id)} == walked
    folders: dict[str, bool] = {}  # one memo for all, as a model asks
    assert {doc_id for doc_id in asked if tier.has_doc(doc_id, folders)} == walked


def test_while_the_tiers_are_racy_each_read_sees_the_last_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No model is kept while a stamp is racy: a doc added, removed or folder swapped within the
    racy window shows on the very next read, though the stamps are taken only up to the first
    racy one and the folders' answers are shared between ids of one model."""
    monkeypatch.setattr(stamps, "RACY_NS", 3600 * 10**9)  # every stamp stays racy
    store = _tiers(tmp_path)
    store.visibility()  # the first access writes the manifest and lists the folders
    first = store.visibility()
    assert first.state("lab/b") is Shown.ABSENT and first.inputs == {}  # built from reads alone
    (store.local_dir / "lab" / "b.md").write_text("# New\n", encoding="utf-8")
    assert store.visibility().state("lab/b") is Shown.SURFACED
    assert store.visibility() is not store.visibility()  # none kept
    index = store.local_dir / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + "- lab/c: c\n", encoding="utf-8")
    assert "lab/c" not in store.listed_ids()
    (store.local_dir / "lab" / "c.md").write_text("# C\n", encoding="utf-8")
    assert store.listed_ids()[-2:] == ["lab/c", "tail"]  # the entry in index order, then the tail
    os.rename(store.local_dir / "lab", tmp_path / "lab-moved")
    os.symlink(tmp_path / "lab-moved", store.local_dir / "lab")  # the folder is now a link
    assert "lab/c" not in store.listed_ids()
    assert store.visibility().state("lab/a") is Shown.ABSENT
