"""The shipped-docs change manifest (biopb_mcp/docs/manifest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biopb_mcp.docs.manifest import MANIFEST_NAME, Manifest, bump, load
from biopb_mcp.docs.store import DocStore
from biopb_mcp.errors import InvalidDocId
from biopb_mcp.text.doc_views import read_doc
from biopb_mcp.text.index import render_index


def _shipped(root: Path, docs: dict[str, str]) -> Path:
    root.mkdir(exist_ok=True)
    (root / "index.md").write_text("# docs\n" + "".join(f"- {d}: x\n" for d in docs))
    for doc_id, text in docs.items():
        (root / f"{doc_id}.md").write_text(text)
    return root


def test_first_run_reports_nothing_changed_and_records_hashes(tmp_path: Path) -> None:
    shipped = _shipped(tmp_path / "shipped", {"a": "# A\n", "b": "# B\n"})
    render_index(DocStore(tmp_path / "local", shipped_dir=shipped, version="1.0"))
    data = json.loads((tmp_path / "local" / MANIFEST_NAME).read_text())
    assert data["version"] == "1.0" and data["changed"] == [] and set(data["hashes"]) == {"a", "b"}


def test_bump_records_changed_and_added_ids() -> None:
    old = Manifest("1.0", {"a": "h1", "b": "h2", "gone": "h3"}, frozenset())
    new = bump(old, "2.0", {"a": "h1", "b": "h2-new", "added": "h4"})
    assert new.changed == {"b", "added"} and new.previous_version == "1.0"
    assert bump(None, "2.0", {"a": "h"}).changed == frozenset()


def test_a_bump_is_computed_once_and_survives_restarts_until_the_next(tmp_path: Path) -> None:
    shipped = _shipped(tmp_path / "shipped", {"a": "# A\n"})
    local = tmp_path / "local"
    render_index(DocStore(local, shipped_dir=shipped, version="1.0"))
    (shipped / "a.md").write_text("# A v2\n")
    render_index(DocStore(local, shipped_dir=shipped, version="2.0"))
    assert load(local / MANIFEST_NAME).changed == {"a"}  # type: ignore[union-attr]
    render_index(DocStore(local, shipped_dir=shipped, version="2.0"))  # restart, same version
    assert load(local / MANIFEST_NAME).changed == {"a"}  # type: ignore[union-attr]
    render_index(DocStore(local, shipped_dir=shipped, version="3.0"))
    assert load(local / MANIFEST_NAME).changed == frozenset()  # type: ignore[union-attr]


def test_a_broken_manifest_counts_as_a_first_run(tmp_path: Path) -> None:
    shipped = _shipped(tmp_path / "shipped", {"a": "# A\n"})
    local = tmp_path / "local"
    local.mkdir()
    (local / MANIFEST_NAME).write_text("{broken")
    assert load(local / MANIFEST_NAME) is None
    render_index(DocStore(local, shipped_dir=shipped, version="1.0"))
    assert load(local / MANIFEST_NAME) == Manifest("1.0", load(local / MANIFEST_NAME).hashes, frozenset())  # type: ignore[union-attr]


def test_the_manifest_is_not_a_doc(tmp_path: Path) -> None:
    shipped = _shipped(tmp_path / "shipped", {"a": "# A\n"})
    store = DocStore(tmp_path / "local", shipped_dir=shipped, version="1.0")
    render_index(store)
    assert store.shelf.doc_ids() == ["a"]
    for ref in (".shipped-manifest.json", ".shipped-manifest"):
        with pytest.raises(InvalidDocId):
            read_doc(store, ref)
        with pytest.raises(InvalidDocId):
            store.write_doc(ref, body="{}")
