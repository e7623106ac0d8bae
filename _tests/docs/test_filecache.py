"""The one stat-validated cache: values kept only while their files' stamps hold and are settled."""

from __future__ import annotations

import os
import time
from pathlib import Path

from biopb_mcp.fs.stamps import RACY_NS, FileCache, is_settled, stamp, stamps


def _age(path: Path, seconds: float) -> None:
    past = time.time_ns() - int(seconds * 1e9)
    os.utime(path, ns=(past, past))


def test_a_settled_file_is_cached_until_its_stamp_changes(tmp_path: Path) -> None:
    f = tmp_path / "a.md"
    f.write_text("one")
    _age(f, 10)
    cache: FileCache[str, str] = FileCache()
    st = (stamp(f),)
    assert cache.put("a", st, "one", time.time_ns())
    assert cache.get("a", (stamp(f),)) == "one"
    f.write_text("two!")  # new size and mtime
    assert cache.get("a", (stamp(f),)) is None


def test_a_racy_file_is_never_cached(tmp_path: Path) -> None:
    f = tmp_path / "a.md"
    f.write_text("one")  # modified just now: a same-size edit could keep this stamp
    now = time.time_ns()
    os.utime(f, ns=(now, now))  # "just now" is pinned: a slow machine's pause cannot age the file
    cache: FileCache[str, str] = FileCache()
    assert not cache.put("a", (stamp(f),), "one", now)
    assert cache.get("a", (stamp(f),)) is None
    assert not is_settled(stamp(f), now + RACY_NS // 2)


def test_the_time_taken_before_the_read_decides(tmp_path: Path) -> None:
    f = tmp_path / "a.md"
    f.write_text("x")
    _age(f, 3)
    st = stamp(f)
    assert st is not None
    assert is_settled(st, st[1] + RACY_NS + 1)
    assert not is_settled(st, st[1] + RACY_NS - 1)


def test_a_file_replaced_by_another_with_the_same_mtime_and_size_misses(tmp_path: Path) -> None:
    f, g = tmp_path / "a.md", tmp_path / "b.md"
    f.write_text("one")
    g.write_text("two")
    _age(f, 10)
    before = stamp(f)
    assert before is not None
    os.utime(g, ns=(before[1], before[1]))
    cache: FileCache[str, str] = FileCache()
    cache.put("a", (before,), "one", time.time_ns())
    os.replace(g, f)  # same mtime and size, another inode
    assert cache.get("a", (stamp(f),)) is None


def test_a_value_over_several_files_and_a_missing_one(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    _age(d, 10)
    paths = [str(d), str(tmp_path / "absent")]
    cache: FileCache[str, list[str]] = FileCache(max_entries=1)
    assert cache.put("ids", stamps(paths), ["x"], time.time_ns())
    assert cache.get("ids", stamps(paths)) == ["x"]
    (tmp_path / "absent").write_text("now here")
    assert cache.get("ids", stamps(paths)) is None
    cache.put("other", stamps([str(d)]), ["y"], time.time_ns())
    assert len(cache) == 1  # the bound drops the oldest


def test_a_weighed_cache_keeps_its_values_under_the_bound(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("x")
    _age(f, 10)
    settled = (stamp(f),)
    cache: FileCache[str, str] = FileCache(max_weight=10, weigh=len)
    assert cache.put("a", settled, "aaaa", time.time_ns()) and cache.put("b", settled, "bbbb", time.time_ns())
    assert cache.put("c", settled, "cccc", time.time_ns())  # 12 > 10: the oldest goes
    assert cache.get("a", settled) is None and cache.get("c", settled) == "cccc" and cache.weight == 8
    assert cache.put("b", settled, "b", time.time_ns()) and cache.weight == 5  # a new value replaces its weight
    assert not cache.put("d", settled, "d" * 11, time.time_ns())  # alone over the bound: not kept
    assert cache.get("d", settled) is None and cache.weight == 5
