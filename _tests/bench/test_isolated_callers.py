"""The bench's isolated environments, built by the package's one builder, are the ones it wrote by
hand before: a bench run's agent and server, the perf trees' children, the perf harness itself,
and the soak's raw servers."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from _tests.support.prepared_trees import ConfigTree
from _tests.support.raw_server import write_config
from bench import perf, perf_fixtures, prepare


def tools_under(xdg: Path, runtime: Path) -> dict[str, str]:
    return {
        "XDG_CONFIG_HOME": str(xdg / "config"),
        "XDG_STATE_HOME": str(xdg / "state"),
        "XDG_DATA_HOME": str(xdg / "data"),
        "XDG_CACHE_HOME": str(xdg / "cache"),
        "XDG_RUNTIME_DIR": str(runtime),
        "JUPYTER_CONFIG_DIR": str(xdg / "jupyter"),
        "JUPYTER_DATA_DIR": str(xdg / "jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "IPYTHONDIR": str(xdg / "ipython"),
        "MPLCONFIGDIR": str(xdg / "matplotlib"),
        "MPLBACKEND": "Agg",
    }


def test_a_bench_runs_child_sees_only_its_tree(tmp_path: Path) -> None:
    tree = ConfigTree(root=tmp_path, bench_docs=True, withheld=[])
    assert prepare.child_env(tree) == {
        "BIOPB_CONFIG_DIR": str(tmp_path),
        **tools_under(tmp_path / "xdg", tmp_path / "run"),
        "PYTHONUNBUFFERED": "1",
    }


def test_a_perf_trees_child_sees_only_its_tree_whose_runtime_dir_is_private(tmp_path: Path) -> None:
    tree = perf_fixtures.make_tree(tmp_path / "tree", n_files=1, doc_bytes=200, index_entries=1)
    assert perf_fixtures.child_env(tree) == {
        "BIOPB_CONFIG_DIR": str(tree.root),
        **tools_under(tree.root / "xdg", tree.root / "xdg" / "run"),
    }
    assert stat.S_IMODE((tree.root / "xdg" / "run").stat().st_mode) == 0o700


def test_the_perf_harness_moves_its_own_platform_dirs_for_the_run_and_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IPYTHONDIR", "/the/users/ipython")
    before = dict(os.environ)
    xdg = tmp_path / "xdg-harness"
    expected = {"BIOPB_CONFIG_DIR": str(tmp_path / "unused-config"), **tools_under(xdg, xdg / "run")}
    with perf._isolated_env(tmp_path):
        assert {key: os.environ[key] for key in expected} == expected
        assert all((xdg / name).is_dir() for name in ("config", "state", "data", "cache", "jupyter", "ipython"))
        assert stat.S_IMODE((xdg / "run").stat().st_mode) == 0o700
    assert dict(os.environ) == before


def test_a_soak_servers_tree_names_every_path_in_its_config(tmp_path: Path) -> None:
    env = write_config(tmp_path, "[kernel]\nwarm_imports = []\n", log_level="DEBUG")
    assert env == {
        "BIOPB_CONFIG_DIR": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_RUNTIME_DIR": str(tmp_path / "runtime"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    assert (tmp_path / "config" / "config.toml").read_text() == (
        f'[server]\nstate_dir = "{tmp_path / "state"}"\nruntime_dir = "{tmp_path / "runtime"}"\n'
        'log_level = "DEBUG"\n[kernel]\nwarm_imports = []\n'
    )
