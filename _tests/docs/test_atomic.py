"""Atomic writes leave temp files only when a writer dies; those are swept once they are stale."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from biopb_mcp.docs.store import DocStore
from biopb_mcp.fs.atomic import STALE_TEMP_SECONDS, sweep_stale_temps, write_atomic
from biopb_mcp.text.index import render_index


def _temp(directory: Path, name: str, age: float) -> Path:
    path = directory / f".{name}.4242.0123abcd.tmp"
    path.write_text("half a doc")
    then = time.time() - age
    os.utime(path, (then, then))
    return path


def test_sweep_removes_only_stale_temp_files(tmp_path: Path) -> None:
    (tmp_path / "lab").mkdir()
    stale = _temp(tmp_path / "lab", "protocol.md", STALE_TEMP_SECONDS + 60)
    fresh = _temp(tmp_path, "index.md", 5)
    doc = tmp_path / "old-doc.md"
    doc.write_text("# a doc\n")
    os.utime(doc, (0, 0))
    lookalike = tmp_path / ".notes.tmp"  # not our temp-name shape: left alone
    lookalike.write_text("x")
    os.utime(lookalike, (0, 0))

    assert sweep_stale_temps(tmp_path) == 1
    assert not stale.exists()
    assert fresh.exists() and doc.exists() and lookalike.exists()


def test_a_write_leaves_no_temp_file(tmp_path: Path) -> None:
    write_atomic(tmp_path / "a.md", "text\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md"]


def test_the_store_sweeps_its_local_tier_once_on_first_access(tmp_path: Path) -> None:
    local = tmp_path / "docs"
    local.mkdir()
    stale = _temp(local, "x.md", STALE_TEMP_SECONDS + 60)
    render_index(DocStore(local))
    sweeper = next((t for t in threading.enumerate() if t.name == "docs-temp-sweep"), None)
    if sweeper is not None:
        sweeper.join(10)
    assert not stale.exists()


def test_a_folder_swapped_for_a_link_mid_sweep_never_steers_an_unlink_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep runs over a tier that others may share: a folder may become a link at any time."""
    from biopb_mcp.fs import atomic

    tier, outside = tmp_path / "tier", tmp_path / "outside"
    (tier / "sub").mkdir(parents=True)
    outside.mkdir()
    inside = _temp(tier / "sub", "a.md", STALE_TEMP_SECONDS + 60)
    victim = _temp(outside, "a.md", STALE_TEMP_SECONDS + 60)
    real = atomic._TEMP_NAME

    class SwapOnFirstLook:
        """Swaps tier/sub for a link to `outside` right after the sweep has listed it."""

        swapped = False

        def match(self, name: str) -> object:
            if not self.swapped:
                self.swapped = True
                (tier / "sub").rename(tier / "moved")
                (tier / "sub").symlink_to(outside, target_is_directory=True)
            return real.match(name)

    monkeypatch.setattr(atomic, "_TEMP_NAME", SwapOnFirstLook())
    sweep_stale_temps(tier)
    assert victim.exists(), "the sweep followed a link out of the tier and deleted a file there"
    assert not (tier / "moved" / inside.name).exists()
