"""``python -m bench perf --quick``: the harness runs end to end and emits every figure in shape.

Never asserts a time: the figures are what the harness reports, not what a test may judge.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import perf

REPO = Path(__file__).resolve().parents[2]

EXPECTED_PREFIXES = [
    "handshake: render instructions",
    "handshake: spawn -> initialize, biopb-mcp",
    "handshake: spawn -> initialize, bare MCPServer",
    "handshake: biopb-mcp / bare",
    "docs: MCP floor",
    "docs: read_doc(id) @",
    "docs: write_doc body @",
    "docs: write_doc old/new on index @",
    'docs: read_doc("index") @',
    "docs: read_doc(id) growth",
    "search: ",
    "search: first query after a restart",
    "resources: list page",
    "resources: full walk",
    "memory: server peak RSS",
    "kernel: start / raw",
    "kernel: restart / raw",
    "kernel: execute 1+1 added overhead",
    "kernel: bare MCPServer tool call",
    "kernel: execute 1+1 beyond raw + bare tool call",
    "kernel: execute 1+1 CPU beyond raw + bare tool call",
    "kernel: execute_code",
    "prints tool result size",
]


@pytest.mark.slow
def test_quick_run_emits_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "perf.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "perf", "--quick", "--json", str(out), "--workdir", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["scale"] == "quick"
    assert data["machine"]["cpus"] >= 1
    names = [f["name"] for f in data["figures"]]
    for prefix in EXPECTED_PREFIXES:
        assert any(prefix in n for n in names), f"no figure for {prefix!r} in {names}"
    for fig in data["figures"]:
        assert set(fig) >= {"name", "unit", "median", "p95", "target", "ok", "n"}
        assert isinstance(fig["median"], (int, float)), fig
        # A difference of medians ("added overhead", "beyond") may come out below zero on a noisy box.
        if "added overhead" not in fig["name"] and "beyond" not in fig["name"]:
            assert fig["median"] >= 0, fig
        assert fig["ok"] in (True, False, None)
        assert (fig["ok"] is None) == (fig["target"] == "(report)"), fig
    # Every targeted figure and its line in the printed table agree.
    for fig in data["figures"]:
        line = next(ln for ln in proc.stdout.splitlines() if ln.startswith(fig["name"]))
        assert ("MISS" in line) == (fig["ok"] is False), line
    # The harness cleaned up its temp tree (fixtures, kernels' connection files) behind it.
    assert [p.name for p in tmp_path.iterdir()] == ["perf.json"]


def test_table_and_stats_shape() -> None:
    fig = perf.series("x", [3.0, 1.0, 2.0, 10.0], limit=2.5)
    assert (fig.median, fig.p95, fig.ok, fig.n) == (2.5, 10.0, True, 4)
    miss = perf.ratio("r", [4.0, 4.0], [1.0, 1.0], 2.0)
    assert (miss.median, miss.ok) == (4.0, False)
    text = perf.table([fig, miss, perf.series("y", [1.0])])
    lines = text.splitlines()
    assert lines[0].split()[:5] == ["figure", "median", "p95", "target", "ok?"]
    assert "MISS" in lines[3] and " ok " in f" {lines[2]} " and "(report)" in lines[4]
