"""The soak's bounds phases at small counts: they run and find nothing (the harness, not the scale)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.__main__ import main as bench_main

pytestmark = pytest.mark.slow

PHASES = "names,doc-answers,wide-inputs,edit-memory"


def test_quick_bounds_phases_run_and_find_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "soak.json"
    assert bench_main(["soak", "--quick", "--phases", PHASES, "--json", str(out), "--workdir", str(tmp_path)]) == 0
    data = json.loads(out.read_text())
    assert set(data["seconds"]) == set(PHASES.split(","))
    counts = data["counts"]
    assert counts["names: completions"] == counts["names: hostile file names made"] > 0
    assert counts["doc answers: read_doc pages"] >= 6 and counts["wide inputs: arguments carried"] == 32
    assert counts["edit memory: edits of the listed procedure"] == 2
    assert not any(data["found"].values()), capsys.readouterr().out
