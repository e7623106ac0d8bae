"""`python -m bench selftest`'s output: which agent each line is about, and failures it demands read
as expected."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.__main__ import main


def test_selftest_lines_name_the_agent_read_demanded_failures_as_expected_and_sum_up_per_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "selftest",
                "--agents",
                "nothing",
                "--cases",
                "crop-roi,split-channels",
                "--out",
                str(tmp_path),
                "--timeout",
                "60",
                "--repeat",
                "2",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    runs = [line for line in out.splitlines() if line.startswith("[")]
    assert len(runs) == 12, out
    for line in runs:
        assert re.match(
            r"\[nothing +\d+/12 +\d+\.\ds\] (crop-roi|split-channels) (docs|procedures-off|nodocs): fail \(expected\) "
            r"\(\d+(\.\d+)? s\)$",
            line,
        ), line
    assert "selftest: agent nothing (1 of 1), 12 runs" in out
    assert re.search(
        r"^selftest: nothing: 12 runs in \d+ s, 0 passed, 12 failed, all as expected$", out, re.MULTILINE
    ), out
    summary = (tmp_path / "nothing" / "summary.md").read_text(encoding="utf-8")
    for section in (
        "## Error against the truth per arm",
        "## Paired comparison of errors",
        "## Agreement across repeats",
        "## Cost per solved case",
    ):
        assert section in summary
    assert "2 repeats, all on the same data" in summary
    # nothing answers: no run has a number, and no arm solves a case
    assert "| crop-roi | (no answer in any run) | no answer 2/2 | no answer 2/2 | no answer 2/2 |" in summary
    assert "| docs | 0/4 | – (none solved)" in summary
    assert "| crop-roi | – | –; –; 0/2 | –; –; 0/2 | –; –; 0/2 |" in summary
