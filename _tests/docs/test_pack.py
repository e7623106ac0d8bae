"""Tests for the knowledge pack: the rendered index, then every listed doc once, under its id."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from biopb_mcp.docs.store import DocStore
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.index import render_index
from biopb_mcp.text.pack import PACK_DOC_PREFIX, build_pack, pack_heading


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def store(tmp_path: Path) -> DocStore:
    """Shipped: two indexed docs, one new (tail) doc, a banked and an ignored one; local: extras."""
    shipped, local = tmp_path / "shipped", tmp_path / "local"
    _write(
        shipped / "index.md",
        "# biopb docs\n\n## References\n- kernel: run code in the kernel\n"
        "- segment/nuclei: segment nuclei in a DAPI image\n- gone: a doc that does not exist\n\n"
        "ignored: old-way\n",
    )
    _write(shipped / "kernel.md", "# Kernel\nThe shared kernel.\n")
    _write(shipped / "segment/nuclei.md", "# Segment nuclei\n\n## Threshold\nUse otsu.\n")
    _write(shipped / "new-tool.md", "---\ndescription: a tool added in this release\n---\n# New tool\nBody.\n")
    _write(shipped / "_banked/draft.md", "# Draft\nbanked text\n")
    _write(shipped / "old-way.md", "# Old way\nignored text\n")
    docs = DocStore(local, shipped_dir=shipped, version="1.0")
    _write(local / "kernel.md", "# Kernel, locally\nMy notes on the kernel.\n")  # a shadow
    _write(local / "scratch.md", "# Scratch\nunlisted local text\n")
    return docs


def _parts(pack: str) -> dict[str, str]:
    """Part id -> part text, split at the pack's separator lines."""
    pieces = re.split(rf"^{re.escape(PACK_DOC_PREFIX)}(.+)$", pack, flags=re.MULTILINE)
    return {pieces[i]: pieces[i + 1].strip("\n") for i in range(1, len(pieces), 2)}


def test_pack_is_the_index_then_each_listed_doc_once_in_index_order(store: DocStore) -> None:
    pack = build_pack(store)
    listed = store.listed_ids()
    assert listed == ["kernel", "segment/nuclei", "new-tool"]
    separators = re.findall(rf"^{re.escape(PACK_DOC_PREFIX)}(.+)$", pack, flags=re.MULTILINE)
    assert separators == ["index", *listed]
    parts = _parts(pack)
    assert parts["index"] == render_index(store).rstrip()
    for doc_id in listed:
        assert parts[doc_id] == read_doc(store, doc_id).rstrip()
    assert "My notes on the kernel." in parts["kernel"]  # the local copy wins, as in read_doc
    for unlisted in ("banked text", "ignored text", "unlisted local text", "The shared kernel."):
        assert unlisted not in pack


def test_pack_is_deterministic_and_follows_the_store(store: DocStore, tmp_path: Path) -> None:
    first = build_pack(store)
    assert build_pack(store) == first
    store.write_doc("protocols/spots", body="# Count spots\nA validated procedure.\n")
    after = build_pack(store)
    assert pack_heading("protocols/spots") in after.splitlines()
    assert "A validated procedure." in after


def test_pack_keeps_an_unreadable_listed_doc_as_a_note(
    store: DocStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "local" / "segment").mkdir()
    (tmp_path / "local" / "segment" / "nuclei.md").write_bytes(b"\xff\xfe not utf-8")
    with caplog.at_level(logging.WARNING, logger="biopb_mcp.text.pack"):
        pack = build_pack(store)
    parts = _parts(pack)
    assert parts["segment/nuclei"].startswith("(this doc could not be read")
    assert "kernel" in parts and "new-tool" in parts
    assert any("segment/nuclei" in r.getMessage() for r in caplog.records)


def test_pack_keeps_a_listed_symlink_leaving_the_tier_as_a_note(store: DocStore, tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\nsecret text\n", encoding="utf-8")
    (tmp_path / "local" / "segment").mkdir()
    (tmp_path / "local" / "segment" / "nuclei.md").symlink_to(outside)
    parts = _parts(build_pack(store))
    assert parts["segment/nuclei"].startswith("(this doc could not be read")
    assert "secret text" not in build_pack(store)
